"""Lessons: browse and search, one lesson's page with its versions and diff, its actions; archive,
expired and the scope map."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from cairn.errors import CairnError
from cairn.web.deps import MAX_QUERY_CHARS, PAGE_SIZE, Dash, Form, PageView, PostView, View
from cairn.web.handlers import arg, call, cursor_arg, field_, int_arg, next_url, paging, refusal

router = APIRouter()


@router.get("/lessons", response_class=HTMLResponse)
async def lessons_page(view: PageView, dash: Dash) -> Response:
    """Browse (scope, tag, trust; newest first, paged) or search (text, best first)."""
    p = view.principal
    scope, tag, trust = arg(view, "scope"), arg(view, "tag", 64), arg(view, "trust", 20)
    q, cursor = arg(view, "q", MAX_QUERY_CHARS), cursor_arg(view)
    scopes = (await call(dash.svc.scopes, p))["scopes"]
    error = None
    rows: list[dict[str, Any]] = []
    next_cursor = None
    truncated = False
    try:
        if q:
            found = await call(
                dash.svc.search, p, q, scopes=[scope] if scope else None, tag=tag, trust=trust, limit=PAGE_SIZE
            )
            rows = [dict(h["lesson"], snippet=h["snippet"]) for h in found["results"]]
        else:
            listed = await call(
                dash.svc.list, p, scope, **paging({"tag": tag, "trust": trust, "limit": PAGE_SIZE}, cursor)
            )
            rows, next_cursor = listed["lessons"], listed.get("next_cursor")
            truncated = bool(listed.get("truncated")) and not next_cursor
    except CairnError as exc:  # a bad filter is shown above the (empty) table, not as a dead end
        error = refusal(exc)
    filters = {"scope": scope, "tag": tag, "trust": trust, "q": q}
    return dash.render(
        view,
        "lessons.html",
        rows=rows,
        scopes=scopes,
        filters=filters,
        error=error,
        next_cursor=next_cursor,
        truncated=truncated,
    )


@router.get("/lesson", response_class=HTMLResponse)
async def lesson_page(view: PageView, dash: Dash) -> Response:
    """One lesson: value, provenance, trust, counts, links, versions, and a diff of any two."""
    p = view.principal
    scope, key = arg(view, "scope"), arg(view, "key", 200)
    if not scope or not key:
        raise CairnError("INVALID_INPUT", "a lesson page needs scope and key")
    detail = await call(dash.svc.lesson_detail, p, scope, key)
    hist = await call(dash.svc.history, p, scope, key)
    versions = hist["versions"]
    v1 = int_arg(arg(view, "v1", 18), "v1")
    v2 = int_arg(arg(view, "v2", 18), "v2")
    diff = None
    diff_error = None
    if v1 is not None and v2 is not None:
        try:
            diff = await call(dash.svc.diff, p, scope, key, v1, v2)
        except CairnError as exc:
            diff_error = refusal(exc)
    elif len(versions) >= 2:
        v1, v2 = versions[-2]["version"], versions[-1]["version"]
    sessions = sorted({v["session"] for v in versions if v["session"]})
    return dash.render(
        view,
        "lesson.html",
        d=detail,
        lesson=detail["lesson"],
        versions=versions,
        sessions=sessions,
        diff=diff,
        diff_lines=diff_lines(diff["value_diff"]) if diff else [],
        diff_error=diff_error,
        v1=v1,
        v2=v2,
    )


async def lesson_action(dash: Dash, view: View, form: FormData, op: str) -> Response:
    p = view.principal
    scope, key = field_(form, "scope", 300), field_(form, "key", 200)
    back = next_url(view, form, "/lessons")
    if op == "verify":
        out = await call(dash.svc.verify, p, scope, key)
        msg = f"Verified {scope} {key}." if out.get("changed") else f"{scope} {key} was already verified."
    elif op == "reject":
        out = await call(dash.svc.reject, p, scope, key, field_(form, "reason"))
        msg = f"Rejected {scope} {key}; its content is tombstoned (tombstone {out['tombstone_id']})."
        if back.startswith(view.url("/lesson") + "?"):
            back = view.url("/review")  # the lesson page of a rejected lesson no longer exists
    elif op == "archive":
        out = await call(dash.svc.archive, p, scope, key)
        msg = f"Archived {scope} {key}." if out.get("changed") else f"{scope} {key} was already archived."
    else:
        out = await call(dash.svc.restore, p, scope, key)
        msg = f"Restored {scope} {key}." if out.get("changed") else f"{scope} {key} was not archived."
    return dash.done(view, back, "ok", msg)


def _action_route(op: str) -> Callable[..., Awaitable[Response]]:
    """The POST handler of one lesson action; its form says which lesson, ``op`` what to do."""

    async def route(form: Form, view: PostView, dash: Dash) -> Response:
        return await lesson_action(dash, view, form, op)

    route.__name__ = route.__qualname__ = f"lesson_{op}"
    return route


for _op in ("verify", "reject", "archive", "restore"):
    router.add_api_route(f"/lesson/{_op}", _action_route(_op), methods=["POST"], response_class=HTMLResponse)


@router.get("/scopes", response_class=HTMLResponse)
async def scopes_page(view: PageView, dash: Dash) -> Response:
    """The scope map: exact counts of active, verified and archived lessons per scope."""
    out = await call(dash.svc.scopes, view.principal)
    return dash.render(view, "scopes.html", rows=out["scopes"], total=out["total_active"])


def diff_lines(diff: str) -> list[tuple[str, str]]:
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
