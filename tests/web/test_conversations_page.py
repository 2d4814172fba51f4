"""The dashboard's Conversations page: list, one conversation, forgetting a message (and the refusals)."""

from __future__ import annotations

from cairn.core.gateway import Attribution
from cairn.service.conversations import Conversations
from tests.web.conftest import XSS, Web
from tests.web.test_http import signed_in

SAID = "The nightly export job writes to bucket exports-prod and must run after the backup."


def _record(web: Web, thread: str, text: str) -> int:
    ledger = Conversations(web.svc)
    out = ledger.record(
        web.alice_p, Attribution("acme/dash", None, None, "headers"), protocol="openai", thread=thread, model="m",
        messages=[("user", text)], answer="Noted.", snapshot=ledger.epoch(web.alice_p),
    )  # fmt: skip
    return out["conversation"]


def test_conversations_page_shows_and_forgets_a_message(web: Web) -> None:
    conv = _record(web, "dash-1", SAID + " " + XSS)
    c = signed_in(web, web.alice)
    listing = c.get("/ui/conversations")
    assert listing.status == 200 and f"/ui/conversations?id={conv}" in listing.text
    page = c.get(f"/ui/conversations?id={conv}")
    assert page.status == 200 and "exports-prod" in page.text
    assert "<script>window.__pwned" not in page.text  # escaped, never markup
    message = next(m["id"] for m in web.svc.conversation_show(web.alice_p, conv)["transcript"] if m["role"] == "user")
    csrf = c.csrf(f"/ui/conversations?id={conv}")
    reply = c.post(
        "/ui/conversations/forget",
        {"csrf": csrf, "conversation_id": str(conv), "message": str(message), "candidates": "archive"},
    )
    assert reply.status == 303
    assert "exports-prod" not in c.get(f"/ui/conversations?id={conv}").text
    # Refusals: both granularities at once; another tenant's view of the same id.
    bad = c.post("/ui/conversations/forget", {"csrf": csrf, "conversation_id": str(conv), "turn": "1", "message": "1"})
    assert bad.status == 400 and "INVALID_INPUT" in bad.text
    other = signed_in(web, web.bob)
    assert other.get(f"/ui/conversations?id={conv}").status == 404


def test_a_read_only_token_sees_no_forget_button_and_cannot_forget(web: Web) -> None:
    conv = _record(web, "dash-ro", "A read-only viewer may look at this conversation about the release train.")
    c = signed_in(web, web.reader)
    page = c.get(f"/ui/conversations?id={conv}")
    assert page.status == 200 and "release train" in page.text and "Forget this conversation" not in page.text
    reply = c.post("/ui/conversations/forget", {"csrf": c.csrf(), "conversation_id": str(conv)})
    assert reply.status == 403 and "FORBIDDEN" in reply.text
    assert "release train" in str(web.svc.conversation_show(web.alice_p, conv))
