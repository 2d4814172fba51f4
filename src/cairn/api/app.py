"""The HTTP API: one endpoint per service operation, bearer tokens, problem+json errors.

A surface only: every endpoint parses its input (pydantic models carry the sizes and enums), calls
one service method with the principal its token resolves to, and returns the service's answer.
No rule lives here (DESIGN §4): permissions, scopes, tenancy and limits are the service's.

Stage 1 of issue 6: lessons (write, read, list, history, archive, restore, forget, feedback),
search, recall, context and the audit log. Addresses travel as query parameters or body fields,
not path segments: a scope contains ``::`` and ``/``.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from cairn.api.problems import MEDIA_TYPE, from_error, problem
from cairn.core.principal import Principal
from cairn.errors import CairnError
from cairn.service.api import Cairn

MAX_BODY_BYTES = 256 * 1024  # a lesson value is at most 64 KiB; room for the other fields, not for abuse
Scope = Annotated[str, Field(min_length=1, max_length=300, examples=["repo::acme/widget"])]
Key = Annotated[str, Field(min_length=1, max_length=200, examples=["docker-build-cache"])]
Value = Annotated[str, Field(min_length=1, max_length=65536)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WriteBody(Strict):
    scope: Scope
    key: Key
    value: Value
    tags: list[Annotated[str, Field(max_length=64)]] = Field(default_factory=list, max_length=32)
    kind: Literal["lesson", "fact", "preference", "reference"] = "lesson"
    source_agent: Annotated[str, Field(max_length=500)] | None = None
    trigger: Annotated[str, Field(max_length=500)] | None = None
    ttl: Annotated[str, Field(max_length=20, examples=["30d"])] | None = None


class AddressBody(Strict):
    scope: Scope
    key: Key


class ForgetBody(AddressBody):
    reason: Annotated[str, Field(min_length=1, max_length=2000)]


class FeedbackBody(AddressBody):
    outcome: Literal["helped", "not-helped"]


class SearchBody(Strict):
    query: Annotated[str, Field(min_length=1, max_length=4000)]
    scopes: list[Scope] | None = None
    repo: Annotated[str, Field(max_length=200)] | None = None
    branch: Annotated[str, Field(max_length=200)] | None = None
    project: Annotated[str, Field(max_length=200)] | None = None
    tag: Annotated[str, Field(max_length=64)] | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 10
    mode: Literal["hybrid", "fts", "vector"] = "hybrid"


class RecallBody(Strict):
    text: Annotated[str, Field(min_length=1, max_length=65536)]
    repo: Annotated[str, Field(max_length=200)] | None = None
    branch: Annotated[str, Field(max_length=200)] | None = None
    project: Annotated[str, Field(max_length=200)] | None = None


class ContextBody(Strict):
    repo: Annotated[str, Field(max_length=200)] | None = None
    branch: Annotated[str, Field(max_length=200)] | None = None
    project: Annotated[str, Field(max_length=200)] | None = None
    task: Annotated[str, Field(max_length=4000)] | None = None
    max_chars: Annotated[int, Field(ge=200, le=20000)] | None = None


def _principal(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_cairn_session: Annotated[str | None, Header(max_length=200)] = None,
) -> Principal:
    """The request's principal, from its bearer token; nothing else in the request names a tenant."""
    scheme, _, secret = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise CairnError("UNAUTHENTICATED", "send Authorization: Bearer <token> (create one: cairn token create)")
    try:
        return request.app.state.svc.resolve_token(secret.strip(), session=x_cairn_session or None)
    except CairnError as exc:  # unknown, revoked or expired: the credential itself is the problem
        raise CairnError("UNAUTHENTICATED", exc.message) from None


# Module level: with postponed annotations FastAPI resolves this name in the module's globals.
Caller = Annotated[Principal, Depends(_principal)]

PROBLEM = {"content": {MEDIA_TYPE: {"schema": {"type": "object"}}}, "description": "problem+json"}
ERRORS: dict[int | str, dict[str, Any]] = {s: PROBLEM for s in (400, 401, 403, 404, 409, 413, 429)}


