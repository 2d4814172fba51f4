"""Extraction through the gateway: candidates with provenance, and the guards against erasure meanwhile.

The fake provider answers the extraction prompt with the test's JSON. Interleavings are forced with
the job's ``before_write`` hook (it runs between the model's answer and the write transaction).
"""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from typing import Any

import pytest

from cairn.core.extraction import PROMPT
from cairn.core.gateway import Attribution
from cairn.errors import CairnError
from cairn.service.extraction import Extraction
from cairn.store.schema import audit_log
from tests.gateway.conftest import PROVIDER_KEY, Account, Rig
from tests.gateway.fake_upstream import EXTRACTION_MARK, TEXT

LESSON = "Run the migrations with make migrate before the integration tests, or they fail on missing tables."
ANSWER = json.dumps({"lessons": [{"key": "Migrate Before Integration", "lesson": LESSON}]})
HEADERS = {"X-Cairn-Repo": "acme/widget", "X-Cairn-Extract": "on"}


@pytest.fixture
def events(gw: Rig) -> Iterator[tuple[queue.Queue, queue.Queue]]:
    recorded: queue.Queue[dict[str, Any]] = queue.Queue()
    extracted: queue.Queue[dict[str, Any]] = queue.Queue()
    gw.gateway.after_record, gw.gateway.after_extract = recorded.put, extracted.put
    gw.gateway.extraction = None
    gw.fake.extraction_answer = ANSWER
    yield recorded, extracted
    gw.gateway.after_record = gw.gateway.after_extract = None
    gw.gateway.extraction = None
    gw.fake.extraction_answer = ""


def _turn(gw: Rig, me: Account, thread: str, text: str, **headers: str) -> None:
    client = gw.openai(me.token, **{**HEADERS, "X-Cairn-Conversation": thread, **headers})
    client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": text}])


def _guards(gw: Rig, me: Account) -> list[dict[str, Any]]:
    rows = gw.store.run(
        lambda c: (
            c.execute(
                audit_log.select()
                .where(audit_log.c.tenant_id == me.p.tenant_id, audit_log.c.action == "gateway-guard")
                .order_by(audit_log.c.seq)
            )
            .mappings()
            .all()
        ),
        write=False,
        **me.p.db_vars,
    )
    return [json.loads(r["detail"]) for r in rows]


def _asked(gw: Rig) -> list[dict[str, Any]]:
    return [r for r in gw.fake.requests if EXTRACTION_MARK in json.dumps(r["body"])]


