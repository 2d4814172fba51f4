"""What a transaction guarantees on each database, and the one place each guarantee comes from.

SQLite serializes every writer on the file (``BEGIN IMMEDIATE``). Postgres serializes the writers of
one *tenant* on an advisory lock taken first thing in the transaction, so writers of different
tenants run side by side; reads see one snapshot and cannot write.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from cairn.store.dialect import is_lock_error
from cairn.store.engine import Store


def test_a_write_transaction_names_its_tenant(store: Store) -> None:
    with pytest.raises(ValueError, match="names its tenant"):
        store.run(lambda conn: None, write=True)
    assert store.run(lambda conn: 1, write=True, tenant="local") == 1


def test_a_read_sees_one_snapshot(store: Store, me) -> None:  # noqa: ARG001 - me creates the tenant
    """A read transaction does not see a write committed while it runs (both databases)."""
    with store.connect(write=False, tenant="other") as reader:
        before = reader.execute(text("SELECT count(*) FROM tenants")).scalar_one()
        with store.connect(write=True, tenant="other") as writer:
            writer.execute(text("INSERT INTO tenants(id, name, created_at) VALUES ('other', 'o', '2025-01-01')"))
        assert reader.execute(text("SELECT count(*) FROM tenants")).scalar_one() == before
    with store.connect(write=False, tenant="other") as later:
        assert later.execute(text("SELECT count(*) FROM tenants")).scalar_one() == before + 1


def test_a_read_transaction_cannot_write_on_postgres(store: Store) -> None:
    if store.dialect != "postgresql":
        pytest.skip("SQLite read transactions may upgrade to writes; the service never asks them to")
    with pytest.raises(DBAPIError, match="read-only"), store.connect(write=False) as conn:
        conn.execute(text("INSERT INTO tenants(id, name, created_at) VALUES ('x', 'x', '2025-01-01')"))


def _hold(store: Store, tenant: str, entered: threading.Event, release: threading.Event) -> None:
    with store.connect(write=True, tenant=tenant):
        entered.set()
        release.wait(10)


def _time_to_write(store: Store, tenant: str) -> float:
    started = time.monotonic()
    with store.connect(write=True, tenant=tenant) as conn:
        conn.execute(text("SELECT 1"))
    return time.monotonic() - started


def test_postgres_writers_queue_per_tenant_not_per_database(store: Store) -> None:
    if store.dialect != "postgresql":
        pytest.skip("SQLite has one writer per file (BEGIN IMMEDIATE); test_concurrency covers it")
    entered, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold, args=(store, "tenant-a", entered, release))
    holder.start()
    try:
        assert entered.wait(10)
        assert _time_to_write(store, "tenant-b") < 1.0  # another tenant does not wait
        waited: list[float] = []
        same = threading.Thread(target=lambda: waited.append(_time_to_write(store, "tenant-a")))
        same.start()
        time.sleep(0.5)
        assert same.is_alive(), "a second writer of the same tenant must queue behind the first"
        release.set()
        same.join(10)
        assert waited and waited[0] >= 0.5
    finally:
        release.set()
        holder.join(10)


def _pg_error(sqlstate: str, constraint: str | None = None) -> Exception:
    exc = Exception("boom")
    exc.orig = SimpleNamespace(sqlstate=sqlstate, diag=SimpleNamespace(constraint_name=constraint))  # type: ignore[attr-defined]
    return exc


@pytest.mark.parametrize(
    ("exc", "retry"),
    [
        (_pg_error("40001"), True),  # serialization_failure
        (_pg_error("40P01"), True),  # deadlock_detected
        (_pg_error("55P03"), True),  # lock_not_available (lock_timeout)
        (_pg_error("23505", "uq_audit_tenant_seq"), True),  # two writers raced for one audit link
        (_pg_error("23505", "uq_lessons_address"), False),  # a real conflict: not retried blindly
        (_pg_error("22001"), False),  # string too long: a bug, not contention
        (Exception("database is locked"), True),
        (Exception("no such table: lessons"), False),
    ],
)
def test_which_errors_retry_the_whole_transaction(exc: Exception, retry: bool) -> None:
    assert is_lock_error(exc) is retry


def test_every_transaction_begins_as_what_it_is_whatever_the_connection_did_before(store: Store) -> None:
    """Connection ``info`` outlives a pool checkout: a connection that ran the migrations (schema
    lock) must begin the next write with its tenant's lock and the next read as a read."""
    if store.dialect != "postgresql":
        pytest.skip("the advisory locks are Postgres'")
    from cairn.store.dialect import ADVISORY_NAMESPACE

    held = text(
        "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND classid = :ns"
    )
    store.engine.dispose()  # one pooled connection from here on, reused by every block below
    store.upgrade()
    with store.connect(write=True, tenant="tenant-a") as conn:
        keys = set(conn.execute(held, {"ns": ADVISORY_NAMESPACE}).scalars())
        tenant_key = conn.execute(text("SELECT hashtext('tenant-a')::bigint & 4294967295")).scalar_one()
    assert keys == {tenant_key}
    with store.connect(write=False) as conn:
        assert not set(conn.execute(held, {"ns": ADVISORY_NAMESPACE}).scalars())
        assert conn.execute(text("SHOW transaction_read_only")).scalar_one() == "on"
