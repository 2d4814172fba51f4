"""Review and forgetting: the candidates' queue with its verdicts, archive and expired lists, and
tombstones (an admin lifts one with a reason)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from cairn.errors import CairnError
from cairn.web.deps import PAGE_SIZE, Dash, Form, PageView, PostView
from cairn.web.handlers import arg, call, field_, int_arg, next_url, paged

router = APIRouter()


@router.get("/review", response_class=HTMLResponse)
async def review_page(view: PageView, dash: Dash) -> Response:
    """Candidates with their provenance, oldest first; verify or reject one by one or in bulk."""
    scope = arg(view, "scope")
    out = await call(dash.svc.review_queue, view.principal, **paged(view, {"scope": scope, "limit": PAGE_SIZE}))
    return dash.render(view, "review.html", rows=out["candidates"], scope=scope, next_cursor=out.get("next_cursor"))


@router.post("/review/bulk", response_class=HTMLResponse)
async def review_bulk(form: Form, view: PostView, dash: Dash) -> Response:
    """Verify or reject every selected candidate: one service call (one transaction) each."""
    op = field_(form, "op", 10)
    if op not in ("verify", "reject"):
        raise CairnError("INVALID_INPUT", "choose verify or reject")
    items = [v for v in form.getlist("item") if isinstance(v, str)]
    if not items:
        return dash.done(view, next_url(view, form, "/review"), "error", "Select at least one candidate first.")
    reason = field_(form, "reason")
    ok: list[str] = []
    refused: list[str] = []
    for item in items[: PAGE_SIZE * 4]:
        scope, _, key = item.partition(" ")
        try:
            if op == "verify":
                await call(dash.svc.verify, view.principal, scope, key)
            else:
                await call(dash.svc.reject, view.principal, scope, key, reason)
            ok.append(f"{scope} {key}")
        except CairnError as exc:
            refused.append(f"{scope} {key}: {exc.code} {exc.message}")
    verb = "Verified" if op == "verify" else "Rejected"
    parts = [f"{verb} {len(ok)} of {len(items)}."]
    if refused:
        parts.append("Refused: " + "; ".join(refused[:5]) + (" …" if len(refused) > 5 else ""))
    return dash.done(view, next_url(view, form, "/review"), "error" if refused else "ok", " ".join(parts))


@router.get("/archive", response_class=HTMLResponse)
async def archive_page(view: PageView, dash: Dash) -> Response:
    """Archived lessons (hidden from every read until restored), newest first."""
    scope = arg(view, "scope")
    out = await call(dash.svc.list, view.principal, scope, **paged(view, {"archived": True, "limit": PAGE_SIZE}))
    return dash.render(view, "archive.html", rows=out["lessons"], scope=scope, next_cursor=out.get("next_cursor"))


@router.get("/expired", response_class=HTMLResponse)
async def expired_page(view: PageView, dash: Dash) -> Response:
    """Lessons whose TTL ran out, most recently expired first."""
    scope = arg(view, "scope")
    out = await call(dash.svc.expired, view.principal, scope, **paged(view, {"limit": PAGE_SIZE}))
    return dash.render(view, "expired.html", rows=out["lessons"], scope=scope, next_cursor=out.get("next_cursor"))


@router.get("/tombstones", response_class=HTMLResponse)
async def tombstones_page(view: PageView, dash: Dash) -> Response:
    """Live tombstones (or all, with lifted ones); an admin lifts one with a reason."""
    lifted = view.request.query_params.get("lifted") == "1"
    out = await call(dash.svc.tombstones, view.principal, **paged(view, {"include_lifted": lifted}))
    return dash.render(
        view, "tombstones.html", rows=out["tombstones"], lifted=lifted, next_cursor=out.get("next_cursor")
    )


@router.post("/tombstones/lift", response_class=HTMLResponse)
async def tombstone_lift(form: Form, view: PostView, dash: Dash) -> Response:
    tid = int_arg(field_(form, "tombstone_id", 18), "tombstone_id")
    if tid is None:
        raise CairnError("INVALID_INPUT", "which tombstone?")
    await call(dash.svc.unforget, view.principal, tid, field_(form, "reason"))
    return dash.done(
        view,
        next_url(view, form, "/tombstones"),
        "ok",
        f"Lifted tombstone {tid}; its content may be written again.",
    )
