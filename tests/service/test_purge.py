"""Purge: two separate sweeps of hard erasure; the audit keeps hashes and still verifies."""

from __future__ import annotations

import json
from datetime import timedelta

from cairn.core.principal import Principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from tests.contract import audit_rows, raw, refused, rows, snapshot

S = "repo::acme/widget"
SECRET = "The staging password is hunter2, rotate it monthly."


def content_anywhere(store, needle: str) -> list[str]:
    """Tables whose rows still contain ``needle`` anywhere, read straight from the database."""
    hits = []
    for table in ("lessons", "lesson_versions", "lesson_tags", "sightings", "links", "tombstones", "audit_log"):
        for r in rows(store, f"SELECT * FROM {table}"):
            if any(isinstance(v, str) and needle in v for v in r.values()):
                hits.append(table)
    return hits


def test_expired_sweep_erases_expired_lessons_only(svc: Cairn, me, store, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "secret", SECRET, ttl=timedelta(hours=1), tags=["ops"])
    svc.write(me, S, "secret", SECRET + " Also for prod.", ttl=timedelta(hours=1))
    svc.write(me, S, "keep", "Not expiring.")
    svc.write(me, S, "archived", "Archived long ago.")
    svc.archive(me, S, "archived")
    svc.write(me, S, "later", "Expires later.", ttl=timedelta(days=365))
    clock("2025-03-01T00:00:00Z")
    out = svc.purge(me, expired=True)
    assert out["sweep"] == "expired"
    assert out["purged"] == 1
    assert out["lessons"] == [{"scope": S, "key": "secret"}]
    # Gone from lessons AND versions (and tags), read straight from the tables.
    assert rows(store, "SELECT * FROM lessons WHERE key = 'secret'") == []
    assert content_anywhere(store, "hunter2") == []
    assert sorted(r["key"] for r in rows(store, "SELECT key FROM lessons")) == ["archived", "keep", "later"]
    # The archived lesson is not the expired sweep's business, however old.
    assert svc.list(me, S, archived=True)["lessons"][0]["key"] == "archived"


def test_archived_sweep_erases_old_archived_lessons_only(svc: Cairn, me, store, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "old", SECRET)
    svc.archive(me, S, "old")
    svc.write(me, S, "expired", "Expired, not archived.", ttl=timedelta(seconds=1))
    clock("2025-02-20T00:00:00Z")
    svc.write(me, S, "recent", "Archived recently.")
    svc.archive(me, S, "recent")
    clock("2025-03-01T00:00:00Z")
    out = svc.purge(me, archived=True, older_than=timedelta(days=30))
    assert (out["sweep"], out["purged"]) == ("archived", 1)
    assert out["lessons"] == [{"scope": S, "key": "old"}]
    assert content_anywhere(store, "hunter2") == []
    assert sorted(r["key"] for r in rows(store, "SELECT key FROM lessons")) == ["expired", "recent"]
    # Then the expired sweep takes the expired one and leaves the recent archive alone.
    assert svc.purge(me, expired=True)["lessons"] == [{"scope": S, "key": "expired"}]
    assert [r["key"] for r in rows(store, "SELECT key FROM lessons")] == ["recent"]


def test_archived_sweep_uses_the_retention_setting_by_default(store, me, clock) -> None:
    svc = Cairn(store, Settings(archive_retention_days=10))
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "a", "archived eleven days")
    svc.archive(me, S, "a")
    clock("2025-01-03T00:00:00Z")
    svc.write(me, S, "b", "archived nine days")
    svc.archive(me, S, "b")
    clock("2025-01-12T00:00:00Z")
    assert svc.purge(me, archived=True)["lessons"] == [{"scope": S, "key": "a"}]


