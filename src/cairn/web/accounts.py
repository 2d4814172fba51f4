"""Your tokens (minted once, revoked) and your orgs' members (roles changed and members removed by
those the service says may)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from cairn.api.problems import STATUS
from cairn.errors import CairnError
from cairn.web.deps import Dash, Form, PageView, PostView, View
from cairn.web.handlers import arg, call, cursor_arg, field_, int_arg, next_url, paged, paging, refusal

router = APIRouter()


async def tokens_view(
    dash: Dash, view: View, created: dict[str, Any] | None = None, status: int = 200, refused: CairnError | None = None
) -> Response:
    p = view.principal
    cursor = cursor_arg(view)
    error = refusal(refused) if refused else None
    rows: list[dict[str, Any]] = []
    orgs: list[dict[str, Any]] = []
    next_cursor = None
    try:
        out = await call(dash.svc.token_list, p, **paging({}, cursor))
        rows, next_cursor = out["tokens"], out.get("next_cursor")
        orgs = (await call(dash.svc.org_list, p))["orgs"]
    except CairnError as exc:
        error = refusal(exc)
    return dash.render(
        view, "tokens.html", status=status, rows=rows, orgs=orgs, created=created, error=error,
        next_cursor=next_cursor,
    )  # fmt: skip


@router.get("/tokens", response_class=HTMLResponse)
async def tokens_page(view: PageView, dash: Dash) -> Response:
    """Your tokens; create one (its secret is shown once) or revoke one."""
    return await tokens_view(dash, view)


@router.post("/tokens", response_class=HTMLResponse)
async def token_create(form: Form, view: PostView, dash: Dash) -> Response:
    """Rendered in the POST's response, not redirected: the secret must not outlive this page."""
    patterns = [ln.strip() for ln in field_(form, "scope_patterns", 10_000).splitlines() if ln.strip()]
    try:
        created = await call(
            dash.svc.token_create,
            view.principal,
            perm=field_(form, "perm", 10) or "read",
            scope_patterns=patterns,
            org=field_(form, "org", 64) or None,
            expires=field_(form, "expires", 20) or None,
            name=field_(form, "name", 100) or None,
        )
    except CairnError as exc:  # shown above the form, which stays where it was
        return await tokens_view(dash, view, status=STATUS.get(exc.code, 500), refused=exc)
    return await tokens_view(dash, view, created=created)


@router.post("/tokens/revoke", response_class=HTMLResponse)
async def token_revoke(form: Form, view: PostView, dash: Dash) -> Response:
    tid = int_arg(field_(form, "token_id", 18), "token_id")
    if tid is None:
        raise CairnError("INVALID_INPUT", "which token?")
    await call(dash.svc.token_revoke, view.principal, tid)
    return dash.done(view, next_url(view, form, "/tokens"), "ok", f"Revoked token {tid}.")


@router.get("/orgs", response_class=HTMLResponse)
async def orgs_page(view: PageView, dash: Dash) -> Response:
    """Your orgs; an org's members and roles, which its admins and owners may change."""
    orgs: list[dict[str, Any]] = []
    members = None
    next_cursor = None
    manage = False
    error = None
    chosen = arg(view, "org", 64)
    try:  # an org or scope-limited token cannot list its account's orgs: say so on the page
        orgs = (await call(dash.svc.org_list, view.principal))["orgs"]
        chosen = chosen or (orgs[0]["org"] if orgs else None)
        if chosen:
            out = await call(dash.svc.org_members, view.principal, chosen, **paged(view, {}))
            members, next_cursor, manage = out["members"], out.get("next_cursor"), out["can_manage"]
    except CairnError as exc:
        error = refusal(exc)
    return dash.render(
        view,
        "orgs.html",
        error=error,
        orgs=orgs,
        org=chosen,
        members=members,
        manage=manage,  # the service says whether this caller manages members there
        next_cursor=next_cursor,
    )


@router.post("/orgs/role", response_class=HTMLResponse)
async def member_role(form: Form, view: PostView, dash: Dash) -> Response:
    org, user, role = field_(form, "org", 64), field_(form, "user", 64), field_(form, "role", 20)
    out = await call(dash.svc.member_role, view.principal, org, user, role)
    return dash.done(
        view, next_url(view, form, "/orgs"), "ok", f"{user} is now {out['role']} in {org} (was {out['was']})."
    )


@router.post("/orgs/remove", response_class=HTMLResponse)
async def member_remove(form: Form, view: PostView, dash: Dash) -> Response:
    org, user = field_(form, "org", 64), field_(form, "user", 64)
    await call(dash.svc.member_remove, view.principal, org, user)
    return dash.done(
        view, next_url(view, form, "/orgs"), "ok", f"Removed {user} from {org}; their org tokens are revoked."
    )
