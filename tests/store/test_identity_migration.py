"""Migration 0005: tombstones gain the wider content identity, backfilled from the forgotten text."""

from __future__ import annotations

from alembic import command

from cairn.core.content import content_identity
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.contract import raw, refused, rows
from tests.store.test_schema import run_alembic

SCOPE = "repo::acme/widget"
TEXT = "Never run the migrations by hand on production."


def test_upgrade_backfills_identity_from_the_forgotten_version_and_keeps_hash_only_tombstones(store: Store, me) -> None:
    svc = Cairn(store)
    svc.ensure_tenant(me)
    svc.write(me, SCOPE, "k", TEXT)
    svc.write(me, SCOPE, "k", TEXT + " Use the deploy job.")  # the forgotten text is version 2
    kept = svc.forget(me, SCOPE, "k", "wrong")["tombstone_id"]
    svc.write(me, SCOPE, "gone", "A secret that was purged after it was forgotten.")
    gone = svc.forget(me, SCOPE, "gone", "leaked")["tombstone_id"]
    gone_hash = rows(store, "SELECT content_hash FROM tombstones WHERE id = :i", i=gone)[0]["content_hash"]
    with raw(store, write=True) as conn:  # what a purge leaves: the tombstone, no version rows
        conn.exec_driver_sql(
            f"DELETE FROM lesson_versions WHERE lesson_id = (SELECT lesson_id FROM tombstones WHERE id = {gone})"
        )

    run_alembic(store, command.downgrade, "0004")
    # Back up as `cairn db upgrade` goes: the migrations, then (Postgres) the application role's
    # grants and row security on the tables they recreated, which every write reads.
    store.upgrade()

    got = {r["id"]: r for r in rows(store, "SELECT id, identity, content_hash FROM tombstones")}
    assert got[kept]["identity"] == content_identity(TEXT + " Use the deploy job.")
    assert got[gone]["identity"] is None  # nothing to compute it from
    assert got[gone]["content_hash"] == gone_hash
    fresh = Cairn(store)
    # The backfilled one refuses look-alikes; the hash-only one still refuses what it always did.
    look_alike = "Nеver run the migrations by hand on production. Use the deploy job."  # Cyrillic е
    refused("TOMBSTONED", fresh.write, me, "global", "a", look_alike)
    refused("TOMBSTONED", fresh.write, me, "global", "b", "a SECRET that was purged after it was forgotten")
