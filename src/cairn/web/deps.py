"""What every dashboard router shares: the view of a request, the FastAPI dependencies that give a
handler its signed-in principal and its CSRF-checked form, and the small helpers of pages and forms.

A page (GET) depends on ``PageView``: its session's token is resolved on every request (revocation
is immediate). An action (POST) depends on ``Form`` and ``PostView``: the CSRF token (and Origin,
when sent) is checked before anything else, the session after it (``PostView`` depends on
``Form``, so the order holds whatever order a handler names them in).
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from cairn.api.problems import STATUS
from cairn.core.content import first_line
from cairn.core.principal import ADMIN, WRITE, Principal
from cairn.core.roles import ROLES
from cairn.errors import CairnError
from cairn.service.api import Cairn
from cairn.web import session as sess

HERE = Path(__file__).parent
PAGE_SIZE = 50
MAX_FORM_FIELDS = 1000  # a bulk review of a full page of candidates, with room to spare
MAX_FORM_PART = 128 * 1024
MAX_QUERY_CHARS = 4000  # what search accepts; longer query strings are refused before the service

# (path, label) of every tab, in the order of the nav bar.
TABS = (
    ("/lessons", "Lessons"),
    ("/review", "Review"),
    ("/archive", "Archive"),
    ("/expired", "Expired"),
    ("/tombstones", "Tombstones"),
    ("/consolidation", "Consolidation"),
    ("/conversations", "Conversations"),
    ("/scopes", "Scopes"),
    ("/audit", "Audit"),
    ("/tokens", "Tokens"),
    ("/orgs", "Orgs"),
    ("/webhooks", "Webhooks"),
)


class Redirect(Exception):  # noqa: N818 - control flow, not an error
    def __init__(self, location: str, flash: tuple[str, str] | None = None, clear_session: bool = False) -> None:
        super().__init__(location)
        self.location = location
        self.flash = flash
        self.clear_session = clear_session


class CsrfRefused(Exception):
    """A POST whose CSRF token (or Origin) does not belong to the session: nothing was done."""


@dataclass
class View:
    """What every page needs: the request, the principal and its CSRF token, links from the mount."""

    request: Request
    principal: Principal | None = None
    csrf: str = ""
    flash: dict[str, Any] | None = None
    extra_cookies: list[tuple[str, str]] = field(default_factory=list)

    @property
    def base(self) -> str:
        return str(self.request.scope.get("root_path", "")).rstrip("/")

    def url(self, path: str, **params: Any) -> str:
        query = {k: v for k, v in params.items() if v not in (None, "", False)}
        return self.base + path + ("?" + urllib.parse.urlencode(query, doseq=True) if query else "")

    @property
    def here(self) -> str:
        """This page's own address, the ``next`` of its forms."""
        q = self.request.url.query
        return self.request.url.path + ("?" + q if q else "")

    @property
    def can_write(self) -> bool:
        return self.principal is not None and WRITE in self.principal.permissions

    @property
    def is_admin(self) -> bool:
        return self.principal is not None and ADMIN in self.principal.permissions


