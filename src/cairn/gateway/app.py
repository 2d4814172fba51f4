"""The gateway's HTTP surface: ``POST /v1/chat/completions``, ``POST /v1/messages``, ``GET /v1/models``.

A client points its base URL here and presents a Cairn token as its API key (``Authorization:
Bearer cairn_…`` from OpenAI clients, ``x-api-key: cairn_…`` from Anthropic ones). The gateway
resolves the token (tenancy, permissions, revocation are Cairn's), asks the service for the memory
block of the request's working context, inserts it, and forwards the request with the gateway's own
provider key. The answer is the upstream's: its status, its headers (hop-by-hop ones aside) and its
bytes; ``stream: true`` answers are relayed event by event as they arrive, and a client that goes
away closes the upstream request.

The provider key lives in ``Upstream`` (excluded from its repr), is set on the outgoing request
only, and is never logged, stored or echoed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from cairn.core import jsonin
from cairn.core.gateway import attribution, thread
from cairn.errors import CairnError
from cairn.gateway import protocols
from cairn.service.conversations import Conversations

log = logging.getLogger("cairn.gateway")

# Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus what the relay recomputes.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "content-encoding",
        "accept-encoding",
    }
)
# Credentials and Cairn's own headers never travel upstream: the provider sees the gateway's key only.
_NOT_UPSTREAM = _HOP | {
    "authorization", "x-api-key", "cookie",
    "x-cairn-repo", "x-cairn-branch", "x-cairn-project", "x-cairn-conversation", "x-cairn-extract",
}  # fmt: skip
NO_KEY = "the API key is a Cairn token: set OPENAI_API_KEY / ANTHROPIC_API_KEY to cairn_…"
_NOT_DOWNSTREAM = _HOP | {"set-cookie", "server", "date"}


@dataclass(frozen=True)
class Upstream:
    """Where requests go and the provider key they carry (``key`` never in a repr or a log)."""

    url: str
    key: str | None = field(default=None, repr=False)
    timeout: float = 600.0  # a long generation streams for minutes; the read timeout is per chunk

    @property
    def base(self) -> str:
        """The provider's origin: a trailing ``/v1`` is dropped, the gateway's paths carry it."""
        url = self.url.rstrip("/")
        return url[:-3] if url.endswith("/v1") else url


@dataclass
class Gateway:
    """The gateway's state: the service it reads through, the upstream and its HTTP client."""

    conversations: Conversations
    upstream: Upstream
    client: Any = None  # httpx2.AsyncClient, opened on first use in the serving event loop
    extract: bool = False  # extraction after each recorded turn (gateway.extract; X-Cairn-Extract per request)
    # Called with each turn's recording result, after the response went out (tests wait on it), and
    # with each extraction job's result.
    after_record: Callable[[dict[str, Any]], None] | None = None
    after_extract: Callable[[dict[str, Any]], None] | None = None
    extraction: Any = None  # service.extraction.Extraction, made on first use
    executor: Any = None  # one background thread for extraction jobs, made on first use

    def extract_later(self, principal: Any, conversation_id: int, turn: int) -> None:
        """Queue an extraction job for a recorded turn; it runs on the gateway's one job thread."""
        from concurrent.futures import ThreadPoolExecutor

        from cairn.service.extraction import Extraction

        if self.executor is None:
            self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cairn-extract")
        if self.extraction is None:
            self.extraction = Extraction(self.conversations.cairn)

        def job() -> None:
            try:
                result = self.extraction.run(principal, conversation_id, turn, self.ask)
            except Exception as exc:  # noqa: BLE001 - a background job's failure is logged by type, never its text
                log.warning("extraction failed: %s", type(exc).__name__)
                result = {"written": [], "error": type(exc).__name__}
            if self.after_extract is not None:
                self.after_extract(result)

        self.executor.submit(job)

    def ask(self, system: str, user: str, conversation: dict[str, Any]) -> str:
        """The extraction request to the upstream, in the conversation's own protocol and model."""
        import httpx2

        anthropic = conversation["protocol"] == protocols.ANTHROPIC
        headers = {"content-type": "application/json"}
        if anthropic:
            path = "/v1/messages"
            body: dict[str, Any] = {
                "model": conversation["model"], "max_tokens": 1024, "system": system,
                "messages": [{"role": "user", "content": user}],
            }  # fmt: skip
            headers["anthropic-version"] = "2023-06-01"
            if self.upstream.key:
                headers["x-api-key"] = self.upstream.key
        else:
            path = "/v1/chat/completions"
            body = {
                "model": conversation["model"],
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            }
            if self.upstream.key:
                headers["authorization"] = f"Bearer {self.upstream.key}"
        with httpx2.Client(timeout=httpx2.Timeout(self.upstream.timeout, connect=30.0), trust_env=False) as client:
            reply = client.post(self.upstream.base + path, json=body, headers=headers)
        if reply.status_code >= 400:
            raise CairnError("UPSTREAM", f"the upstream answered {reply.status_code} to the extraction request")
        return protocols.answer_text(protocols.ANTHROPIC if anthropic else protocols.OPENAI, reply.content)

    def http(self) -> Any:
        import httpx2

        if self.client is None:
            self.client = httpx2.AsyncClient(
                timeout=httpx2.Timeout(self.upstream.timeout, connect=30.0),
                limits=httpx2.Limits(max_connections=256, max_keepalive_connections=64),
                follow_redirects=False,
                trust_env=False,  # no proxy or netrc from the environment may see the provider key
            )
        return self.client

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.executor = None