def test_extraction_writes_candidates_with_provenance(gw: Rig, account: Account, events: Any) -> None:
    recorded, extracted = events
    _turn(gw, account, "x-1", "The integration tests fail with no such table: users. How do I fix it?")
    conv = recorded.get(timeout=60)["conversation"]
    result = extracted.get(timeout=60)
    assert result["written"] == [
        {"scope": "repo::acme/widget", "key": "migrate-before-integration", "action": "created"}
    ]
    assert result["guards"] == []
    lesson = gw.svc.read(account.p, "repo::acme/widget", "migrate-before-integration")["lesson"]
    assert lesson["value"] == LESSON and lesson["trust"] == "candidate" and lesson["origin"] == "gateway"
    assert lesson["trigger"] == f"conversation {conv} turn 1"
    shown = gw.svc_conversations.show(account.p, conv)
    assert shown["lessons"] == [
        {"turn": 1, "scope": "repo::acme/widget", "key": "migrate-before-integration", "trust": "candidate"}
    ]
    # The fixed prompt went to the same upstream and model, with the gateway's key and the turn as data.
    asked = _asked(gw)[-1]
    assert asked["body"]["model"] == "gpt-test" and asked["body"]["messages"][0]["content"] == PROMPT
    assert "no such table: users" in asked["body"]["messages"][1]["content"]
    assert TEXT in asked["body"]["messages"][1]["content"]
    assert asked["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"


def test_no_extraction_without_opt_in(gw: Rig, account: Account, events: Any) -> None:
    recorded, _ = events
    _turn(gw, account, "x-off", "Nothing to extract unless asked.", **{"X-Cairn-Extract": "off"})
    assert recorded.get(timeout=60)["recorded"]
    assert _asked(gw) == []
    assert gw.gateway.extract is False  # the default: extraction is opt-in


def test_anthropic_turns_extract_through_the_messages_api(gw: Rig, account: Account, events: Any) -> None:
    recorded, extracted = events
    client = gw.anthropic(account.token, **{**HEADERS, "X-Cairn-Conversation": "x-anthropic"})
    client.messages.create(model="claude-test", max_tokens=50, messages=[{"role": "user", "content": "Tests fail."}])
    recorded.get(timeout=60)
    assert extracted.get(timeout=60)["written"]
    asked = _asked(gw)[-1]
    assert asked["path"] == "/v1/messages" and asked["body"]["system"] == PROMPT
    assert asked["headers"]["x-api-key"] == PROVIDER_KEY


def test_forgetting_the_turn_purges_its_candidates_and_keeps_them_out(gw: Rig, account: Account, events: Any) -> None:
    recorded, extracted = events
    _turn(gw, account, "x-purge", "Why do the integration tests fail on a fresh checkout?")
    conv = recorded.get(timeout=60)["conversation"]
    assert extracted.get(timeout=60)["written"]
    report = gw.svc_conversations.forget(account.p, conv, turn=1, candidates="purge")
    assert report["purged"] == [{"scope": "repo::acme/widget", "key": "migrate-before-integration"}]
    with pytest.raises(CairnError) as gone:
        gw.svc.read(account.p, "repo::acme/widget", "migrate-before-integration")
    assert gone.value.code == "NOT_FOUND"
    # The same lesson proposed again from a new conversation is refused by its tombstone.
    _turn(gw, account, "x-purge-again", "Fresh checkout, integration tests fail again.")
    recorded.get(timeout=60)
    again = extracted.get(timeout=60)
    assert again["written"] == [] and again["skipped"] == [
        {"key": "migrate-before-integration", "reason": "TOMBSTONED"}
    ]


def test_forgetting_the_conversation_archives_its_candidates_by_default(gw: Rig, account: Account, events: Any) -> None:
    recorded, extracted = events
    _turn(gw, account, "x-archive", "Integration tests fail on CI only.")
    conv = recorded.get(timeout=60)["conversation"]
    extracted.get(timeout=60)
    report = gw.svc_conversations.forget(account.p, conv)
    assert report["archived"] == [{"scope": "repo::acme/widget", "key": "migrate-before-integration"}]
    listed = gw.svc.list(account.p, "repo::acme/widget", archived=True)["lessons"]
    assert [x["key"] for x in listed] == ["migrate-before-integration"]


def test_a_delete_during_a_running_extraction_writes_nothing(gw: Rig, account: Account, events: Any) -> None:
    recorded, extracted = events
    forgotten: list[int] = []

    def forget_now(attempt: int) -> None:  # the model has answered; the write has not started
        forgotten.append(attempt)
        gw.svc_conversations.forget(account.p, conv_id[0])

    conv_id: list[int] = []
    gw.gateway.extraction = Extraction(gw.svc, before_write=forget_now)
    _turn(gw, account, "x-delete", "The integration tests fail on the staging box.")
    conv_id.append(recorded.get(timeout=60)["conversation"])
    result = extracted.get(timeout=60)
    assert forgotten == [1] and result["written"] == [] and result["guards"] == ["source_revision"]
    with pytest.raises(CairnError):
        gw.svc.read(account.p, "repo::acme/widget", "migrate-before-integration")
    assert [g["guard"] for g in _guards(gw, account)] == ["source_revision"]
    assert _guards(gw, account)[0]["then"] == "nothing"


def test_a_changed_source_is_recomputed_once(gw: Rig, account: Account, events: Any) -> None:
    recorded, extracted = events
    conv_id: list[int] = []

    def add_a_turn(attempt: int) -> None:  # the conversation changes (no erasure) before the first write
        if attempt == 1:
            ledger = gw.svc_conversations
            ledger.record(
                account.p, Attribution("acme/widget", None, None, "headers"), protocol="openai",
                thread=_thread("x-revision"), model="gpt-test",
                messages=[("user", "first"), ("assistant", TEXT), ("user", "A later turn arrived meanwhile.")],
                answer="ok", snapshot=ledger.epoch(account.p),
            )  # fmt: skip

    gw.gateway.extraction = Extraction(gw.svc, before_write=add_a_turn)
    _turn(gw, account, "x-revision", "first")
    conv_id.append(recorded.get(timeout=60)["conversation"])
    result = extracted.get(timeout=60)
    assert result["guards"] == ["source_revision"] and result["written"]
    assert len(_asked(gw)) == 2  # discarded once, recomputed once
    assert [(g["guard"], g["then"]) for g in _guards(gw, account)] == [("source_revision", "recompute")]


def test_an_erasure_elsewhere_in_the_tenant_discards_the_extraction(gw: Rig, account: Account, events: Any) -> None:
    recorded, extracted = events
    gw.svc.write(account.p, "global", "unrelated", "An unrelated lesson that someone forgets meanwhile.")

    def forget_a_lesson(attempt: int) -> None:
        gw.svc.forget(account.p, "global", "unrelated", "wrong")

    gw.gateway.extraction = Extraction(gw.svc, before_write=forget_a_lesson)
    _turn(gw, account, "x-epoch", "Integration tests fail after the merge.")
    recorded.get(timeout=60)
    result = extracted.get(timeout=60)
    assert result["written"] == [] and result["guards"] == ["deletion_epoch"]
    assert [g["guard"] for g in _guards(gw, account)] == ["deletion_epoch"]


def _thread(header: str) -> str:
    from cairn.core.gateway import thread

    return thread("openai", header, "")


def test_an_extracted_lesson_that_restates_forgotten_content_is_held(gw: Rig, account: Account, events: Any) -> None:
    """Extraction writes through the one write path: the paraphrase check holds what it drew."""
    recorded, extracted = events
    forgotten = "Before the integration tests, run the migrations with make migrate, or they fail on missing tables."
    gw.svc.write(account.p, "repo::acme/widget", "old-migrate-advice", forgotten)
    tomb = gw.svc.forget(account.p, "repo::acme/widget", "old-migrate-advice", "wrong: the fixture migrates")
    _turn(gw, account, "x-held", "The integration tests fail with no such table: users.")
    conv = recorded.get(timeout=60)["conversation"]
    result = extracted.get(timeout=60)
    assert result["written"] == [
        {"scope": "repo::acme/widget", "key": "migrate-before-integration", "action": "created"}
    ]
    with pytest.raises(CairnError) as err:
        gw.svc.read(account.p, "repo::acme/widget", "migrate-before-integration")
    assert err.value.code == "NOT_FOUND" and "held" in err.value.message
    queue = {c["key"]: c for c in gw.svc.review_queue(account.p)["candidates"]}
    assert queue["migrate-before-integration"]["held"]["tombstone_id"] == tomb["tombstone_id"]
    # Forgetting the conversation takes the held candidate drawn only from it, as it takes a candidate.
    report = gw.svc_conversations.forget(account.p, conv, candidates="purge")
    assert report["purged"] == [{"scope": "repo::acme/widget", "key": "migrate-before-integration"}]
    assert "migrate-before-integration" not in {c["key"] for c in gw.svc.review_queue(account.p)["candidates"]}
