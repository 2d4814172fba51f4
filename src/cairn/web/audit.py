"""The audit log, and the chain's status for admins."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from cairn.core.principal import ADMIN
from cairn.core.timeparse import parse_time
from cairn.errors import CairnError
from cairn.web.deps import PAGE_SIZE, Dash, PageView
from cairn.web.handlers import arg, call, cursor_arg, paging, refusal

router = APIRouter()


@router.get("/audit", response_class=HTMLResponse)
async def audit_page(view: PageView, dash: Dash) -> Response:
    """The audit log (filters: lesson scope and key, since), newest page first; chain status for admins."""
    p = view.principal
    assert p is not None
    scope, key, since_raw = arg(view, "scope"), arg(view, "key", 200), arg(view, "since", 60)
    cursor = cursor_arg(view)
    error = None
    entries: list[dict[str, Any]] = []
    next_cursor = None
    try:
        since = parse_time(since_raw) if since_raw else None
        out = await call(
            dash.svc.audit, p, **paging({"scope": scope, "key": key, "since": since, "limit": PAGE_SIZE}, cursor)
        )
        entries, next_cursor = list(reversed(out["entries"])), out.get("next_cursor")
    except CairnError as exc:
        error = refusal(exc)
    chain = None
    if ADMIN in p.permissions:
        try:
            # The chain only: the state proof reads every row (about a minute at 100,000
            # lessons), too slow for a page view; `cairn audit verify` and serve's schedule run it.
            chain = await call(dash.svc.audit_verify, p, full=False)
        except CairnError as exc:  # AUDIT_BROKEN carries the verification result: where it broke
            broken = exc.code == "AUDIT_BROKEN" and exc.data.get("broken_at")
            chain = exc.data if broken else {"ok": None, "problem": f"{exc.code}: {exc.message}"}
    filters = {"scope": scope, "key": key, "since": since_raw}
    return dash.render(
        view, "audit.html", entries=entries, filters=filters, error=error, chain=chain, next_cursor=next_cursor
    )