def configure(cairn: Any, upstream: str | None = None, key_env: str | None = None) -> Gateway:
    """The gateway over ``cairn`` for flags or, where a flag is absent, the ``[gateway]`` settings.

    The provider key is read from the environment variable the configuration *names*; a key is never
    a setting or a flag, so it is not in a config file, a shell history or ``cairn config show``.
    """
    import os

    cfg = cairn.settings
    url = (upstream or cfg.gateway_upstream or "").strip()
    if not url.startswith(("http://", "https://")):
        raise CairnError(
            "INVALID_INPUT",
            "no upstream: pass --upstream https://api.openai.com (or set gateway.upstream in config.toml)",
        )
    env = (key_env or cfg.gateway_upstream_key_env or "").strip()
    key = None
    if env:
        key = os.environ.get(env, "").strip() or None
        if key is None:
            raise CairnError("INVALID_INPUT", f"${env} is empty or unset; export the provider key there")
    return Gateway(Conversations(cairn), Upstream(url, key), extract=bool(cfg.gateway_extract))


def from_settings(cairn: Any) -> Gateway | None:
    """The gateway ``cairn serve`` mounts: one when ``gateway.upstream`` is set, else none."""
    return configure(cairn) if cairn.settings.gateway_upstream else None


def _protocol_of(request: Request) -> str:
    """Which SDK is calling: the endpoint says so; for ``/v1/models`` the credential header does."""
    path = request.url.path
    if path.endswith("/messages"):
        return protocols.ANTHROPIC
    if path.endswith("/chat/completions"):
        return protocols.OPENAI
    anthropic = "x-api-key" in request.headers or "anthropic-version" in request.headers
    return protocols.ANTHROPIC if anthropic else protocols.OPENAI


def _secret(request: Request) -> str:
    key = request.headers.get("x-api-key", "").strip()
    if key:
        return key
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def _error(protocol: str, exc: CairnError) -> JSONResponse:
    from cairn.api.problems import STATUS

    status = STATUS.get(exc.code, 500)
    return JSONResponse(protocols.error_body(protocol, status, exc.code, exc.message), status_code=status)


def _upstream_headers(request: Request, protocol: str, upstream: Upstream) -> dict[str, str]:
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_UPSTREAM}
    headers["accept-encoding"] = "identity"  # the bytes are relayed as they come, never re-encoded
    if upstream.key:
        if protocol == protocols.ANTHROPIC:
            headers["x-api-key"] = upstream.key
        else:
            headers["authorization"] = f"Bearer {upstream.key}"
    return headers


