"""The audit proves the state: an untouched store verifies after any history; the ledger's expectations
replay purge, import, supersession and id reuse; rows written before state hashes are checked on what
they recorded. (Each kind of direct edit is caught through the CLI on both databases:
tests/cli/test_audit_state.py.)"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import text

from cairn.core.principal import Principal
from cairn.errors import CairnError
from cairn.service import audit
from cairn.service.api import Cairn
from cairn.store.dialect import drop_guard_triggers, guard_triggers
from tests.conftest import human, session
from tests.contract import audit_rows, raw, rows
from tests.service.test_transfer import build_rich_store

S = "repo::acme/widget"


def clean(svc: Cairn, who: Principal) -> dict:
    out = svc.audit_verify(who)
    assert out["ok"] is True and out["full"] is True, out
    return out


def broken(svc: Cairn, who: Principal) -> dict:
    with pytest.raises(CairnError) as caught:
        svc.audit_verify(who)
    assert caught.value.code == "AUDIT_BROKEN"
    return caught.value.data


def tamper(store, sql: str, **params) -> None:
    with raw(store, write=True) as conn:
        for stmt in drop_guard_triggers(store.dialect):
            conn.exec_driver_sql(stmt)
        conn.execute(text(sql), params)
        for stmt in guard_triggers(store.dialect):
            conn.exec_driver_sql(stmt)


def test_a_long_realistic_history_verifies_clean(svc: Cairn, me, clock) -> None:
    """Writes, edits, recurrence and promotion, feedback, archive/restore, forget/unforget, review,
    supersede, links, both purge sweeps, a lossless import and a plain import: every row agrees."""
    build_rich_store(svc, me, clock)
    svc.write(me, S, "archived-then-back", "Comes back.")
    svc.archive(me, S, "archived-then-back")
    svc.restore(me, S, "archived-then-back")
    svc.write(session(me, "rev"), S, "candidate", "Check the lock file first.")
    svc.verify(human(me), S, "candidate")
    svc.write(me, S, "to-reject", "Delete the cache blindly.")
    svc.reject(human(me), S, "to-reject", "destroys state")
    svc.feedback(me, S, "candidate", "not-helped")
    clean(svc, me)

    svc.purge(me, expired=True)  # the ttl lesson
    svc.purge(me, archived=True, older_than=timedelta(seconds=1))  # archived and rejected ones
    out = clean(svc, me)
    assert out["state"]["lessons"] > 5 and out["state"]["tombstones"] == 3

    # An admin's exact restore into another tenant of the same store, then a plain import over it;
    # an ordinary import (candidates, claims kept as claims) into a third.
    other = Principal("importer", "agent-b")
    svc.ensure_tenant(other)
    result = svc.import_lines(other, svc.export(me), restore=True)
    assert result["refused"] == [] and result["tombstones"] == 3
    plain = [json.dumps({"scope": S, "key": "plain", "value": "A plain record."})]
    svc.import_lines(other, plain)
    svc.write(other, S, "multi", "edited after import")
    assert clean(svc, other)["state"]["versions"] > out["state"]["lessons"]
    third = Principal("claims", "agent-c")
    svc.ensure_tenant(third)
    assert svc.import_lines(third, svc.export(me))["created"] > 0
    clean(svc, third)
    clean(svc, me)


def test_a_purged_id_reused_by_a_new_lesson_verifies(svc: Cairn, me, store, clock) -> None:
    """SQLite hands a purged lesson's id to the next lesson; the ledger starts that id's life again."""
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "keep", "Stays.")
    svc.write(me, S, "short", "Expires.", ttl=timedelta(seconds=1))
    clock("2025-01-02T00:00:00Z")
    svc.purge(me, expired=True)
    svc.write(me, S, "next", "Takes the id.")
    clean(svc, me)
    assert rows(store, "SELECT count(*) AS n FROM lessons")[0]["n"] == 2


def test_a_purged_lesson_put_back_is_caught(svc: Cairn, me, store, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "keep", "Stays.")
    svc.write(me, S, "short", "Expires.", ttl=timedelta(seconds=1))
    saved = rows(store, "SELECT * FROM lessons WHERE key = 'short'")[0]
    clock("2025-01-02T00:00:00Z")
    svc.purge(me, expired=True)
    cols = [c for c in saved if c != "claimed" or saved[c] is not None]
    tamper(store, f"INSERT INTO lessons ({', '.join(cols)}) VALUES ({', '.join(':' + c for c in cols)})", **saved)
    out = broken(svc, me)
    assert out["broken_at"]["table"] == "lessons" and out["broken_at"]["key"] == "short"
    assert "erased" in out["problem"]


def test_fast_checks_the_chain_only(svc: Cairn, me, store) -> None:
    svc.write(me, S, "k", "Original.")
    tamper(store, "UPDATE lessons SET value = 'Forged.'")
    assert svc.audit_verify(me, full=False)["ok"] is True  # what --fast promises: the chain
    assert broken(svc, me)["broken_at"]["table"] == "lessons"


def test_rows_from_before_state_hashes_are_checked_on_what_they_recorded(
    svc: Cairn, me, store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows written before migration 0006 carry no state hashes: version numbers and content hashes
    are still checked; a trust edit is found only once a new mutation records the full state."""
    real = audit.record_many

    def legacy(conn, principal, entries, head=None):  # type: ignore[no-untyped-def]
        return real(conn, principal, [{**e, "state_hash": None, "versions_hash": None} for e in entries], head)

    monkeypatch.setattr(audit, "record_many", legacy)
    svc.write(me, S, "a", "First.")
    svc.write(me, S, "a", "Second.")
    svc.write(me, S, "b", "Other.")
    svc.forget(me, S, "b", "wrong")
    monkeypatch.setattr(audit, "record_many", real)
    assert all(r["state_hash"] is None for r in audit_rows(store))
    clean(svc, me)

    tamper(store, "UPDATE lessons SET trust = 'verified' WHERE key = 'a'")
    clean(svc, me)  # not recorded before 0006: the known limit of old rows
    real_hash = rows(store, "SELECT content_hash FROM lessons WHERE key = 'a'")[0]["content_hash"]
    tamper(store, "UPDATE lesson_versions SET content_hash = 'ff' WHERE key = 'a' AND version = 2")
    assert broken(svc, me)["broken_at"] == {
        "table": "lesson_versions",
        "id": rows(store, "SELECT id FROM lesson_versions WHERE key = 'a' AND version = 2")[0]["id"],
        "scope": S,
        "key": "a",
        "version": 2,
        "lesson_id": rows(store, "SELECT id FROM lessons WHERE key = 'a'")[0]["id"],
        "seq": 2,
    }
    tamper(store, "UPDATE lesson_versions SET content_hash = :h WHERE key = 'a' AND version = 2", h=real_hash)
    tamper(store, "UPDATE tombstones SET reason = 'forged'")
    assert broken(svc, me)["broken_at"]["table"] == "tombstones"
