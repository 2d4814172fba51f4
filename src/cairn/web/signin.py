"""Signing in (a token, checked against a pre-session CSRF token) and out."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from cairn.errors import CairnError
from cairn.web import session as sess
from cairn.web.deps import CsrfRefused, Dash, Form, View, clear_cookie, set_cookie
from cairn.web.handlers import call, field_, next_url

router = APIRouter()


@router.get("/", include_in_schema=False)
async def root(request: Request) -> Response:
    return RedirectResponse(View(request).url("/lessons"), status_code=303)


@router.get("/signin", response_class=HTMLResponse)
async def signin_form(request: Request, dash: Dash) -> Response:
    """The sign-in form; its CSRF token is bound to a fresh pre-session cookie (login CSRF)."""
    view = View(request)
    view.flash = dash.keys.open_flash(request.cookies.get(sess.FLASH_COOKIE))
    return _signin_page(dash, view, status=200, error=None)


def _signin_page(dash: Dash, view: View, status: int, error: dict[str, str] | None) -> HTMLResponse:
    # One pre-session per browser, so two open sign-in tabs both work.
    pre = view.request.cookies.get(sess.PRESESSION_COOKIE) or ""
    if not sess.valid_presession(pre):
        pre = sess.new_presession()
        view.extra_cookies.append((sess.PRESESSION_COOKIE, pre))
    nxt = view.request.query_params.get("next", "")
    return dash.render(
        view, "signin.html", status=status, signin_csrf=dash.keys.signin_csrf(pre), next=nxt, error=error
    )


@router.post("/signin", response_class=HTMLResponse)
async def signin(request: Request, dash: Dash) -> Response:
    """Check the pre-session CSRF token, resolve the token, and start a session (cookie)."""
    form = await request.form(max_files=0, max_fields=20, max_part_size=4096)
    view = View(request)
    pre = request.cookies.get(sess.PRESESSION_COOKIE) or ""
    given = form.get("csrf")
    if not pre or not isinstance(given, str) or not dash.keys.check(dash.keys.signin_csrf(pre), given):
        raise CsrfRefused()
    token = field_(form, "token", limit=200)
    if not token:
        return _signin_page(dash, view, 400, {"code": "UNAUTHENTICATED", "message": "Enter a Cairn token."})
    try:
        await call(dash.svc.resolve_token, token, human=True)
    except CairnError as exc:
        return _signin_page(dash, view, 401, {"code": "UNAUTHENTICATED", "message": exc.message})
    resp = RedirectResponse(next_url(view, form, "/lessons"), status_code=303)
    set_cookie(resp, view, sess.SESSION_COOKIE, sess.new_session_value(token))
    clear_cookie(resp, view, sess.PRESESSION_COOKIE)
    return resp


@router.post("/signout", response_class=HTMLResponse)
async def signout(request: Request, dash: Dash, _form: Form) -> Response:
    """End the session in this browser: the cookie is cleared (the token itself stays valid)."""
    view = View(request)
    resp = RedirectResponse(view.url("/signin"), status_code=303)
    clear_cookie(resp, view, sess.SESSION_COOKIE)
    set_cookie(resp, view, sess.FLASH_COOKIE, dash.keys.seal_flash("ok", "Signed out."), max_age=120)
    return resp
