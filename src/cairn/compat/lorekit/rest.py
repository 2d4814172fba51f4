"""LoreKit's remote protocol as an ASGI app, mounted by ``cairn serve`` at ``/lorekit/functions/v1``.

* REST, what LoreKit's CLI and hooks call: ``/memories`` (GET list/read, POST write, DELETE
  archive or ``force`` delete), ``/memories/search``, ``/memories/relevant``, ``/memories/restore``,
  ``/memories/scopes``, ``/memories/purge``, ``/memories/purge-expired``, and ``/health`` without a
  token. Errors are LoreKit's ``{"error", "code"}`` with its statuses.
* MCP at ``/mcp``: JSON-RPC 2.0 over plain POST (``rpc.py``).

A LoreKit user points ``LOREKIT_MCP_URL`` at ``https://HOST/lorekit/functions/v1/mcp`` with a
Cairn token in ``LOREKIT_TOKEN``; the CLI derives the REST base from it. Every request resolves
its bearer token through the service, so tenancy is Cairn's (tokens, row-level security).
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cairn.compat.lorekit import rpc
from cairn.compat.lorekit.ops import LoreKit, LoreKitError, bad, from_cairn
from cairn.core.jsonin import loads
from cairn.errors import CairnError
from cairn.service.api import Cairn

PREFIX = "/lorekit/functions/v1"
MAX_BODY = 256 * 1024  # a write is at most 64 KiB of value plus short fields


def error_response(exc: LoreKitError) -> JSONResponse:
    body: dict[str, Any] = {"error": exc.message}
    if exc.code:
        body["code"] = exc.code
    if exc.details:
        body["details"] = exc.details
    headers = {"Retry-After": "60"} if exc.status == 429 else None
    if exc.status == 429:
        body["retryAfterSeconds"] = 60
    return JSONResponse(body, status_code=exc.status, headers=headers)


def _token(request: Request) -> str | None:
    header = request.headers.get("authorization") or ""
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


async def json_body(request: Request, *, required: bool = True) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        if required:
            raise bad("a JSON body is required")
        return {}
    if len(raw) > MAX_BODY:
        raise LoreKitError("bad_request", f"the body is larger than {MAX_BODY} bytes")
    try:
        obj = loads(raw.decode("utf-8"), "the body")
    except (CairnError, UnicodeDecodeError):
        raise bad("the body is not valid JSON") from None
    if not isinstance(obj, dict):
        raise bad("the body must be a JSON object")
    return obj


def create_lorekit_app(svc: Cairn) -> Starlette:
    lk = LoreKit(svc)

    def endpoint(fn):  # type: ignore[no-untyped-def]
        """Resolve the caller, run ``fn`` off the event loop, answer LoreKit's error shape on refusal."""

        async def handle(request: Request) -> Response:
            try:
                body = await json_body(request, required=False) if request.method in ("POST", "PUT") else {}
                args = {**dict(request.query_params), **body}
                p = await run_in_threadpool(lk.caller, _token(request))
                return await run_in_threadpool(fn, p, args, request.method)
            except LoreKitError as exc:
                return error_response(exc)
            except CairnError as exc:  # a rule the operation did not translate itself
                return error_response(from_cairn(exc))

        return handle

    def memories(p: Any, args: dict[str, Any], method: str) -> Response:
        if method == "GET":
            if args.get("key") is not None:  # read: the same page shape, one entry or none
                entry = lk.read(p, args)
                return JSONResponse({"entries": [entry] if entry else [], "hasMore": False, "nextCursor": None})
            return JSONResponse(lk.list(p, args))
        if method == "POST":
            entry, created = lk.write(p, args)
            return JSONResponse(entry, status_code=201 if created else 200)
        # DELETE: archive, or with force=true forget and erase
        done = lk.delete(p, args)
        if not done["deleted"] and not done["archived"]:
            raise LoreKitError("not_found", "Memory not found")
        return Response(status_code=204)

    def search(p: Any, args: dict[str, Any], _m: str) -> Response:
        return JSONResponse(lk.search(p, args))

    def relevant(p: Any, args: dict[str, Any], _m: str) -> Response:
        return JSONResponse(lk.relevant(p, args))

    def restore(p: Any, args: dict[str, Any], _m: str) -> Response:
        if not lk.restore(p, args):
            raise LoreKitError("not_found", "No archived memory at that scope and key")
        return JSONResponse({"restored": True})

    def scopes(p: Any, _a: dict[str, Any], _m: str) -> Response:
        return JSONResponse(lk.scopes(p))

    def purge(p: Any, args: dict[str, Any], _m: str) -> Response:
        return JSONResponse(lk.purge(p, args))

    def purge_expired(p: Any, _a: dict[str, Any], _m: str) -> Response:
        return JSONResponse(lk.purge_expired(p))

    async def health(_request: Request) -> Response:
        """Reachability, as LoreKit's ``doctor`` probes it: no token, no tenant data."""
        return JSONResponse({"status": "ok"})

    async def mcp(request: Request) -> Response:
        return await rpc.handle(lk, request, _token)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/mcp/healthz", health, methods=["GET"]),
        Route("/mcp", mcp, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
        Route("/memories", endpoint(memories), methods=["GET", "POST", "DELETE"]),
        Route("/memories/search", endpoint(search), methods=["POST"]),
        Route("/memories/relevant", endpoint(relevant), methods=["GET"]),
        Route("/memories/restore", endpoint(restore), methods=["POST"]),
        Route("/memories/scopes", endpoint(scopes), methods=["GET"]),
        Route("/memories/purge", endpoint(purge), methods=["POST"]),
        Route("/memories/purge-expired", endpoint(purge_expired), methods=["POST"]),
    ]

    async def not_found(_request: Request, _exc: Exception) -> Response:
        return error_response(LoreKitError("not_found", "Not found"))

    async def not_allowed(request: Request, _exc: Exception) -> Response:
        body = {"error": f"Method {request.method} not allowed", "code": "method_not_allowed"}
        return JSONResponse(body, status_code=405)

    async def unexpected(_request: Request, exc: Exception) -> Response:
        body = {"error": f"unexpected {type(exc).__name__}; the server log has the details", "code": "internal_error"}
        return JSONResponse(body, status_code=500)

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed, Exception: unexpected})