class Dashboard:
    """The service, the keys of the session's tokens and the templates: one per dashboard app."""

    def __init__(self, svc: Cairn, keys: sess.Keys) -> None:
        self.svc = svc
        self.keys = keys
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=True,  # every template, whatever its name: user content is never trusted
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["when"] = _when
        self.env.filters["first_line"] = first_line
        self.env.filters["short"] = _short
        self.env.filters["compact_json"] = _compact_json
        self.env.filters["http_url"] = _http_url
        self.env.globals["ROLES"] = ROLES

    def render(self, view: View, template: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        tab = next((p for p, _ in TABS if view.request.url.path.endswith(p)), "")
        html = self.env.get_template(template).render(
            view=view, url=view.url, tabs=TABS, tab=tab, me=view.principal, flash=view.flash, **ctx
        )
        resp = HTMLResponse(html, status_code=status)
        resp.headers["Cache-Control"] = "no-store"
        if view.flash is not None:
            clear_cookie(resp, view, sess.FLASH_COOKIE)
        for name, value in view.extra_cookies:
            set_cookie(resp, view, name, value)
        return resp

    def error_page(self, view: View, exc: CairnError) -> HTMLResponse:
        return self.render(view, "error.html", status=STATUS.get(exc.code, 500), code=exc.code, message=exc.message)

    def resolve(self, view: View) -> View:
        """The signed-in principal, or a redirect to sign in; the token is resolved on every request."""
        parsed = sess.parse_session(view.request.cookies.get(sess.SESSION_COOKIE))
        if parsed is None:
            raise Redirect(view.url("/signin", next=view.here))
        nonce, token = parsed
        try:
            view.principal = self.svc.resolve_token(token, human=True)
        except CairnError as exc:  # revoked, expired or removed: the session ends here
            raise Redirect(
                view.url("/signin"), ("error", f"Your session ended: {exc.message}"), clear_session=True
            ) from None
        view.csrf = self.keys.csrf(nonce)
        view.flash = self.keys.open_flash(view.request.cookies.get(sess.FLASH_COOKIE))
        return view

    def done(self, view: View, location: str, kind: str, message: str) -> Response:
        """Post/Redirect/Get: back to ``location`` with a one-shot flash message."""
        resp = RedirectResponse(location, status_code=303)
        set_cookie(resp, view, sess.FLASH_COOKIE, self.keys.seal_flash(kind, message), max_age=120)
        return resp


# -- dependencies ------------------------------------------------------------------------------------


def dashboard(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found


Dash = Annotated[Dashboard, Depends(dashboard)]


async def page_view(request: Request, dash: Dash) -> View:
    """A GET page's view: the query bounded, then the session resolved."""
    if len(request.url.query) > MAX_QUERY_CHARS * 2:
        raise CairnError("INVALID_INPUT", "the query string is too long")
    view = await run_in_threadpool(dash.resolve, View(request))
    request.state.view = view
    return view


async def checked_form(request: Request, dash: Dash) -> FormData:
    """The POST's form, after its CSRF token (and Origin, when sent) proved it came from our page."""
    form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS, max_part_size=MAX_FORM_PART)
    origin = request.headers.get("origin")
    if origin is not None and urllib.parse.urlsplit(origin).netloc != request.headers.get("host", ""):
        raise CsrfRefused()
    parsed = sess.parse_session(request.cookies.get(sess.SESSION_COOKIE))
    given = form.get("csrf")
    if parsed is None or not isinstance(given, str) or not dash.keys.check(dash.keys.csrf(parsed[0]), given):
        raise CsrfRefused()
    return form


Form = Annotated[FormData, Depends(checked_form)]


async def post_view(request: Request, dash: Dash, _form: Form) -> View:
    """A POST's view: resolved only after its form passed the CSRF check."""
    view = await run_in_threadpool(dash.resolve, View(request))
    request.state.view = view
    return view


PageView = Annotated[View, Depends(page_view)]
PostView = Annotated[View, Depends(post_view)]


def _cookie_path(view: View) -> str:
    return (view.base or "") + "/"


def set_cookie(resp: Response, view: View, name: str, value: str, max_age: int | None = None) -> None:
    """HttpOnly, SameSite=Strict, scoped to the dashboard's path; Secure whenever the request is https."""
    resp.set_cookie(
        name,
        value,
        max_age=max_age,
        path=_cookie_path(view),
        httponly=True,
        samesite="strict",
        secure=view.request.url.scheme == "https",
    )


def clear_cookie(resp: Response, view: View, name: str) -> None:
    resp.delete_cookie(
        name, path=_cookie_path(view), httponly=True, samesite="strict", secure=view.request.url.scheme == "https"
    )


def _when(value: str | None) -> str:
    """``2025-01-01T12:00:00.123Z`` as ``2025-01-01 12:00:00 UTC`` (the page says the zone)."""
    if not value:
        return "—"
    text = value.rstrip("Z").replace("T", " ")
    return text.split(".")[0] + " UTC"


def _short(value: Any, limit: int = 160) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": ")) if value else ""


def _http_url(value: str | None) -> str | None:
    """A lesson's URL as a link only when it is http(s): ``javascript:`` must never become an href."""
    if not value:
        return None
    scheme = urllib.parse.urlsplit(value).scheme.lower()
    return value if scheme in ("http", "https") else None
