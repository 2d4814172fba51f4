"""Migration 0013: every existing version gets a deterministic uid and its parent, every lesson its tip."""

from __future__ import annotations

import json

from alembic import command

from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.contract import raw, rows
from tests.store.test_schema import run_alembic

SCOPE = "repo::acme/widget"


def _identities(store: Store) -> list[dict]:
    return rows(store, "SELECT lesson_id, version, uid, parents FROM lesson_versions ORDER BY lesson_id, version")


def test_upgrade_backfills_version_identities_deterministically(store: Store, me) -> None:
    svc = Cairn(store)
    svc.ensure_tenant(me)
    svc.write(me, SCOPE, "a", "First wording.")
    svc.write(me, SCOPE, "a", "Second wording.")
    svc.write(me, "global", "b", "Another lesson.")

    run_alembic(store, command.downgrade, "0012")
    run_alembic(store, command.upgrade, "head")
    first = _identities(store)
    run_alembic(store, command.downgrade, "0012")
    run_alembic(store, command.upgrade, "head")
    assert _identities(store) == first  # the same ids every time: derived from what the versions hold

    assert all(len(r["uid"]) == 32 for r in first)
    assert len({r["uid"] for r in first}) == 3
    by_lesson: dict[int, list[dict]] = {}
    for r in first:
        by_lesson.setdefault(r["lesson_id"], []).append(r)
    for versions in by_lesson.values():
        assert json.loads(versions[0]["parents"]) == []
        for before, after in zip(versions, versions[1:], strict=False):
            assert json.loads(after["parents"]) == [before["uid"]]
    tips = {r["id"]: json.loads(r["tips"]) for r in rows(store, "SELECT id, tips FROM lessons")}
    assert tips == {lid: [versions[-1]["uid"]] for lid, versions in by_lesson.items()}

    # The store works on: the next write names the tip as its parent, and the ledger verifies.
    fresh = Cairn(store)
    fresh.write(me, SCOPE, "a", "Third wording.")
    lesson_a = rows(store, "SELECT id FROM lessons WHERE key = 'a'")[0]["id"]
    third = rows(store, "SELECT parents FROM lesson_versions WHERE lesson_id = :i AND version = 3", i=lesson_a)[0]
    assert json.loads(third["parents"]) == tips[lesson_a]
    assert fresh.audit_verify(me)["ok"]
    # Versions stay append-only after the backfill lifted and restored the guard.
    with raw(store, write=True) as conn:
        try:
            conn.exec_driver_sql("UPDATE lesson_versions SET value = 'edited'")
        except Exception as exc:  # noqa: BLE001 - the database's own refusal
            assert "append-only" in str(exc)
        else:
            raise AssertionError("lesson_versions accepted an UPDATE after the migration")
