"""The conversation ledger and forgetting, through the gateway and the service, on both databases."""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from cairn.errors import CairnError
from cairn.store.schema import audit_log
from tests.gateway.conftest import Account, Rig
from tests.gateway.fake_upstream import TEXT

SECRET = "Our staging password is hunter2 and it must never leak."
OTHER = "Please look at the failing integration test in ci."
REPO = {"X-Cairn-Repo": "acme/widget"}


@pytest.fixture
def turns(gw: Rig) -> Any:
    """The results of recordings, in order (the gateway records after its response went out)."""
    results: queue.Queue[dict[str, Any]] = queue.Queue()
    gw.gateway.after_record = results.put
    yield results
    gw.gateway.after_record = None


def _next(results: queue.Queue[dict[str, Any]]) -> dict[str, Any]:
    return results.get(timeout=60)


def _chat(gw: Rig, me: Account, thread: str, messages: list[dict[str, str]], **kw: Any) -> Any:
    headers = {**REPO, "X-Cairn-Conversation": thread}
    return gw.openai(me.token, **headers).chat.completions.create(model="m", messages=messages, **kw)


def _db_bytes(gw: Rig) -> bytes:
    """Every byte of the SQLite store (main file, WAL, kept ranking indexes), with the store still open
    (as a serving gateway's is): an erasure leaves no copy in the write-ahead log either."""
    db = Path(gw.store.url.split("///", 1)[1])
    return b"".join(
        p.read_bytes()
        for p in sorted(db.parent.glob(db.name + "*")) + sorted(db.parent.glob(db.name + ".rank/*"))
        if p.is_file()
    )


def test_turns_are_recorded_once_each(gw: Rig, account: Account, turns: queue.Queue) -> None:
    history = [{"role": "user", "content": OTHER}]
    _chat(gw, account, "t-record", history)
    first = _next(turns)
    assert first["recorded"] and first["turn"] == 1 and first["messages"] == 2
    history += [{"role": "assistant", "content": TEXT}, {"role": "user", "content": "And the unit tests too."}]
    _chat(gw, account, "t-record", history)
    second = _next(turns)
    assert second["conversation"] == first["conversation"] and second["turn"] == 2 and second["messages"] == 2
    _chat(gw, account, "t-record", history)  # the same request again: a replay, nothing new
    assert _next(turns) == {"recorded": False, "reason": "replay"}
    shown = gw.svc_conversations.show(account.p, first["conversation"])
    assert [(m["turn"], m["role"], m["content"]) for m in shown["transcript"]] == [
        (1, "user", OTHER),
        (1, "assistant", TEXT),
        (2, "user", "And the unit tests too."),
        (2, "assistant", TEXT),
    ]
    listed = gw.svc_conversations.list(account.p)["conversations"]
    assert any(c["id"] == first["conversation"] and c["turns"] == 2 and c["repo"] == "acme/widget" for c in listed)


def test_streamed_turns_are_recorded(gw: Rig, account: Account, turns: queue.Queue) -> None:
    for _ in _chat(gw, account, "t-stream", [{"role": "user", "content": OTHER}], stream=True):
        pass
    result = _next(turns)
    shown = gw.svc_conversations.show(account.p, result["conversation"])
    assert [m["content"] for m in shown["transcript"]] == [OTHER, TEXT]


def test_unknown_attribution_records_nothing(gw: Rig, account: Account, turns: queue.Queue) -> None:
    gw.openai(account.token).chat.completions.create(model="m", messages=[{"role": "user", "content": OTHER}])
    assert _next(turns) == {"recorded": False, "reason": "unknown attribution"}


def test_another_tenant_sees_none_of_these_conversations(gw: Rig, account: Account, turns: queue.Queue) -> None:
    _chat(gw, account, "t-tenant", [{"role": "user", "content": SECRET}])
    conv = _next(turns)["conversation"]
    bob = gw.svc.resolve_token(gw.bob)
    assert gw.svc_conversations.list(bob)["conversations"] == []
    with pytest.raises(CairnError, match="no conversation"):
        gw.svc_conversations.show(bob, conv)
    with pytest.raises(CairnError, match="no conversation"):
        gw.svc_conversations.forget(bob, conv)