def _downstream_headers(headers: Any) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _NOT_DOWNSTREAM}


def router(gateway: Gateway) -> APIRouter:
    """The gateway's routes, for a standalone gateway or mounted in ``cairn serve``'s API."""
    from cairn.hosts.protocols import looks_failed

    api = APIRouter(tags=["gateway"])
    conversations = gateway.conversations

    async def principal_of(request: Request) -> Any:
        secret = _secret(request)
        if not secret:
            raise CairnError("UNAUTHENTICATED", NO_KEY)
        return await anyio.to_thread.run_sync(conversations.cairn.resolve_token, secret)

    async def proxy(request: Request) -> Response:
        protocol = _protocol_of(request)
        try:
            secret = _secret(request)
            if not secret:
                raise CairnError("UNAUTHENTICATED", NO_KEY)
            raw = await request.body()
            body = jsonin.loads(raw, "the request body")
            if not isinstance(body, dict):
                raise CairnError("INVALID_INPUT", "the request body must be a JSON object")
            turn = protocols.latest_turn(protocol, body)
            name = thread(protocol, request.headers.get("x-cairn-conversation"), protocols.opening(protocol, body))

            def prepare() -> tuple[Any, Any, Any, int]:
                # One hop to a worker thread for the three reads. The epoch before the block: an
                # erasure after this point makes the recording write nothing.
                principal = conversations.cairn.resolve_token(secret)
                where = attribution(
                    repo=request.headers.get("x-cairn-repo"),
                    branch=request.headers.get("x-cairn-branch"),
                    project=request.headers.get("x-cairn-project"),
                    token_patterns=principal.scope_patterns,
                )
                snapshot = conversations.epoch(principal)
                memory = conversations.memory(principal, where, turn, failed=looks_failed(turn))
                return principal, where, memory, snapshot

            principal, where, memory, snapshot = await anyio.to_thread.run_sync(prepare)
        except CairnError as exc:
            return _error(protocol, exc)
        content = raw
        if memory.block is not None:
            content = json.dumps(protocols.inject(protocol, body, memory.block), ensure_ascii=False).encode()
        model = body.get("model") if isinstance(body.get("model"), str) else None
        choice = request.headers.get("x-cairn-extract", "").strip().lower()
        extract = choice in ("1", "on", "true", "yes") or (
            gateway.extract and choice not in ("0", "off", "false", "no")
        )
        messages = protocols.conversation(protocol, body)

        async def record(answer: str | None) -> None:
            def run() -> dict[str, Any]:
                try:
                    return conversations.record(
                        principal, where, protocol=protocol, thread=name, model=model, messages=messages,
                        answer=answer, snapshot=snapshot,
                    )  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - the answer went out; a failed recording is logged, not raised
                    log.warning("recording a turn failed: %s", type(exc).__name__)
                    return {"recorded": False, "reason": "error", "error": type(exc).__name__}

            result = await anyio.to_thread.run_sync(run)
            if gateway.after_record is not None:
                gateway.after_record(result)
            if result.get("recorded") and extract:
                gateway.extract_later(principal, result["conversation"], result["turn"])

        return await relay(request, protocol, content, record)

    async def relay(request: Request, protocol: str, content: bytes | None, record: Any = None) -> Response:
        client = gateway.http()
        outgoing = client.build_request(
            request.method,
            gateway.upstream.base + request.url.path,
            params=request.url.query or None,
            headers=_upstream_headers(request, protocol, gateway.upstream),
            content=content,
        )
        try:
            upstream = await _unless_gone(request, lambda: client.send(outgoing, stream=True))
        except Exception as exc:  # noqa: BLE001 - any transport failure is the same answer to the client
            log.warning("upstream unreachable: %s", type(exc).__name__)
            status = 502
            message = f"the upstream did not answer ({type(exc).__name__})"
            body = protocols.error_body(protocol, status, "UPSTREAM", message)
            return JSONResponse(body, status_code=status)
        if upstream is None:  # the client went away before the answer began: nothing to relay or record
            return Response(status_code=499)
        headers = _downstream_headers(upstream.headers)
        ok = upstream.status_code < 400 and record is not None
        if upstream.headers.get("content-type", "").startswith("text/event-stream"):
            held: list[bytes] = []

            async def streamed() -> None:
                await record(protocols.stream_text(protocol, b"".join(held)))

            return StreamingResponse(
                _events(upstream, held if ok else None),
                status_code=upstream.status_code,
                headers=headers,
                background=BackgroundTask(streamed) if ok else None,
            )
        try:
            payload = await _unless_gone(request, upstream.aread)
        finally:
            with anyio.CancelScope(shield=True):
                await upstream.aclose()
        if payload is None:  # the client went away: the upstream request is closed, nothing is recorded
            return Response(status_code=499)
        task = BackgroundTask(record, protocols.answer_text(protocol, payload)) if ok else None
        return Response(payload, status_code=upstream.status_code, headers=headers, background=task)

    @api.post("/v1/chat/completions", include_in_schema=False)
    async def chat_completions(request: Request) -> Response:
        """OpenAI Chat Completions, with the memory block as a system message."""
        return await proxy(request)

    @api.post("/v1/messages", include_in_schema=False)
    async def messages(request: Request) -> Response:
        """Anthropic Messages, with the memory block appended to ``system``."""
        return await proxy(request)

    @api.get("/v1/models", include_in_schema=False)
    async def models(request: Request) -> Response:
        """The upstream's model list, for a valid Cairn token (the provider key is the gateway's)."""
        protocol = _protocol_of(request)
        try:
            await principal_of(request)
        except CairnError as exc:
            return _error(protocol, exc)
        return await relay(request, protocol, None)

    return api


