"""Archive and restore, TTL expiry, outcome feedback."""

from __future__ import annotations

from datetime import timedelta

from cairn.service.api import Cairn
from tests.contract import audit_rows, refused, rows, snapshot

SCOPE = "repo::acme/widget"


def test_archive_hides_and_restore_brings_back(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", "keep me around")
    svc.write(me, SCOPE, "other", "unrelated")
    out = svc.archive(me, SCOPE, "k")
    assert out["changed"] is True
    assert out["lesson"]["status"] == "archived"
    err = refused("NOT_FOUND", svc.read, me, SCOPE, "k")
    assert err.data["status"] == "archived"
    assert [lesson["key"] for lesson in svc.list(me, SCOPE)["lessons"]] == ["other"]
    archived = svc.list(me, SCOPE, archived=True)["lessons"]
    assert [(a["key"], a["status"]) for a in archived] == [("k", "archived")]
    restored = svc.restore(me, SCOPE, "k")
    assert restored["changed"] is True
    assert svc.read(me, SCOPE, "k")["lesson"]["value"] == "keep me around"
    assert svc.list(me, SCOPE, archived=True)["lessons"] == []
    assert sorted(lesson["key"] for lesson in svc.list(me, SCOPE)["lessons"]) == ["k", "other"]
    assert [v["archived"] for v in svc.history(me, SCOPE, "k")["versions"]] == [False, True, False]
    assert [r["action"] for r in audit_rows(store)][-2:] == ["archive", "restore"]


def test_archive_and_restore_are_idempotent(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", "v")
    svc.archive(me, SCOPE, "k")
    snap = snapshot(store)
    assert svc.archive(me, SCOPE, "k")["changed"] is False
    assert snapshot(store) == snap
    svc.restore(me, SCOPE, "k")
    snap = snapshot(store)
    assert svc.restore(me, SCOPE, "k")["changed"] is False
    assert snapshot(store) == snap


def test_archive_does_not_free_the_address(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", "original")
    svc.archive(me, SCOPE, "k")
    svc.write(me, SCOPE, "k", "a new value at the archived address")
    svc.write(me, SCOPE, "k", "original")
    assert len(rows(store, "SELECT id FROM lessons WHERE scope = :s AND key = 'k'", s=SCOPE)) == 1
    # Content recurring under another key in the scope finds the archived lesson, not a copy.
    out = svc.write(me, SCOPE, "other-key", "ORIGINAL")
    assert out["action"] == "recurred"
    assert len(rows(store, "SELECT id FROM lessons")) == 1


def test_a_superseded_lesson_comes_back_once_its_successor_is_forgotten(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "tabs", "Indent Makefile recipes with tabs")
    svc.supersede(me, SCOPE, "spaces", "Indent Python files with four spaces", supersedes=(SCOPE, "tabs"))
    # While the successor stands, restore is refused naming it, and nothing changes.
    snap = snapshot(store)
    err = refused("CONFLICT", svc.restore, me, SCOPE, "tabs")
    assert err.data["superseded_by"] == {"scope": SCOPE, "key": "spaces"} and "archive or forget" in err.message
    assert snapshot(store) == snap
    # The replacement was wrong: forgetting it used to leave "tabs" out of every read for good.
    svc.forget(me, SCOPE, "spaces", "replaced the wrong lesson")
    refused("NOT_FOUND", svc.read, me, SCOPE, "tabs")
    restored = svc.restore(me, SCOPE, "tabs")
    assert restored["changed"] is True and restored["lesson"]["status"] == "active"
    assert svc.read(me, SCOPE, "tabs")["lesson"]["value"] == "Indent Makefile recipes with tabs"
    assert [r["action"] for r in audit_rows(store)][-1] == "restore"
    assert svc.restore(me, SCOPE, "tabs")["changed"] is False
    svc.audit_verify(me)


def test_archive_refuses_missing_and_rejected(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", "v")
    svc.forget(me, SCOPE, "k", "wrong")
    snap = snapshot(store)
    refused("NOT_FOUND", svc.archive, me, SCOPE, "k")
    refused("NOT_FOUND", svc.restore, me, SCOPE, "k")
    refused("NOT_FOUND", svc.archive, me, SCOPE, "missing")
    assert snapshot(store) == snap


def test_ttl_expiry_hides_the_lesson_without_sleeping(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    out = svc.write(me, SCOPE, "k", "short-lived", ttl=timedelta(minutes=30))
    assert out["lesson"]["expires_at"] == "2025-01-01T00:30:00Z"
    clock("2025-01-01T00:29:59Z")
    assert svc.read(me, SCOPE, "k")["lesson"]["status"] == "active"
    clock("2025-01-01T00:30:00Z")
    err = refused("NOT_FOUND", svc.read, me, SCOPE, "k")
    assert err.data["status"] == "expired"
    assert svc.list(me, SCOPE)["lessons"] == []


def test_recurrence_with_a_ttl_extends_it(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, SCOPE, "k", "short-lived", ttl=timedelta(days=1))
    clock("2025-01-01T12:00:00Z")
    out = svc.write(me, SCOPE, "k", "short-lived", ttl=timedelta(days=1))
    assert out["lesson"]["expires_at"] == "2025-01-02T12:00:00Z"


def test_feedback_counts_outcomes(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", "v")
    svc.feedback(me, SCOPE, "k", "helped")
    svc.feedback(me, SCOPE, "k", "helped")
    out = svc.feedback(me, SCOPE, "k", "not-helped")
    assert out["outcome"] == "not-helped"
    lesson = svc.read(me, SCOPE, "k")["lesson"]
    assert (lesson["helped_count"], lesson["not_helped_count"]) == (2, 1)
    assert lesson["version"] == 4
    last = audit_rows(store)[-1]
    assert (last["action"], last["version_before"], last["version_after"]) == ("feedback", 3, 4)


def test_feedback_refuses_bad_outcomes_and_missing_lessons(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", "v")
    snap = snapshot(store)
    refused("INVALID_INPUT", svc.feedback, me, SCOPE, "k", "meh")
    refused("NOT_FOUND", svc.feedback, me, SCOPE, "missing", "helped")
    assert snapshot(store) == snap
