"""Promotion: a candidate earns verified from distinct sessions, not from repetition."""

from __future__ import annotations

from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from tests.conftest import session
from tests.contract import audit_rows, rows

SCOPE = "repo::acme/widget"
TEXT = "Set PYTHONHASHSEED=0 when a test depends on set order."


def trust(svc: Cairn, me) -> str:
    return svc.read(me, SCOPE, "k")["lesson"]["trust"]


def test_three_distinct_sessions_promote_a_candidate(svc: Cairn, me, store) -> None:
    first = svc.write(session(me, "s1"), SCOPE, "k", TEXT)
    assert first["lesson"]["trust"] == "candidate"
    second = svc.write(session(me, "s2"), SCOPE, "k", TEXT)
    assert second["action"] == "recurred"
    assert second["lesson"]["trust"] == "candidate", "two sessions must not be enough"
    third = svc.write(session(me, "s3"), SCOPE, "k", TEXT)
    assert third["action"] == "promoted"
    assert third["lesson"]["trust"] == "verified"
    assert third["lesson"]["seen_count"] == 3
    assert trust(svc, me) == "verified"
    last = audit_rows(store)[-1]
    assert last["action"] == "promote"
    assert "3 sessions" in last["detail"]


def test_the_same_session_three_times_is_not_enough(svc: Cairn, me) -> None:
    s = session(me, "only")
    for _ in range(3):
        svc.write(s, SCOPE, "k", TEXT)
    lesson = svc.read(me, SCOPE, "k")["lesson"]
    assert lesson["seen_count"] == 3
    assert lesson["trust"] == "candidate"


def test_repeats_without_a_session_never_promote(svc: Cairn, me) -> None:
    for _ in range(5):
        svc.write(me, SCOPE, "k", TEXT)
    lesson = svc.read(me, SCOPE, "k")["lesson"]
    assert (lesson["seen_count"], lesson["trust"]) == (5, "candidate")


def test_sessions_repeated_count_once_each(svc: Cairn, me) -> None:
    for name in ("s1", "s2", "s1", "s2", "s1"):
        svc.write(session(me, name), SCOPE, "k", TEXT)
    assert trust(svc, me) == "candidate"
    svc.write(session(me, "s3"), SCOPE, "k", TEXT)
    assert trust(svc, me) == "verified"


def test_recurrence_under_another_key_counts_toward_promotion(svc: Cairn, me) -> None:
    svc.write(session(me, "s1"), SCOPE, "k", TEXT)
    svc.write(session(me, "s2"), SCOPE, "other-key", TEXT.upper())
    out = svc.write(session(me, "s3"), SCOPE, "third-key", TEXT + "!")
    assert out["action"] == "promoted"
    assert out["lesson"]["key"] == "k"
    assert trust(svc, me) == "verified"


def test_sightings_of_sessions_are_stored_once(svc: Cairn, me, store) -> None:
    for name in ("s1", "s1", "s2"):
        svc.write(session(me, name), SCOPE, "k", TEXT)
    assert sorted(r["session"] for r in rows(store, "SELECT session FROM sightings")) == ["s1", "s2"]


def test_threshold_two_promotes_on_the_second_session(store, me) -> None:
    svc = Cairn(store, Settings(promotion_threshold=2))
    svc.write(session(me, "s1"), SCOPE, "k", TEXT)
    out = svc.write(session(me, "s2"), SCOPE, "k", TEXT)
    assert out["action"] == "promoted"
    assert out["lesson"]["trust"] == "verified"


def test_threshold_five_needs_five_sessions(store, me) -> None:
    svc = Cairn(store, Settings(promotion_threshold=5))
    for i in range(1, 5):
        svc.write(session(me, f"s{i}"), SCOPE, "k", TEXT)
    assert trust(svc, me) == "candidate"
    svc.write(session(me, "s5"), SCOPE, "k", TEXT)
    assert trust(svc, me) == "verified"


def test_threshold_one_verifies_on_create_with_one_version_and_one_audit_row(store, me) -> None:
    svc = Cairn(store, Settings(promotion_threshold=1))
    out = svc.write(session(me, "s1"), SCOPE, "k", TEXT)
    assert out["lesson"]["trust"] == "verified"
    # One write, one mutation: one version row and one audit row.
    assert len(rows(store, "SELECT * FROM lesson_versions")) == 1
    assert len(audit_rows(store)) == 1
    # Without a session nothing was seen, so nothing is promoted.
    assert svc.write(me, SCOPE, "other", "another lesson text")["lesson"]["trust"] == "candidate"


def test_an_edit_starts_the_count_again_for_the_new_content(svc: Cairn, me) -> None:
    """Promotion is earned by content: new content is a candidate whatever the old one had."""
    for name in ("s1", "s2", "s3"):
        svc.write(session(me, name), SCOPE, "k", TEXT)
    assert trust(svc, me) == "verified"
    out = svc.write(session(me, "s4"), SCOPE, "k", "Entirely new advice.")
    assert out["lesson"]["trust"] == "candidate"
