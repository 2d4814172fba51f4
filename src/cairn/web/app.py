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

Built as an ASGI sub-app: ``app.mount("/ui", create_web(svc))``. Links are built from the mount
point (``root_path``), so the same app also works at ``/`` on its own.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException as StarletteHTTPException

from cairn.api.problems import STATUS
from cairn.core.content import first_line
from cairn.core.principal import ADMIN, WRITE, Principal
from cairn.core.roles import ROLES
from cairn.core.timeparse import parse_time
from cairn.errors import CairnError
from cairn.service.api import Cairn
from cairn.web import session as sess

HERE = Path(__file__).parent
PAGE_SIZE = 50
MAX_FORM_FIELDS = 1000  # a bulk review of a full page of candidates, with room to spare
MAX_FORM_PART = 128 * 1024
MAX_QUERY_CHARS = 4000  # what search accepts; longer query strings are refused before the service

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

# (path, label) of every tab, in the order of the nav bar.
TABS = (
    ("/lessons", "Lessons"),
    ("/review", "Review"),
    ("/archive", "Archive"),
    ("/expired", "Expired"),
    ("/tombstones", "Tombstones"),
    ("/conversations", "Conversations"),
    ("/scopes", "Scopes"),
    ("/audit", "Audit"),
    ("/tokens", "Tokens"),
    ("/orgs", "Orgs"),
    ("/webhooks", "Webhooks"),
)


class _Redirect(Exception):  # noqa: N818 - control flow, not an error
    def __init__(self, location: str, flash: tuple[str, str] | None = None, clear_session: bool = False) -> None:
        super().__init__(location)
        self.location = location
        self.flash = flash
        self.clear_session = clear_session


class _CsrfRefused(Exception):
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


