"""History is append-only in the database itself, not by convention: raw SQL is refused too."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from cairn.service.api import Cairn
from tests.contract import raw, rows, snapshot

S = "repo::acme/widget"


@pytest.fixture
def filled(svc: Cairn, me) -> Cairn:
    svc.write(me, S, "k", "first")
    svc.write(me, S, "k", "second")
    return svc


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE audit_log SET actor = 'mallory'",
        "UPDATE audit_log SET detail = '{}' WHERE seq = 1",
        "UPDATE audit_log SET row_hash = prev_hash",
        "DELETE FROM audit_log",
        "DELETE FROM audit_log WHERE seq = 2",
        "UPDATE lesson_versions SET value = 'rewritten history'",
        "UPDATE lesson_versions SET actor = 'mallory' WHERE version = 1",
        "UPDATE lesson_versions SET recorded_at = '2000-01-01 00:00:00.000000'",
    ],
)
def test_the_database_refuses_rewriting_history(filled: Cairn, store, sql: str) -> None:
    """Refused to a superuser by the triggers, and on Postgres to the application role by its grants."""
    before = snapshot(store)
    with pytest.raises(DBAPIError, match="append-only"), raw(store, write=True) as conn:
        conn.execute(text(sql))
    if store.dialect == "postgresql":
        with pytest.raises(DBAPIError, match="permission denied|append-only"), store.connect(True, "local") as conn:
            conn.execute(text(sql))
    assert snapshot(store) == before


def test_appending_is_allowed(filled: Cairn, me, store) -> None:
    n_audit = len(rows(store, "SELECT id FROM audit_log"))
    n_versions = len(rows(store, "SELECT id FROM lesson_versions"))
    filled.write(me, S, "k", "third")
    assert len(rows(store, "SELECT id FROM audit_log")) == n_audit + 1
    assert len(rows(store, "SELECT id FROM lesson_versions")) == n_versions + 1


def test_the_guard_triggers_exist_after_migration(store) -> None:
    if store.dialect == "sqlite":
        names = {r["name"] for r in rows(store, "SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert {"audit_log_no_update", "audit_log_no_delete", "lesson_versions_no_update"} <= names
    else:
        names = {r["tgname"] for r in rows(store, "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")}
        assert {"audit_log_append_only", "audit_log_no_truncate", "lesson_versions_append_only"} <= names


def test_truncating_the_audit_log_is_refused(filled: Cairn, store) -> None:
    """Postgres' TRUNCATE skips row triggers; a statement trigger refuses it (SQLite has no TRUNCATE)."""
    if store.dialect == "sqlite":
        pytest.skip("SQLite has no TRUNCATE; DELETE is refused above")
    before = snapshot(store)
    with pytest.raises(DBAPIError, match="append-only"), raw(store, write=True) as conn:
        conn.execute(text("TRUNCATE audit_log"))
    with pytest.raises(DBAPIError, match="permission denied"), store.connect(True, "local") as conn:
        conn.execute(text("TRUNCATE audit_log"))
    assert snapshot(store) == before


def test_audit_seq_is_unique_per_tenant(filled: Cairn, store) -> None:
    """Two writers racing for the next link collide on the constraint instead of forking the chain."""
    last = rows(store, "SELECT * FROM audit_log ORDER BY seq DESC LIMIT 1")[0]
    dup = {k: v for k, v in last.items() if k != "id"}
    cols = ", ".join(dup)
    params = ", ".join(f":{k}" for k in dup)
    with pytest.raises(DBAPIError, match="(?i)unique"), raw(store, write=True) as conn:
        conn.execute(text(f"INSERT INTO audit_log ({cols}) VALUES ({params})"), dup)


def test_an_address_is_unique_per_tenant(filled: Cairn, store) -> None:
    row = rows(store, "SELECT * FROM lessons LIMIT 1")[0]
    dup = {k: v for k, v in row.items() if k != "id"}
    cols = ", ".join(f'"{k}"' for k in dup)
    params = ", ".join(f":{k}" for k in dup)
    with pytest.raises(DBAPIError, match="(?i)unique"), raw(store, write=True) as conn:
        conn.execute(text(f"INSERT INTO lessons ({cols}) VALUES ({params})"), dup)
