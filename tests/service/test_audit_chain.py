"""The audit ledger: one row per mutation with the versions before and after; a verifiable chain."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import text

from cairn.core.principal import Principal
from cairn.errors import CairnError
from cairn.service.api import Cairn
from cairn.store.dialect import drop_guard_triggers, guard_triggers
from tests.conftest import human, session
from tests.contract import at, audit_rows, raw, refused, rows

S = "repo::acme/widget"


def version_of(store, key: str, scope: str = S) -> int | None:
    found = rows(store, "SELECT version FROM lessons WHERE scope = :s AND key = :k", s=scope, k=key)
    return found[0]["version"] if found else None


MUTATIONS = [
    # (name, call, expected action, lesson key the row names)
    ("create", lambda svc, me: svc.write(me, S, "k", "first"), "create", "k"),
    ("recur", lambda svc, me: svc.write(me, S, "k", "FIRST!"), "recur", "k"),
    ("update", lambda svc, me: svc.write(me, S, "k", "second"), "update", "k"),
    ("feedback", lambda svc, me: svc.feedback(me, S, "k", "helped"), "feedback", "k"),
    ("archive", lambda svc, me: svc.archive(me, S, "k"), "archive", "k"),
    ("restore", lambda svc, me: svc.restore(me, S, "k"), "restore", "k"),
    ("verify", lambda svc, me: svc.verify(human(me), S, "k"), "verify", "k"),
    ("forget", lambda svc, me: svc.forget(me, S, "k", "wrong"), "forget", "k"),
]


@pytest.mark.parametrize(("name", "call", "action", "key"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_each_mutation_adds_exactly_one_audit_row_with_its_versions(svc: Cairn, me, store, name, call, action, key):
    # Run every earlier step of the sequence, then the one under test.
    index = [m[0] for m in MUTATIONS].index(name)
    for _, earlier, _, _ in MUTATIONS[:index]:
        earlier(svc, me)
    before_rows = audit_rows(store)
    before_version = version_of(store, key)
    call(svc, me)
    after_rows = audit_rows(store)
    assert len(after_rows) == len(before_rows) + 1
    row = after_rows[-1]
    assert (row["action"], row["scope"], row["key"], row["actor"]) == (action, S, key, "agent-a")
    assert row["version_before"] == before_version
    assert row["version_after"] == version_of(store, key)
    assert row["version_after"] == (before_version or 0) + 1
    assert row["seq"] == len(after_rows)
    # The version row the audit names exists and was written by the same mutation.
    lesson_id = row["lesson_id"]
    versions = rows(store, "SELECT version, action FROM lesson_versions WHERE lesson_id = :i", i=lesson_id)
    assert (row["version_after"], action) in {(v["version"], v["action"]) for v in versions}


def test_content_hashes_before_and_after_answer_what_an_update_replaced(svc: Cairn, me, store) -> None:
    v1 = svc.write(me, S, "k", "first")["lesson"]["content_hash"]
    v2 = svc.write(me, S, "k", "second")["lesson"]["content_hash"]
    row = audit_rows(store)[-1]
    assert (row["hash_before"], row["hash_after"]) == (v1, v2)
    entries = svc.audit(me, scope=S, key="k")["entries"]
    assert [(e["action"], e["version_before"], e["version_after"]) for e in entries] == [
        ("create", None, 1),
        ("update", 1, 2),
    ]
    replaced = svc.history(me, S, "k")["versions"][entries[-1]["version_before"] - 1]
    assert replaced["value"] == "first"


def test_link_unforget_and_supersede_are_audited(svc: Cairn, me, store) -> None:
    svc.write(me, S, "a", "alpha")
    svc.write(me, S, "b", "beta")
    n = len(audit_rows(store))
    svc.link(me, S, "a", S, "b", "related")
    assert [r["action"] for r in audit_rows(store)[n:]] == ["link"]
    tid = svc.forget(me, S, "b", "wrong")["tombstone_id"]
    n = len(audit_rows(store))
    svc.unforget(me, tid, "was right")
    assert [r["action"] for r in audit_rows(store)[n:]] == ["unforget"]
    n = len(audit_rows(store))
    svc.supersede(me, S, "c", "gamma", supersedes=(S, "a"))
    assert [(r["action"], r["key"]) for r in audit_rows(store)[n:]] == [("create", "c"), ("superseded", "a")]


def test_refusals_add_no_audit_rows(svc: Cairn, me, store) -> None:
    svc.write(me, S, "k", "first")
    svc.forget(me, S, "k", "wrong")
    n = len(audit_rows(store))
    refused("TOMBSTONED", svc.write, me, S, "other", "first")
    refused("NOT_FOUND", svc.archive, me, S, "missing")
    refused("INVALID_SCOPE", svc.write, me, "repo:acme/widget", "k", "v")
    assert len(audit_rows(store)) == n


def test_audit_names_the_session(svc: Cairn, me, store) -> None:
    svc.write(session(me, "sess-1"), S, "k", "first")
    assert audit_rows(store)[-1]["session"] == "sess-1"


def test_audit_since_filters_by_time(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "a", "first")
    clock("2025-02-01T00:00:00Z")
    svc.write(me, S, "b", "second")
    entries = svc.audit(me, since=at("2025-01-15T00:00:00"))["entries"]
    assert [(e["key"], e["at"]) for e in entries] == [("b", "2025-02-01T00:00:00Z")]


def test_verify_ok_on_an_untouched_chain(svc: Cairn, me, store) -> None:
    empty = {"ok": True, "checked": 0, "broken_at": None, "problem": None, "head": "0" * 64, "full": True}
    assert svc.audit_verify(me) == {**empty, "state": {"lessons": 0, "versions": 0, "tombstones": 0}}
    for i in range(5):
        svc.write(me, S, f"k{i}", f"value {i}")
    out = svc.audit_verify(me)
    assert out["ok"] is True
    assert out["checked"] == 5
    audit = audit_rows(store)
    assert out["head"] == audit[-1]["row_hash"]
    # Each row links to the previous one.
    assert audit[0]["prev_hash"] == "0" * 64
    for prev, row in zip(audit, audit[1:], strict=False):
        assert row["prev_hash"] == prev["row_hash"]


def broken(svc: Cairn, who: Principal) -> dict:
    """A verification that fails is refused with AUDIT_BROKEN by the service; its data is the result."""
    with pytest.raises(CairnError) as caught:
        svc.audit_verify(who)
    assert caught.value.code == "AUDIT_BROKEN"
    assert caught.value.data["ok"] is False
    return caught.value.data


def _tamper(store, sql: str) -> None:
    """What an attacker with database access does: drop the guard, edit, put the guard back."""
    with raw(store, write=True) as conn:
        for stmt in drop_guard_triggers(store.dialect):
            conn.exec_driver_sql(stmt)
        conn.execute(text(sql))
        for stmt in guard_triggers(store.dialect):
            conn.exec_driver_sql(stmt)


@pytest.fixture
def five(svc: Cairn, me) -> Cairn:
    for i in range(5):
        svc.write(me, S, f"k{i}", f"value {i}")
    return svc


def test_verify_detects_an_edited_actor(five: Cairn, me, store) -> None:
    _tamper(store, "UPDATE audit_log SET actor = 'mallory' WHERE seq = 3")
    assert rows(store, "SELECT actor FROM audit_log WHERE seq = 3")[0]["actor"] == "mallory"
    out = broken(five, me)
    assert out["broken_at"]["seq"] == 3
    assert out["checked"] == 2
    assert "edited" in out["problem"]
    # The guard is back: the database still refuses edits.
    with pytest.raises(Exception, match="append-only"), raw(store, write=True) as conn:
        conn.execute(text("UPDATE audit_log SET actor = 'x' WHERE seq = 1"))


@pytest.mark.parametrize(
    "column_sql",
    [
        'detail = \'{"reason": "forged"}\'',
        "version_after = 9",
        "hash_after = 'ffff'",
        "action = 'restore'",
        "at = '2001-01-01 00:00:00.000000'",
    ],
)
def test_verify_detects_any_edited_field(five: Cairn, me, store, column_sql: str) -> None:
    _tamper(store, f"UPDATE audit_log SET {column_sql} WHERE seq = 4")
    out = broken(five, me)
    assert out["broken_at"]["seq"] == 4


def test_verify_detects_a_deleted_row(five: Cairn, me, store) -> None:
    _tamper(store, "DELETE FROM audit_log WHERE seq = 2")
    out = broken(five, me)
    assert out["broken_at"]["seq"] == 3
    assert "expected row 2" in out["problem"]


def test_verify_detects_a_deleted_and_renumbered_row(five: Cairn, me, store) -> None:
    _tamper(store, "DELETE FROM audit_log WHERE seq = 2")
    _tamper(store, "UPDATE audit_log SET seq = seq - 1 WHERE seq > 2")
    out = broken(five, me)
    assert out["broken_at"]["seq"] == 2
    assert "prev_hash" in out["problem"]


def test_a_broken_chain_in_one_tenant_does_not_break_another(five: Cairn, me, store) -> None:
    other = Principal("other", "someone")
    five.ensure_tenant(other)
    five.write(other, S, "k", "theirs")
    _tamper(store, "UPDATE audit_log SET actor = 'mallory' WHERE tenant_id = 'local' AND seq = 1")
    assert broken(five, me)["broken_at"]["seq"] == 1
    assert five.audit_verify(other) == {
        "ok": True,
        "checked": 1,
        "broken_at": None,
        "problem": None,
        "head": audit_rows(store, "other")[-1]["row_hash"],
        "full": True,
        "state": {"lessons": 1, "versions": 1, "tombstones": 0},
    }


def test_purge_keeps_the_chain_verifiable(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "k", "gone soon", ttl=timedelta(seconds=1))
    svc.write(me, S, "k2", "stays")
    clock("2025-01-02T00:00:00Z")
    svc.purge(me, expired=True)
    out = svc.audit_verify(me)
    assert out["ok"] is True and out["checked"] == 3


def test_audit_detail_is_json(svc: Cairn, me, store) -> None:
    svc.write(me, S, "k", "first")
    svc.forget(me, S, "k", "the reason")
    detail = json.loads(audit_rows(store)[-1]["detail"])
    assert detail["reason"] == "the reason"
    assert isinstance(detail["tombstone_id"], int)
