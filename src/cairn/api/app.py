"""The HTTP API: one route per operation of the catalogue, bearer tokens, problem+json errors.

A surface only: the routes are derived from ``service/catalog`` (``api/operations.py``): each
parses its input (the input model carries the sizes and enums), runs one operation with the
principal its token resolves to, and returns the service's answer. No rule lives here:
permissions, scopes, tenancy and limits are the service's. Addresses travel as query parameters or
body fields, not path segments: a scope contains ``::`` and ``/``.

Written here: the application (error handlers, the Host/body guards, the dashboard and MCP mounts),
the health check and the landing redirect; the transfer routes are in ``api/transfer.py``.
"""

from __future__ import annotations

import contextlib
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from cairn.api import openapi, operations, transfer
from cairn.api.guard import BodyLimit, HostGuard
from cairn.api.problems import MEDIA_TYPE, from_error, problem
from cairn.api.routing import BoundedJsonRoute
from cairn.errors import CairnError, invalid_input
from cairn.service.api import Cairn
from cairn.service.catalog import Operation
from cairn.service.catalog.outputs import Health


def create_app(
    svc: Cairn,
    *,
    mcp: bool = True,
    allowed_hosts: list[str] | tuple[str, ...] | None = (),
    gateway: Any = None,
) -> FastAPI:
    """The API, with the MCP server mounted at ``/mcp`` (streamable HTTP, the same bearer tokens).

    ``allowed_hosts``: the names besides the loopback ones that ``Host``/``Origin`` may carry (see
    ``guard.HostGuard``); ``None`` turns the check off (a server exposed without ``--allow-host``).
    ``gateway``: a ``cairn.gateway.app.Gateway`` whose routes (``/v1/chat/completions``,
    ``/v1/messages``, ``/v1/models``) are served beside the API (``cairn serve`` with ``gateway.upstream``).
    """
    from cairn.mcp.http import mcp_app

    mounted = mcp_app(svc) if mcp else None

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):  # type: ignore[no-untyped-def]
        try:
            if mounted is None:
                yield
                return
            async with mounted[0].session_manager.run():  # a mounted app's own lifespan never runs
                yield
        finally:
            if gateway is not None:
                await gateway.close()

    app = FastAPI(
        title="Cairn",
        version="1",
        description="A versioned, audited memory store for coding agents. Bearer tokens: `cairn token create`.",
        lifespan=lifespan,
        generate_unique_id_function=openapi.operation_id,
    )
    openapi.install(app)
    app.router.route_class = BoundedJsonRoute
    app.state.svc = svc
    from cairn.web import create_web  # the dashboard; jinja loads only when the API is built

    app.mount("/ui", create_web(svc))
    from cairn.compat.lorekit.rest import PREFIX, create_lorekit_app  # LoreKit's remote protocol

    app.mount(PREFIX, create_lorekit_app(svc))
    from cairn.webhooks.route import router as webhooks  # GitHub deliveries: signed, no bearer token

    app.include_router(webhooks)
    if mounted is not None:
        app.mount("/mcp", mounted[1])
    if gateway is not None:
        from cairn.gateway.app import router

        app.include_router(router(gateway))

    @app.exception_handler(CairnError)
    async def _cairn_error(_request: Request, exc: CairnError) -> JSONResponse:
        status, body = from_error(exc)
        return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        status, body = from_error(invalid_input(list(exc.errors())))
        return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Routing's own refusals (no such path, wrong method) in the same problem+json as the rest.
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            allow = _methods_at(request)
            headers["Allow"] = ", ".join(allow)
            status, body = problem(
                "INVALID_INPUT", f"{request.method} is not allowed here; use {' or '.join(allow)}", status=405
            )
        elif exc.status_code == 404:
            status, body = problem("NOT_FOUND", "no such endpoint (the API is under /v1, its schema at /docs)")
        else:
            status, body = problem("INVALID_INPUT", str(exc.detail), status=exc.status_code)
        return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        # Never a traceback to the caller; the server's log has the exception's type.
        status, body = problem("INTERNAL", f"unexpected {type(exc).__name__}; the server log has the details")
        return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)

    # The last added runs first: the Host check refuses before the body limit reads anything.
    app.add_middleware(BodyLimit)
    app.add_middleware(HostGuard, allowed=None if allowed_hosts is None else list(allowed_hosts))

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        """A person who opens the server's address lands on the dashboard."""
        return RedirectResponse("/ui/", status_code=307)

    @app.get("/v1/health", tags=["meta"], response_model=Health, operation_id="getHealth")
    def health() -> dict[str, str]:
        """Liveness: answers without a token and touches no tenant data."""
        return {"status": "ok"}

    def run(op: Operation, caller: Any, values: dict[str, Any]) -> Any:
        return op.invoke(svc, caller, values)

    for router in operations.routers(run):
        app.include_router(router)
    app.include_router(transfer.router)
    return app


def _methods_at(request: Request) -> list[str]:
    """Every method some route serves at this path (Starlette's 405 names only the first route's)."""
    from starlette.routing import Match

    def flat(routes: list[Any]) -> Any:
        for route in routes:  # an included router (no prefix here) holds its routes itself
            inner = getattr(route, "original_router", None)
            yield from flat(inner.routes) if inner is not None else (route,)

    methods: set[str] = set()
    for route in flat(request.app.router.routes):
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE and getattr(route, "methods", None):
            methods |= set(route.methods)
    return sorted(methods)