def test_purge_is_audited_with_hashes_and_the_chain_verifies(svc: Cairn, me, store, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    first = svc.write(me, S, "secret", SECRET, ttl=timedelta(hours=1))["lesson"]
    clock("2025-01-02T00:00:00Z")
    svc.purge(me, expired=True)
    purge = [r for r in audit_rows(store) if r["action"] == "purge"]
    assert len(purge) == 1
    row = purge[0]
    assert row["hash_before"] == first["content_hash"]
    assert (row["scope"], row["key"], row["version_before"], row["version_after"]) == (S, "secret", 1, None)
    assert json.loads(row["detail"]) == {"sweep": "expired", "versions_erased": 1}
    verified = svc.audit_verify(me)
    assert verified["ok"] is True
    assert verified["checked"] == len(audit_rows(store))
    # The audit itself never held the content.
    assert "hunter2" not in json.dumps(audit_rows(store), default=str)  # raw rows: Postgres gives datetimes


def test_purge_frees_the_address(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "k", "old content", ttl=timedelta(seconds=5))
    clock("2025-01-02T00:00:00Z")
    svc.purge(me, expired=True)
    refused("NOT_FOUND", svc.history, me, S, "k")
    out = svc.write(me, S, "k", "new content")
    assert (out["action"], out["lesson"]["version"]) == ("created", 1)


def test_purge_removes_links_to_the_erased_lesson(svc: Cairn, me, store, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "a", "short-lived", ttl=timedelta(seconds=5))
    svc.write(me, S, "b", "stays")
    svc.link(me, S, "b", S, "a", "related")
    clock("2025-01-02T00:00:00Z")
    svc.purge(me, expired=True)
    assert rows(store, "SELECT * FROM links") == []
    assert svc.neighborhood(me, S, "b")["nodes"] == []


def test_a_purged_forgotten_lesson_stays_forgotten(svc: Cairn, me, store, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "k", SECRET)
    svc.archive(me, S, "k")
    tid = svc.forget(me, S, "k", "leaked a credential")["tombstone_id"]
    clock("2025-06-01T00:00:00Z")
    assert svc.purge(me, archived=True)["purged"] == 1
    assert content_anywhere(store, "hunter2") == []
    # The tombstone holds no content, survives the purge and still refuses the rewrite.
    assert [t["id"] for t in svc.tombstones(me)["tombstones"]] == [tid]
    err = refused("TOMBSTONED", svc.write, me, "global", "again", SECRET.upper())
    assert err.data["tombstone_id"] == tid
    refused("TOMBSTONED", svc.write, me, S, "k", "anything else")
    assert svc.audit_verify(me)["ok"] is True


def test_purge_of_an_expired_forgotten_lesson(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "k", SECRET, ttl=timedelta(minutes=1))
    tid = svc.forget(me, S, "k", "leaked")["tombstone_id"]
    clock("2025-01-02T00:00:00Z")
    assert svc.purge(me, expired=True)["purged"] == 1
    assert refused("TOMBSTONED", svc.write, me, "global", "x", SECRET).data["tombstone_id"] == tid


def test_purge_refusals_change_nothing(svc: Cairn, me, store, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "k", "v", ttl=timedelta(seconds=1))
    clock("2025-01-02T00:00:00Z")
    snap = snapshot(store)
    refused("INVALID_INPUT", svc.purge, me)
    refused("INVALID_INPUT", svc.purge, me, expired=True, archived=True)
    refused("INVALID_INPUT", svc.purge, me, expired=True, older_than=timedelta(days=1))
    limited = Principal("local", "limited", scope_patterns=("repo::acme/*",))
    refused("FORBIDDEN", svc.purge, limited, expired=True)
    assert snapshot(store) == snap


def test_purge_only_touches_the_callers_tenant(svc: Cairn, me, store, clock) -> None:
    other = Principal("other", "someone")
    svc.ensure_tenant(other)
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "k", "mine", ttl=timedelta(seconds=1))
    svc.write(other, S, "k", "theirs", ttl=timedelta(seconds=1))
    clock("2025-01-02T00:00:00Z")
    svc.purge(me, expired=True)
    assert [r["tenant_id"] for r in rows(store, "SELECT tenant_id FROM lessons")] == ["other"]
    assert svc.audit_verify(other)["ok"] is True