def create_app(svc: Cairn, *, mcp: bool = True, allowed_hosts: list[str] | None = None) -> FastAPI:
    """The API, with the MCP server mounted at ``/mcp`` (streamable HTTP, the same bearer tokens)."""
    mounted = _mcp_app(svc, allowed_hosts) if mcp else None

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):  # type: ignore[no-untyped-def]
        if mounted is None:
            yield
            return
        async with mounted[0].session_manager.run():  # a mounted app's own lifespan never runs
            yield

    app = FastAPI(
        title="Cairn",
        version="1",
        description="A versioned, audited memory store for coding agents. Bearer tokens: `cairn token create`.",
        responses=ERRORS,
        lifespan=lifespan,
    )
    app.state.svc = svc
    if mounted is not None:
        app.mount("/mcp", mounted[1])

    @app.exception_handler(CairnError)
    async def _cairn_error(_request: Request, exc: CairnError) -> JSONResponse:
        status, body = from_error(exc)
        return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"where": ".".join(str(p) for p in e.get("loc", ())), "problem": e.get("msg", "")} for e in exc.errors()
        ]
        first = errors[0] if errors else {"where": "body", "problem": "invalid"}
        status, body = problem("INVALID_INPUT", f"{first['where']}: {first['problem']}", {"errors": errors[:20]})
        return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)

    @app.middleware("http")
    async def _body_limit(request: Request, call_next):  # type: ignore[no-untyped-def]
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            status, body = problem(
                "VALUE_TOO_LARGE", f"the request body is over {MAX_BODY_BYTES} bytes", {"limit": MAX_BODY_BYTES}
            )
            return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)
        return await call_next(request)

    @app.get("/v1/health", tags=["meta"])
    def health() -> dict[str, str]:
        """Liveness: answers without a token and touches no tenant data."""
        return {"status": "ok"}

    @app.post("/v1/lessons", tags=["lessons"])
    def write(body: WriteBody, p: Caller) -> dict[str, Any]:
        """Create a lesson, edit it (a new version), or count a recurrence of the same content."""
        from cairn.core.timeparse import parse_ttl

        opts = body.model_dump(exclude={"scope", "key", "value", "ttl"})
        return svc.write(p, body.scope, body.key, body.value, ttl=parse_ttl(body.ttl) if body.ttl else None, **opts)

    @app.get("/v1/lesson", tags=["lessons"])
    def read(
        p: Caller,
        scope: Annotated[str, Query(max_length=300)],
        key: Annotated[str, Query(max_length=200)],
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> dict[str, Any]:
        """One lesson by address; ``as_of`` reads what Cairn held then, ``valid_at`` what was true then."""
        return svc.read(p, scope, key, as_of=as_of, valid_at=valid_at)

    @app.get("/v1/lessons", tags=["lessons"])
    def list_lessons(
        p: Caller,
        scope: Annotated[str | None, Query(max_length=300)] = None,
        tag: Annotated[str | None, Query(max_length=64)] = None,
        trust: Literal["candidate", "verified", "rejected"] | None = None,
        archived: bool = False,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> dict[str, Any]:
        """Active lessons (or archived ones), newest first."""
        return svc.list(p, scope, tag=tag, trust=trust, archived=archived, limit=limit)

    @app.get("/v1/lesson/history", tags=["lessons"])
    def history(
        p: Caller, scope: Annotated[str, Query(max_length=300)], key: Annotated[str, Query(max_length=200)]
    ) -> dict[str, Any]:
        """Every version of a lesson, with the record-time interval each was current."""
        return svc.history(p, scope, key)

    @app.post("/v1/lesson/archive", tags=["lessons"])
    def archive(body: AddressBody, p: Caller) -> dict[str, Any]:
        return svc.archive(p, body.scope, body.key)

    @app.post("/v1/lesson/restore", tags=["lessons"])
    def restore(body: AddressBody, p: Caller) -> dict[str, Any]:
        return svc.restore(p, body.scope, body.key)

    @app.post("/v1/lesson/forget", tags=["lessons"])
    def forget(body: ForgetBody, p: Caller) -> dict[str, Any]:
        """Reject a lesson and tombstone its content: the same text is refused under any key."""
        return svc.forget(p, body.scope, body.key, body.reason)

    @app.post("/v1/lesson/feedback", tags=["lessons"])
    def feedback(body: FeedbackBody, p: Caller) -> dict[str, Any]:
        return svc.feedback(p, body.scope, body.key, body.outcome)

    @app.post("/v1/search", tags=["retrieval"])
    def search(body: SearchBody, p: Caller) -> dict[str, Any]:
        return svc.search(p, body.query, **body.model_dump(exclude={"query"}))

    @app.post("/v1/recall", tags=["retrieval"])
    def recall(body: RecallBody, p: Caller) -> dict[str, Any]:
        """At most a few lessons that fit an error text, or none when nothing clears the relevance floor."""
        return svc.recall(p, body.text, repo=body.repo, branch=body.branch, project=body.project)

    @app.post("/v1/context", tags=["retrieval"])
    def context(body: ContextBody, p: Caller) -> dict[str, Any]:
        """The session-start block for a repo/branch/task, within a character budget."""
        return svc.context(p, **body.model_dump())

    @app.get("/v1/audit", tags=["audit"])
    def audit(p: Caller, limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> dict[str, Any]:
        return svc.audit(p, limit=limit)

    @app.get("/v1/audit/verify", tags=["audit"])
    def audit_verify(p: Caller) -> dict[str, Any]:
        """Re-hash the tenant's audit chain; ``ok`` false names the first broken link."""
        return svc.audit_verify(p)

    return app


def _mcp_app(svc: Cairn, allowed_hosts: list[str] | None) -> tuple[Any, Any]:
    """The MCP server as an ASGI app: the SDK verifies the bearer token (401 otherwise) through
    ``resolve_token``; each tool call resolves it again, so revocation takes effect mid-session."""
    import anyio
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.transport_security import TransportSecuritySettings

    from cairn.mcp.server import build

    class Tokens:
        async def verify_token(self, token: str) -> AccessToken | None:
            try:
                p = await anyio.to_thread.run_sync(svc.resolve_token, token)
            except CairnError:
                return None
            return AccessToken(token=token, client_id=p.user_id or "", scopes=["cairn"])

    def caller() -> Principal:
        access = get_access_token()
        if access is None:
            raise CairnError("UNAUTHENTICATED", "no bearer token on this request")
        return svc.resolve_token(access.token)

    auth = {
        "token_verifier": Tokens(),
        # The SDK requires an issuer URL; Cairn is its own token issuer and publishes no OAuth metadata.
        "auth": AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None, required_scopes=["cairn"]),
    }
    server = build(svc, caller, auth=auth)
    hosts = allowed_hosts or ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    asgi = server.streamable_http_app(
        streamable_http_path="/",
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(
            allowed_hosts=hosts, allowed_origins=[f"http://{h}" for h in hosts]
        ),
    )
    return server, asgi