@pytest.mark.parametrize("granularity", ["conversation", "turn", "message"])
def test_forgetting_leaves_no_copy_and_blocks_replay_and_the_resaid_sentence(
    gw: Rig, account: Account, turns: queue.Queue, granularity: str
) -> None:
    thread = f"t-forget-{granularity}"
    secret = SECRET.replace("hunter2", f"hunter2{granularity}")
    mark = f"hunter2{granularity}".encode()
    history = [{"role": "user", "content": OTHER}]
    _chat(gw, account, thread, history)
    conv = _next(turns)["conversation"]
    history += [{"role": "assistant", "content": TEXT}, {"role": "user", "content": secret}]
    _chat(gw, account, thread, history)
    assert _next(turns)["turn"] == 2
    shown = gw.svc_conversations.show(account.p, conv)
    secret_id = next(m["id"] for m in shown["transcript"] if m["content"] == secret)
    target = {"conversation": {}, "turn": {"turn": 2}, "message": {"message": secret_id}}[granularity]
    report = gw.svc_conversations.forget(account.p, conv, **target)
    done = report["conversations"][0]
    assert secret_id in [m["id"] for m in done["messages"]] and "content" in done["tombstones"]

    # No copy: not in the ledger, and on SQLite not in the database's bytes either.
    if granularity == "conversation":
        with pytest.raises(CairnError, match="no conversation"):
            gw.svc_conversations.show(account.p, conv)
    else:
        assert secret not in json.dumps(gw.svc_conversations.show(account.p, conv))
    if gw.store.url.startswith("sqlite"):
        assert mark not in _db_bytes(gw)

    # The audit names what was forgotten (ids), never its text.
    row = gw.store.run(
        lambda c: (
            c.execute(
                audit_log.select()
                .where(audit_log.c.tenant_id == account.p.tenant_id, audit_log.c.action == "conversation-forget")
                .order_by(audit_log.c.seq.desc())
            )
            .mappings()
            .first()
        ),
        write=False,
        **account.p.db_vars,
    )
    assert str(secret_id) in row["detail"] and mark.decode() not in row["detail"]

    # A replayed request (the same history, the forgotten message included) brings nothing back.
    _chat(gw, account, thread, history)
    _next(turns)
    if granularity != "conversation":
        assert secret not in json.dumps(gw.svc_conversations.show(account.p, conv))
    assert not any(secret in json.dumps(gw.svc_conversations.show(account.p, c["id"]))
                   for c in gw.svc_conversations.list(account.p)["conversations"])  # fmt: skip

    # The same sentence in a new conversation, re-cased and inside other text, is stored as forgotten.
    resaid = "Hello again. " + secret.upper().replace("  ", " ") + " Thanks for checking the build."
    _chat(gw, account, f"{thread}-new", [{"role": "user", "content": resaid}])
    fresh = _next(turns)
    messages = gw.svc_conversations.show(account.p, fresh["conversation"])["transcript"]
    assert messages[0]["content"] == "Hello again. [forgotten] Thanks for checking the build."
    if gw.store.url.startswith("sqlite"):
        assert mark.upper() not in _db_bytes(gw) and mark not in _db_bytes(gw)


def test_forget_all_is_the_reset(gw: Rig, account: Account, turns: queue.Queue) -> None:
    for name in ("t-a", "t-b"):
        _chat(gw, account, name, [{"role": "user", "content": f"{OTHER} ({name})"}])
        _next(turns)
    report = gw.svc_conversations.forget(account.p, everything=True)
    assert len(report["conversations"]) >= 2
    assert gw.svc_conversations.list(account.p)["conversations"] == []


def test_forget_refuses_bad_input(gw: Rig, account: Account, turns: queue.Queue) -> None:
    _chat(gw, account, "t-bad", [{"role": "user", "content": OTHER}])
    conv = _next(turns)["conversation"]
    with pytest.raises(CairnError, match="turns 1-1"):
        gw.svc_conversations.forget(account.p, conv, turn=5)
    with pytest.raises(CairnError, match="no message"):
        gw.svc_conversations.forget(account.p, conv, message=10**9)
    with pytest.raises(CairnError, match="not both"):
        gw.svc_conversations.forget(account.p, conv, turn=1, message=1)
    with pytest.raises(CairnError, match="archive or purge"):
        gw.svc_conversations.forget(account.p, conv, candidates="keep")
    with pytest.raises(CairnError, match="name a conversation"):
        gw.svc_conversations.forget(account.p)
    reader = gw.svc.resolve_token(gw.svc.token_create(account.p, perm="read")["token"])
    with pytest.raises(CairnError) as refused:
        gw.svc_conversations.forget(reader, conv)
    assert refused.value.code == "FORBIDDEN"


def test_a_delete_during_a_streaming_request_writes_nothing(gw: Rig, account: Account, turns: queue.Queue) -> None:
    gate = threading.Event()
    gw.fake.reset(gate=gate)
    stream = _chat(gw, account, "t-midstream", [{"role": "user", "content": OTHER}], stream=True)
    chunks = iter(stream)
    next(chunks)  # the request is streaming; the upstream holds the rest until the gate opens
    gw.svc_conversations.forget(account.p, everything=True)  # the tenant's conversations are reset now
    gate.set()
    for _ in chunks:
        pass
    assert _next(turns) == {"recorded": False, "reason": "guard", "guard": "deletion_epoch"}
    assert gw.svc_conversations.list(account.p)["conversations"] == []
    guard = gw.store.run(
        lambda c: (
            c.execute(
                audit_log.select()
                .where(audit_log.c.tenant_id == account.p.tenant_id, audit_log.c.action == "gateway-guard")
                .order_by(audit_log.c.seq.desc())
            )
            .mappings()
            .first()
        ),
        write=False,
        **account.p.db_vars,
    )
    assert json.loads(guard["detail"])["guard"] == "deletion_epoch"