async def _unless_gone(request: Request, work: Callable[[], Any]) -> Any:
    """``await work()``, or None as soon as the client disconnects (``work`` is then cancelled: a
    cancelled upstream call closes its connection, which is how the provider learns to stop)."""
    result: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            result["value"] = await work()
            tg.cancel_scope.cancel()

        async def watch() -> None:
            # The body was read already: the next message the server gives is the disconnect.
            while (await request.receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(run)
        tg.start_soon(watch)
    return result.get("value")


# What the relay keeps of a stream for the ledger (the answer's text is read from it afterwards).
MAX_HELD_BYTES = 8 * 1024 * 1024


async def _events(upstream: Any, held: list[bytes] | None = None) -> AsyncIterator[bytes]:
    """Each chunk of the upstream's event stream as it arrives; the upstream closes when this ends.

    ``held`` collects the chunks (up to ``MAX_HELD_BYTES``) for the recording that runs after the
    response; nothing is parsed while relaying.

    Starlette cancels this generator when the client disconnects (it listens for ``http.disconnect``
    while streaming); closing the upstream response then closes its connection, which is how the
    provider learns to stop generating. The close is shielded: a cancelled scope would skip it.
    """
    size = 0
    try:
        async for chunk in upstream.aiter_raw():
            if held is not None and size + len(chunk) <= MAX_HELD_BYTES:
                held.append(chunk)
                size += len(chunk)
            yield chunk
    finally:
        with anyio.CancelScope(shield=True):
            await upstream.aclose()


def create_gateway(gateway: Gateway, *, allowed_hosts: list[str] | tuple[str, ...] | None = ()) -> FastAPI:
    """A standalone gateway (``cairn gateway``): the routes, a health check, the same HTTP guards as the API."""
    import contextlib

    from cairn.api.guard import BodyLimit, HostGuard

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):  # type: ignore[no-untyped-def]
        yield
        await gateway.close()

    app = FastAPI(title="Cairn gateway", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(router(gateway))

    @app.get("/v1/health", include_in_schema=False)
    def health() -> dict[str, str]:
        return {"status": "ok"}

    app.add_middleware(BodyLimit)
    app.add_middleware(HostGuard, allowed=None if allowed_hosts is None else list(allowed_hosts))
    return app
