"""The gateway's recorded conversations (docs/gateway.md): list, one with its messages, forget."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from cairn.web.deps import Dash, Form, PageView, PostView
from cairn.web.handlers import arg, call, field_, int_arg

router = APIRouter()


@router.get("/conversations", response_class=HTMLResponse)
async def conversations_page(view: PageView, dash: Dash) -> Response:
    """The gateway's recorded conversations; one of them with its messages and the forget forms."""
    conv_id = int_arg(arg(view, "id", 18), "id")
    if conv_id is None:
        out = await call(dash.svc.conversation_list, view.principal)
        return dash.render(view, "conversations.html", rows=out["conversations"], conv=None)
    conv = await call(dash.svc.conversation_show, view.principal, conv_id)
    return dash.render(view, "conversations.html", rows=[], conv=conv)


@router.post("/conversations/forget", response_class=HTMLResponse)
async def conversation_forget(form: Form, view: PostView, dash: Dash) -> Response:
    everything = field_(form, "all", 3) == "1"
    conv_id = int_arg(field_(form, "conversation_id", 18), "conversation_id")
    turn = int_arg(field_(form, "turn", 10), "turn")
    message = int_arg(field_(form, "message", 18), "message")
    candidates = field_(form, "candidates", 10) or "archive"
    out = await call(
        dash.svc.conversation_forget, view.principal, conv_id, turn=turn, message=message, everything=everything,
        candidates=candidates,
    )  # fmt: skip
    gone = sum(len(c["messages"]) for c in out["conversations"])
    whole = everything or (turn is None and message is None)
    return dash.done(
        view,
        view.url("/conversations") if whole else view.url("/conversations", id=conv_id),
        "ok",
        f"Forgot {gone} message(s); {out['tombstones']} tombstone(s) keep them out; "
        f"candidates archived {len(out['archived'])}, purged {len(out['purged'])}.",
    )