def test_archived_sweep_erases_forgotten_lessons_past_retention_and_keeps_the_tombstone(svc, me, store, monkeypatch):
    """A forgotten lesson (a leaked secret, say) must be erasable; the refusal must outlive it."""
    from sqlalchemy import text

    monkeypatch.setenv("CAIRN_FAKE_NOW", "2026-01-01T00:00:00Z")
    svc.write(me, "global", "leak", "the staging password is hunter2")
    svc.forget(me, "global", "leak", "contains a secret")
    monkeypatch.setenv("CAIRN_FAKE_NOW", "2026-01-10T00:00:00Z")
    assert svc.purge(me, archived=True)["purged"] == 0  # inside the 30-day retention
    monkeypatch.setenv("CAIRN_FAKE_NOW", "2026-02-15T00:00:00Z")
    assert svc.purge(me, archived=True)["purged"] == 1
    with raw(store) as conn:
        assert conn.execute(text("SELECT count(*) FROM lesson_versions WHERE value LIKE '%hunter2%'")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM lessons WHERE value LIKE '%hunter2%'")).scalar() == 0
    import pytest

    from cairn.errors import CairnError

    with pytest.raises(CairnError) as err:
        svc.write(me, "project::x", "again", "The staging password is hunter2!")
    assert err.value.code == "TOMBSTONED"
    assert svc.audit_verify(me)["ok"]


def test_erase_forgotten_erases_one_forgotten_lesson_now(svc: Cairn, me, store, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "k", SECRET)
    svc.write(me, S, "k", SECRET + " Also the backup one.")
    svc.write(me, S, "other", "an unrelated lesson")
    refused("CONFLICT", svc.erase_forgotten, me, S, "k")  # not forgotten: nothing is erased
    assert set(content_anywhere(store, "hunter2")) == {"lessons", "lesson_versions"}
    svc.forget(me, S, "k", "leaked")
    out = svc.erase_forgotten(me, S, "k")
    assert (out["erased"], out["versions_erased"]) == (True, 3)
    assert content_anywhere(store, "hunter2") == []
    purge = [r for r in audit_rows(store) if r["action"] == "purge"]
    assert [json.loads(r["detail"]) for r in purge] == [{"sweep": "forgotten", "versions_erased": 3}]
    assert svc.audit_verify(me)["ok"] is True
    assert svc.erase_forgotten(me, S, "k")["erased"] is False  # idempotent
    refused("TOMBSTONED", svc.write, me, S, "elsewhere", SECRET + " Also the backup one.")
    assert svc.read(me, S, "other")["lesson"]["value"] == "an unrelated lesson"


def test_a_purge_leaves_no_copy_in_the_sqlite_write_ahead_log(svc: Cairn, me, store, clock) -> None:
    """The store stays open (a daemon, a server): the pages that held the text before the purge must
    not survive in ``cairn.db-wal`` either, which a reader of the file would find (secure_delete
    zeroes the main file's freed pages, not the log's older frames)."""
    if store.engine.dialect.name != "sqlite":
        return  # Postgres: its WAL and VACUUM are docs/KNOWN_ISSUES.md's row
    from pathlib import Path

    clock("2025-01-01T00:00:00Z")
    svc.write(me, S, "k", SECRET)
    svc.write(me, S, "other", "an unrelated lesson")
    svc.forget(me, S, "k", "leaked")
    db = Path(store.engine.url.database)

    def on_disk() -> bytes:
        return b"".join(p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")) if p.is_file())

    assert b"hunter2" in on_disk()  # the test can see the text while it is stored
    svc.erase_forgotten(me, S, "k")
    assert b"hunter2" not in on_disk()
    assert svc.read(me, S, "other")["lesson"]["value"] == "an unrelated lesson"