def create_web(svc: Cairn, *, secret: bytes | None = None) -> FastAPI:
    """The dashboard as an ASGI app; mount it (``/ui``) in the HTTP API or serve it alone.

    ``secret`` keys the CSRF tokens and flash signatures; give every worker the same one when
    several serve the same address (default: a random key per process).
    """
    keys = sess.Keys(secret) if secret else sess.Keys.generate()
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every template, whatever its name: user content is never trusted
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["first_line"] = first_line
    env.filters["short"] = _short
    env.filters["compact_json"] = _compact_json
    env.filters["http_url"] = _http_url
    env.globals["ROLES"] = ROLES

    app = FastAPI(title="Cairn dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.svc = svc
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    # -- plumbing -----------------------------------------------------------------------------
    def render(view: View, template: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        tab = next((p for p, _ in TABS if view.request.url.path.endswith(p)), "")
        html = env.get_template(template).render(
            view=view, url=view.url, tabs=TABS, tab=tab, me=view.principal, flash=view.flash, **ctx
        )
        resp = HTMLResponse(html, status_code=status)
        resp.headers["Cache-Control"] = "no-store"
        if view.flash is not None:
            _clear_cookie(resp, view, sess.FLASH_COOKIE)
        for name, value in view.extra_cookies:
            _set_cookie(resp, view, name, value)
        return resp

    def error_page(view: View, exc: CairnError) -> HTMLResponse:
        status = STATUS.get(exc.code, 500)
        return render(view, "error.html", status=status, code=exc.code, message=exc.message)

    def resolve(view: View) -> View:
        """The signed-in principal, or a redirect to sign in; the token is resolved on every request."""
        parsed = sess.parse_session(view.request.cookies.get(sess.SESSION_COOKIE))
        if parsed is None:
            raise _Redirect(view.url("/signin", next=view.here))
        nonce, token = parsed
        try:
            view.principal = svc.resolve_token(token, human=True)
        except CairnError as exc:  # revoked, expired or removed: the session ends here
            raise _Redirect(
                view.url("/signin"), ("error", f"Your session ended: {exc.message}"), clear_session=True
            ) from None
        view.csrf = keys.csrf(nonce)
        view.flash = keys.open_flash(view.request.cookies.get(sess.FLASH_COOKIE))
        return view

    async def signed_in(request: Request) -> View:
        return await run_in_threadpool(resolve, View(request))

    async def checked_form(request: Request) -> FormData:
        """The POST's form, after its CSRF token (and Origin, when sent) proved it came from our page."""
        form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS, max_part_size=MAX_FORM_PART)
        origin = request.headers.get("origin")
        if origin is not None and urllib.parse.urlsplit(origin).netloc != request.headers.get("host", ""):
            raise _CsrfRefused()
        parsed = sess.parse_session(request.cookies.get(sess.SESSION_COOKIE))
        given = form.get("csrf")
        if parsed is None or not isinstance(given, str) or not keys.check(keys.csrf(parsed[0]), given):
            raise _CsrfRefused()
        return form

    def next_url(view: View, form: Mapping[str, Any], default: str) -> str:
        """Where to go after a POST: the form's ``next`` if it is a path of this app, else ``default``."""
        raw = form.get("next")
        target = raw if isinstance(raw, str) else ""
        base = view.base + "/"
        if (
            target.startswith(base)
            and not target.startswith("//")
            and not any(c in target for c in "\\\r\n\t")
            and len(target) < 2000
        ):
            return target
        return view.url(default)

    def done(view: View, location: str, kind: str, message: str) -> Response:
        """Post/Redirect/Get: back to ``location`` with a one-shot flash message."""
        resp = RedirectResponse(location, status_code=303)
        _set_cookie(resp, view, sess.FLASH_COOKIE, keys.seal_flash(kind, message), max_age=120)
        return resp

    async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await run_in_threadpool(fn, *args, **kwargs)

    @app.exception_handler(_Redirect)
    async def _redirect(request: Request, exc: _Redirect) -> Response:
        resp = RedirectResponse(exc.location, status_code=303)
        view = View(request)
        if exc.flash:
            _set_cookie(resp, view, sess.FLASH_COOKIE, keys.seal_flash(*exc.flash), max_age=120)
        if exc.clear_session:
            _clear_cookie(resp, view, sess.SESSION_COOKIE)
        return resp

    @app.exception_handler(_CsrfRefused)
    async def _csrf(request: Request, _exc: _CsrfRefused) -> Response:
        view = View(request)
        return render(
            view,
            "error.html",
            status=403,
            code="CSRF",
            message="This form did not come from your current dashboard session (missing or wrong CSRF token). "
            "Nothing was changed. Reload the page and try again.",
        )

    @app.exception_handler(CairnError)
    async def _cairn_error(request: Request, exc: CairnError) -> Response:
        view = getattr(request.state, "view", None) or View(request)
        return error_page(view, exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        """Unknown pages and methods get a page too, not the API's JSON."""
        code = "NOT_FOUND" if exc.status_code == 404 else "INVALID_INPUT"
        message = "There is no such page." if exc.status_code == 404 else str(exc.detail)
        return render(View(request), "error.html", status=exc.status_code, code=code, message=message)

    @app.middleware("http")
    async def _headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    def page(path: str) -> Callable[[Callable[[View], Awaitable[Response]]], Any]:
        """A GET page for signed-in users: the handler receives the resolved view."""

        def register(handler: Callable[[View], Awaitable[Response]]) -> Any:
            async def endpoint(request: Request) -> Response:
                if len(request.url.query) > MAX_QUERY_CHARS * 2:
                    raise CairnError("INVALID_INPUT", "the query string is too long")
                view = await signed_in(request)
                request.state.view = view
                return await handler(view)

            endpoint.__name__ = handler.__name__
            endpoint.__doc__ = handler.__doc__
            app.add_api_route(path, endpoint, methods=["GET"], response_class=HTMLResponse)
            return handler

        return register

    def action(path: str) -> Callable[[Callable[[View, FormData], Awaitable[Response]]], Any]:
        """A POST: CSRF first, then the session, then the handler (which calls the service)."""

        def register(handler: Callable[[View, FormData], Awaitable[Response]]) -> Any:
            async def endpoint(request: Request) -> Response:
                form = await checked_form(request)
                view = await signed_in(request)
                request.state.view = view
                return await handler(view, form)

            endpoint.__name__ = handler.__name__
            endpoint.__doc__ = handler.__doc__
            app.add_api_route(path, endpoint, methods=["POST"], response_class=HTMLResponse)
            return handler

        return register

    def arg(view: View, name: str, limit: int = 300) -> str | None:
        value = view.request.query_params.get(name)
        if value is None:
            return None
        value = value.strip()
        if len(value) > limit:
            raise CairnError("INVALID_INPUT", f"{name} is longer than {limit} characters")
        return value or None

    def field_(form: FormData, name: str, limit: int = 2000) -> str:
        value = form.get(name)
        text = value.strip() if isinstance(value, str) else ""
        if len(text) > limit:
            raise CairnError("INVALID_INPUT", f"{name} is longer than {limit} characters")
        return text

    def int_arg(raw: str | None, name: str) -> int | None:
        if raw is None or raw == "":
            return None
        if not raw.isdigit() or len(raw) > 18:
            raise CairnError("INVALID_INPUT", f"{name} must be a positive whole number")
        return int(raw)

    def paging(kwargs: dict[str, Any], cursor: str | None) -> dict[str, Any]:
        """Pass ``cursor`` only when the page was asked for one (lists without paging still work)."""
        if cursor:
            kwargs["cursor"] = cursor
        return kwargs

    # -- signing in and out ---------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    async def root(request: Request) -> Response:
        return RedirectResponse(View(request).url("/lessons"), status_code=303)

    @app.get("/signin", response_class=HTMLResponse)
    async def signin_form(request: Request) -> Response:
        """The sign-in form; its CSRF token is bound to a fresh pre-session cookie (login CSRF)."""
        view = View(request)
        view.flash = keys.open_flash(request.cookies.get(sess.FLASH_COOKIE))
        return _signin_page(view, status=200, error=None)

    def _signin_page(view: View, status: int, error: dict[str, str] | None) -> HTMLResponse:
        # One pre-session per browser, so two open sign-in tabs both work.
        pre = view.request.cookies.get(sess.PRESESSION_COOKIE) or ""
        if not sess.valid_presession(pre):
            pre = sess.new_presession()
            view.extra_cookies.append((sess.PRESESSION_COOKIE, pre))
        nxt = view.request.query_params.get("next", "")
        return render(view, "signin.html", status=status, signin_csrf=keys.signin_csrf(pre), next=nxt, error=error)

    @app.post("/signin", response_class=HTMLResponse)
    async def signin(request: Request) -> Response:
        """Check the pre-session CSRF token, resolve the token, and start a session (cookie)."""
        form = await request.form(max_files=0, max_fields=20, max_part_size=4096)
        view = View(request)
        pre = request.cookies.get(sess.PRESESSION_COOKIE) or ""
        given = form.get("csrf")
        if not pre or not isinstance(given, str) or not keys.check(keys.signin_csrf(pre), given):
            raise _CsrfRefused()
        token = field_(form, "token", limit=200)
        if not token:
            return _signin_page(view, 400, {"code": "UNAUTHENTICATED", "message": "Enter a Cairn token."})
        try:
            await call(svc.resolve_token, token, human=True)
        except CairnError as exc:
            return _signin_page(view, 401, {"code": "UNAUTHENTICATED", "message": exc.message})
        resp = RedirectResponse(next_url(view, form, "/lessons"), status_code=303)
        _set_cookie(resp, view, sess.SESSION_COOKIE, sess.new_session_value(token))
        _clear_cookie(resp, view, sess.PRESESSION_COOKIE)
        return resp

    @app.post("/signout", response_class=HTMLResponse)
    async def signout(request: Request) -> Response:
        """End the session in this browser: the cookie is cleared (the token itself stays valid)."""
        await checked_form(request)
        view = View(request)
        resp = RedirectResponse(view.url("/signin"), status_code=303)
        _clear_cookie(resp, view, sess.SESSION_COOKIE)
        _set_cookie(resp, view, sess.FLASH_COOKIE, keys.seal_flash("ok", "Signed out."), max_age=120)
        return resp

    # -- lessons --------------------------------------------------------------------------------
    @page("/lessons")
    async def lessons_page(view: View) -> Response:
        """Browse (scope, tag, trust; newest first, paged) or search (text, best first)."""
        p = view.principal
        scope, tag, trust = arg(view, "scope"), arg(view, "tag", 64), arg(view, "trust", 20)
        q, cursor = arg(view, "q", MAX_QUERY_CHARS), arg(view, "cursor", 600)
        scopes = (await call(svc.scopes, p))["scopes"]
        error = None
        rows: list[dict[str, Any]] = []
        next_cursor = None
        truncated = False
        try:
            if q:
                found = await call(
                    svc.search, p, q, scopes=[scope] if scope else None, tag=tag, trust=trust, limit=PAGE_SIZE
                )
                rows = [dict(h["lesson"], snippet=h["snippet"]) for h in found["results"]]
            else:
                listed = await call(
                    svc.list, p, scope, **paging({"tag": tag, "trust": trust, "limit": PAGE_SIZE}, cursor)
                )
                rows, next_cursor = listed["lessons"], listed.get("next_cursor")
                truncated = bool(listed.get("truncated")) and not next_cursor
        except CairnError as exc:  # a bad filter is shown above the (empty) table, not as a dead end
            error = {"code": exc.code, "message": exc.message}
        filters = {"scope": scope, "tag": tag, "trust": trust, "q": q}
        return render(
            view,
            "lessons.html",
            rows=rows,
            scopes=scopes,
            filters=filters,
            error=error,
            next_cursor=next_cursor,
            truncated=truncated,
        )

    @page("/lesson")
    async def lesson_page(view: View) -> Response:
        """One lesson: value, provenance, trust, counts, links, versions, and a diff of any two."""
        p = view.principal
        scope, key = arg(view, "scope"), arg(view, "key", 200)
        if not scope or not key:
            raise CairnError("INVALID_INPUT", "a lesson page needs scope and key")
        detail = await call(svc.lesson_detail, p, scope, key)
        hist = await call(svc.history, p, scope, key)
        versions = hist["versions"]
        v1 = int_arg(arg(view, "v1", 18), "v1")
        v2 = int_arg(arg(view, "v2", 18), "v2")
        diff = None
        diff_error = None
        if v1 is not None and v2 is not None:
            try:
                diff = await call(svc.diff, p, scope, key, v1, v2)
            except CairnError as exc:
                diff_error = {"code": exc.code, "message": exc.message}
        elif len(versions) >= 2:
            v1, v2 = versions[-2]["version"], versions[-1]["version"]
        sessions = sorted({v["session"] for v in versions if v["session"]})
        return render(
            view,
            "lesson.html",
            d=detail,
            lesson=detail["lesson"],
            versions=versions,
            sessions=sessions,
            diff=diff,
            diff_lines=_diff_lines(diff["value_diff"]) if diff else [],
            diff_error=diff_error,
            v1=v1,
            v2=v2,
        )

    async def lesson_action(view: View, form: FormData, op: str) -> Response:
        p = view.principal
        scope, key = field_(form, "scope", 300), field_(form, "key", 200)
        back = next_url(view, form, "/lessons")
        if op == "verify":
            out = await call(svc.verify, p, scope, key)
            msg = f"Verified {scope} {key}." if out.get("changed") else f"{scope} {key} was already verified."
        elif op == "reject":
            out = await call(svc.reject, p, scope, key, field_(form, "reason"))
            msg = f"Rejected {scope} {key}; its content is tombstoned (tombstone {out['tombstone_id']})."
            if back.startswith(view.url("/lesson") + "?"):
                back = view.url("/review")  # the lesson page of a rejected lesson no longer exists
        elif op == "archive":
            out = await call(svc.archive, p, scope, key)
            msg = f"Archived {scope} {key}." if out.get("changed") else f"{scope} {key} was already archived."
        else:
            out = await call(svc.restore, p, scope, key)
            msg = f"Restored {scope} {key}." if out.get("changed") else f"{scope} {key} was not archived."
        return done(view, back, "ok", msg)

    @action("/lesson/verify")
    async def lesson_verify(view: View, form: FormData) -> Response:
        return await lesson_action(view, form, "verify")

    @action("/lesson/reject")
    async def lesson_reject(view: View, form: FormData) -> Response:
        return await lesson_action(view, form, "reject")

    @action("/lesson/archive")
    async def lesson_archive(view: View, form: FormData) -> Response:
        return await lesson_action(view, form, "archive")

    @action("/lesson/restore")
    async def lesson_restore(view: View, form: FormData) -> Response:
        return await lesson_action(view, form, "restore")

    # -- review -----------------------------------------------------------------------------------
    @page("/review")
    async def review_page(view: View) -> Response:
        """Candidates with their provenance, oldest first; verify or reject one by one or in bulk."""
        scope, cursor = arg(view, "scope"), arg(view, "cursor", 600)
        out = await call(svc.review_queue, view.principal, **paging({"scope": scope, "limit": PAGE_SIZE}, cursor))
        return render(view, "review.html", rows=out["candidates"], scope=scope, next_cursor=out.get("next_cursor"))

    @action("/review/bulk")
    async def review_bulk(view: View, form: FormData) -> Response:
        """Verify or reject every selected candidate: one service call (one transaction) each."""
        op = field_(form, "op", 10)
        if op not in ("verify", "reject"):
            raise CairnError("INVALID_INPUT", "choose verify or reject")
        items = [v for v in form.getlist("item") if isinstance(v, str)]
        if not items:
            return done(view, next_url(view, form, "/review"), "error", "Select at least one candidate first.")
        reason = field_(form, "reason")
        ok: list[str] = []
        refused: list[str] = []
        for item in items[: PAGE_SIZE * 4]:
            scope, _, key = item.partition(" ")
            try:
                if op == "verify":
                    await call(svc.verify, view.principal, scope, key)
                else:
                    await call(svc.reject, view.principal, scope, key, reason)
                ok.append(f"{scope} {key}")
            except CairnError as exc:
                refused.append(f"{scope} {key}: {exc.code} {exc.message}")
        verb = "Verified" if op == "verify" else "Rejected"
        parts = [f"{verb} {len(ok)} of {len(items)}."]
        if refused:
            parts.append("Refused: " + "; ".join(refused[:5]) + (" …" if len(refused) > 5 else ""))
        return done(view, next_url(view, form, "/review"), "error" if refused else "ok", " ".join(parts))

    # -- archive, expired, tombstones, scopes ---------------------------------------------------
    @page("/archive")
    async def archive_page(view: View) -> Response:
        """Archived lessons (hidden from every read until restored), newest first."""
        scope, cursor = arg(view, "scope"), arg(view, "cursor", 600)
        out = await call(svc.list, view.principal, scope, **paging({"archived": True, "limit": PAGE_SIZE}, cursor))
        return render(view, "archive.html", rows=out["lessons"], scope=scope, next_cursor=out.get("next_cursor"))

    @page("/expired")
    async def expired_page(view: View) -> Response:
        """Lessons whose TTL ran out, most recently expired first."""
        scope, cursor = arg(view, "scope"), arg(view, "cursor", 600)
        out = await call(svc.expired, view.principal, scope, **paging({"limit": PAGE_SIZE}, cursor))
        return render(view, "expired.html", rows=out["lessons"], scope=scope, next_cursor=out.get("next_cursor"))

    @page("/tombstones")
    async def tombstones_page(view: View) -> Response:
        """Live tombstones (or all, with lifted ones); an admin lifts one with a reason."""
        lifted = view.request.query_params.get("lifted") == "1"
        cursor = arg(view, "cursor", 600)
        out = await call(svc.tombstones, view.principal, **paging({"include_lifted": lifted}, cursor))
        return render(
            view, "tombstones.html", rows=out["tombstones"], lifted=lifted, next_cursor=out.get("next_cursor")
        )

    @action("/tombstones/lift")
    async def tombstone_lift(view: View, form: FormData) -> Response:
        tid = int_arg(field_(form, "tombstone_id", 18), "tombstone_id")
        if tid is None:
            raise CairnError("INVALID_INPUT", "which tombstone?")
        await call(svc.unforget, view.principal, tid, field_(form, "reason"))
        return done(
            view,
            next_url(view, form, "/tombstones"),
            "ok",
            f"Lifted tombstone {tid}; its content may be written again.",
        )

    # -- gateway conversations (docs/gateway.md) ---------------------------------------------------
    @page("/conversations")
    async def conversations_page(view: View) -> Response:
        """The gateway's recorded conversations; one of them with its messages and the forget forms."""
        conv_id = int_arg(arg(view, "id", 18), "id")
        if conv_id is None:
            out = await call(svc.conversation_list, view.principal)
            return render(view, "conversations.html", rows=out["conversations"], conv=None)
        conv = await call(svc.conversation_show, view.principal, conv_id)
        return render(view, "conversations.html", rows=[], conv=conv)

    @action("/conversations/forget")
    async def conversation_forget(view: View, form: FormData) -> Response:
        everything = field_(form, "all", 3) == "1"
        conv_id = int_arg(field_(form, "conversation_id", 18), "conversation_id")
        turn = int_arg(field_(form, "turn", 10), "turn")
        message = int_arg(field_(form, "message", 18), "message")
        candidates = field_(form, "candidates", 10) or "archive"
        out = await call(
            svc.conversation_forget, view.principal, conv_id, turn=turn, message=message, everything=everything,
            candidates=candidates,
        )  # fmt: skip
        gone = sum(len(c["messages"]) for c in out["conversations"])
        whole = everything or (turn is None and message is None)
        return done(
            view,
            view.url("/conversations") if whole else view.url("/conversations", id=conv_id),
            "ok",
            f"Forgot {gone} message(s); {out['tombstones']} tombstone(s) keep them out; "
            f"candidates archived {len(out['archived'])}, purged {len(out['purged'])}.",
        )

    @page("/scopes")
    async def scopes_page(view: View) -> Response:
        """The scope map: exact counts of active, verified and archived lessons per scope."""
        out = await call(svc.scopes, view.principal)
        return render(view, "scopes.html", rows=out["scopes"], total=out["total_active"])

    # -- audit ------------------------------------------------------------------------------------
    @page("/audit")
    async def audit_page(view: View) -> Response:
        """The audit log (filters: lesson scope and key, since), newest page first; chain status for admins."""
        p = view.principal
        assert p is not None
        scope, key, since_raw = arg(view, "scope"), arg(view, "key", 200), arg(view, "since", 60)
        cursor = arg(view, "cursor", 600)
        error = None
        entries: list[dict[str, Any]] = []
        next_cursor = None
        try:
            since = parse_time(since_raw) if since_raw else None
            out = await call(
                svc.audit, p, **paging({"scope": scope, "key": key, "since": since, "limit": PAGE_SIZE}, cursor)
            )
            entries, next_cursor = list(reversed(out["entries"])), out.get("next_cursor")
        except CairnError as exc:
            error = {"code": exc.code, "message": exc.message}
        chain = None
        if ADMIN in p.permissions:
            try:
                # The chain only: the state proof reads every row (about a minute at 100,000
                # lessons), too slow for a page view; `cairn audit verify` and serve's schedule run it.
                chain = await call(svc.audit_verify, p, full=False)
            except CairnError as exc:  # AUDIT_BROKEN carries the verification result: where it broke
                broken = exc.code == "AUDIT_BROKEN" and exc.data.get("broken_at")
                chain = exc.data if broken else {"ok": None, "problem": f"{exc.code}: {exc.message}"}
        filters = {"scope": scope, "key": key, "since": since_raw}
        return render(
            view, "audit.html", entries=entries, filters=filters, error=error, chain=chain, next_cursor=next_cursor
        )

    # -- tokens -----------------------------------------------------------------------------------
    async def tokens_view(
        view: View, created: dict[str, Any] | None = None, status: int = 200, refused: CairnError | None = None
    ) -> Response:
        p = view.principal
        cursor = arg(view, "cursor", 600)
        error = {"code": refused.code, "message": refused.message} if refused else None
        rows: list[dict[str, Any]] = []
        orgs: list[dict[str, Any]] = []
        next_cursor = None
        try:
            out = await call(svc.token_list, p, **paging({}, cursor))
            rows, next_cursor = out["tokens"], out.get("next_cursor")
            orgs = (await call(svc.org_list, p))["orgs"]
        except CairnError as exc:
            error = {"code": exc.code, "message": exc.message}
        return render(
            view, "tokens.html", status=status, rows=rows, orgs=orgs, created=created, error=error,
            next_cursor=next_cursor,
        )  # fmt: skip

    @page("/tokens")
    async def tokens_page(view: View) -> Response:
        """Your tokens; create one (its secret is shown once) or revoke one."""
        return await tokens_view(view)

    @action("/tokens")
    async def token_create(view: View, form: FormData) -> Response:
        """Rendered in the POST's response, not redirected: the secret must not outlive this page."""
        patterns = [ln.strip() for ln in field_(form, "scope_patterns", 10_000).splitlines() if ln.strip()]
        try:
            created = await call(
                svc.token_create,
                view.principal,
                perm=field_(form, "perm", 10) or "read",
                scope_patterns=patterns,
                org=field_(form, "org", 64) or None,
                expires=field_(form, "expires", 20) or None,
                name=field_(form, "name", 100) or None,
            )
        except CairnError as exc:  # shown above the form, which stays where it was
            return await tokens_view(view, status=STATUS.get(exc.code, 500), refused=exc)
        return await tokens_view(view, created=created)

    @action("/tokens/revoke")
    async def token_revoke(view: View, form: FormData) -> Response:
        tid = int_arg(field_(form, "token_id", 18), "token_id")
        if tid is None:
            raise CairnError("INVALID_INPUT", "which token?")
        await call(svc.token_revoke, view.principal, tid)
        return done(view, next_url(view, form, "/tokens"), "ok", f"Revoked token {tid}.")

    # -- webhooks (docs/webhooks.md) ---------------------------------------------------------------
    async def webhooks_view(
        view: View, created: dict[str, Any] | None = None, status: int = 200, refused: CairnError | None = None
    ) -> Response:
        org = arg(view, "org", 64) or None
        error = {"code": refused.code, "message": refused.message} if refused else None
        rows: list[dict[str, Any]] = []
        orgs: list[dict[str, Any]] = []
        try:
            rows = (await call(svc.webhook_list, view.principal, org=org))["webhooks"]
        except CairnError as exc:  # a non-admin sees why, not an empty list
            error = error or {"code": exc.code, "message": exc.message}
        try:
            orgs = (await call(svc.org_list, view.principal))["orgs"]
        except CairnError:
            orgs = []
        origin = f"{view.request.url.scheme}://{view.request.url.netloc}"
        if created is not None:
            created = {**created, "payload_url": origin + created["path"]}
        return render(
            view, "webhooks.html", status=status, rows=rows, orgs=orgs, org=org, created=created, error=error,
            origin=origin,
        )  # fmt: skip

    @page("/webhooks")
    async def webhooks_page(view: View) -> Response:
        """Registered GitHub repositories and what became of their deliveries; add, rotate, remove (admins)."""
        return await webhooks_view(view)

    async def webhook_secret(view: View, form: FormData, rotate: bool) -> Response:
        """Rendered in the POST's response, not redirected: the secret must not outlive this page."""
        repo, org = field_(form, "repo", 200), field_(form, "org", 64) or None
        try:
            if rotate:
                from cairn.service.catalog.calls import webhook_rotate

                values = {"repo": repo, "org": org, "grace": field_(form, "grace", 20) or "24h"}
                created = await call(webhook_rotate, svc, view.principal, values)
            else:
                created = await call(svc.webhook_add, view.principal, repo, org=org)
        except CairnError as exc:
            return await webhooks_view(view, status=STATUS.get(exc.code, 500), refused=exc)
        return await webhooks_view(view, created=created)

    @action("/webhooks")
    async def webhook_add(view: View, form: FormData) -> Response:
        return await webhook_secret(view, form, rotate=False)

    @action("/webhooks/rotate")
    async def webhook_rotate(view: View, form: FormData) -> Response:
        return await webhook_secret(view, form, rotate=True)

    @action("/webhooks/remove")
    async def webhook_remove(view: View, form: FormData) -> Response:
        repo, org = field_(form, "repo", 200), field_(form, "org", 64) or None
        await call(svc.webhook_remove, view.principal, repo, org=org)
        return done(view, next_url(view, form, "/webhooks"), "ok", f"Removed the webhook of {repo}.")

    # -- orgs -------------------------------------------------------------------------------------
    @page("/orgs")
    async def orgs_page(view: View) -> Response:
        """Your orgs; an org's members and roles, which its admins and owners may change."""
        orgs: list[dict[str, Any]] = []
        members = None
        next_cursor = None
        manage = False
        error = None
        chosen = arg(view, "org", 64)
        try:  # an org or scope-limited token cannot list its account's orgs: say so on the page
            orgs = (await call(svc.org_list, view.principal))["orgs"]
            chosen = chosen or (orgs[0]["org"] if orgs else None)
            if chosen:
                cursor = arg(view, "cursor", 600)
                out = await call(svc.org_members, view.principal, chosen, **paging({}, cursor))
                members, next_cursor, manage = out["members"], out.get("next_cursor"), out["can_manage"]
        except CairnError as exc:
            error = {"code": exc.code, "message": exc.message}
        return render(
            view,
            "orgs.html",
            error=error,
            orgs=orgs,
            org=chosen,
            members=members,
            manage=manage,  # the service says whether this caller manages members there
            next_cursor=next_cursor,
        )

    @action("/orgs/role")
    async def member_role(view: View, form: FormData) -> Response:
        org, user, role = field_(form, "org", 64), field_(form, "user", 64), field_(form, "role", 20)
        out = await call(svc.member_role, view.principal, org, user, role)
        return done(
            view, next_url(view, form, "/orgs"), "ok", f"{user} is now {out['role']} in {org} (was {out['was']})."
        )

    @action("/orgs/remove")
    async def member_remove(view: View, form: FormData) -> Response:
        org, user = field_(form, "org", 64), field_(form, "user", 64)
        await call(svc.member_remove, view.principal, org, user)
        return done(
            view, next_url(view, form, "/orgs"), "ok", f"Removed {user} from {org}; their org tokens are revoked."
        )

    return app


# -- helpers ---------------------------------------------------------------------------------------


def _cookie_path(view: View) -> str:
    return (view.base or "") + "/"


def _set_cookie(resp: Response, view: View, name: str, value: str, max_age: int | None = None) -> None:
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


def _clear_cookie(resp: Response, view: View, name: str) -> None:
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
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": ")) if value else ""


def _http_url(value: str | None) -> str | None:
    """A lesson's URL as a link only when it is http(s): ``javascript:`` must never become an href."""
    if not value:
        return None
    scheme = urllib.parse.urlsplit(value).scheme.lower()
    return value if scheme in ("http", "https") else None


def _diff_lines(diff: str) -> list[tuple[str, str]]:
    """(css class, text) per line of a unified diff; the text is escaped by the template."""
    out: list[tuple[str, str]] = []
    for line in diff.split("\n"):
        if not line:
            continue
        if line.startswith(("+++", "---")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith("\\"):
            kind = "meta"  # "\ No newline at end of file"
        else:
            kind = "ctx"
        out.append((kind, line))
    return out
