"""The dashboard: server-rendered pages over the service, for the people who own an agent memory.

A surface only (the rules are the service's): each handler parses the request, calls service methods with the
principal the session's token resolves to, and renders a template. Who may verify, reject, restore,
lift a tombstone, mint a token or change a role is decided by the service; the pages merely hide
controls a principal's level cannot use, and a forged POST still gets the service's FORBIDDEN.

Requests: every page re-resolves the session's token (revocation is immediate); every POST checks
its CSRF token before anything else (``session.py``); every template is autoescaped and no user
content is marked safe; a Content-Security-Policy forbids inline script. Writes follow
Post/Redirect/Get with a flash message, except token creation, whose secret is rendered once in the
POST's own response and never travels through a cookie or a URL.

Routers per resource (``signin``, ``lessons``, ``review``, ``consolidation``, ``conversations``, ``audit``,
``accounts``, ``webhooks``) share ``deps.py``: the view, the dependencies that resolve the session and
check CSRF, the helpers. Built as an ASGI sub-app: ``app.mount("/ui", create_web(svc))``. Links are built from the mount
point (``root_path``), so the same app also works at ``/`` on its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from cairn.errors import CairnError
from cairn.service.api import Cairn
from cairn.web import accounts, audit, consolidation, conversations, lessons, review, signin, webhooks
from cairn.web import session as sess
from cairn.web.deps import HERE, CsrfRefused, Dashboard, Redirect, View, clear_cookie, set_cookie

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
# One router per resource (``web/<resource>.py``); pages depend on ``deps.PageView``, actions on
# ``deps.Form`` and ``deps.PostView``.
ROUTERS = (signin, lessons, review, consolidation, conversations, audit, accounts, webhooks)


def create_web(svc: Cairn, *, secret: bytes | None = None) -> FastAPI:
    """The dashboard as an ASGI app; mount it (``/ui``) in the HTTP API or serve it alone.

    ``secret`` keys the CSRF tokens and flash signatures; give every worker the same one when
    several serve the same address (default: a random key per process).
    """
    dash = Dashboard(svc, sess.Keys(secret) if secret else sess.Keys.generate())
    app = FastAPI(title="Cairn dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.svc = svc
    app.state.dashboard = dash
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    for module in ROUTERS:
        app.include_router(module.router)

    @app.exception_handler(Redirect)
    async def _redirect(request: Request, exc: Redirect) -> Response:
        resp = RedirectResponse(exc.location, status_code=303)
        view = View(request)
        if exc.flash:
            set_cookie(resp, view, sess.FLASH_COOKIE, dash.keys.seal_flash(*exc.flash), max_age=120)
        if exc.clear_session:
            clear_cookie(resp, view, sess.SESSION_COOKIE)
        return resp

    @app.exception_handler(CsrfRefused)
    async def _csrf(request: Request, _exc: CsrfRefused) -> Response:
        return dash.render(
            View(request),
            "error.html",
            status=403,
            code="CSRF",
            message="This form did not come from your current dashboard session (missing or wrong CSRF token). "
            "Nothing was changed. Reload the page and try again.",
        )

    @app.exception_handler(CairnError)
    async def _cairn_error(request: Request, exc: CairnError) -> Response:
        view = getattr(request.state, "view", None) or View(request)
        return dash.error_page(view, exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        """Unknown pages and methods get a page too, not the API's JSON."""
        code = "NOT_FOUND" if exc.status_code == 404 else "INVALID_INPUT"
        message = "There is no such page." if exc.status_code == 404 else str(exc.detail)
        return dash.render(View(request), "error.html", status=exc.status_code, code=code, message=message)

    @app.middleware("http")
    async def _headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    return app
