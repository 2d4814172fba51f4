"""The consolidation planner on fixed stores: exact actions, with deterministic vectors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from cairn.core import consolidation as core
from cairn.core.consolidation import Params, Record, neighbour_pairs, plan, recompute, schedule_interval
from cairn.errors import CairnError

NOW = datetime(2026, 12, 1, tzinfo=UTC)
DIM = 16


def vec(topic: int, wobble: float = 0.0, other: int | None = None) -> np.ndarray:
    """A unit vector near axis ``topic`` (``wobble`` toward axis ``other``): cosines are exact."""
    v = np.zeros(DIM, dtype=np.float32)
    v[topic] = 1.0
    if wobble:
        v[other if other is not None else (topic + 1) % DIM] = wobble
    return v / np.linalg.norm(v)


_ids = iter(range(1, 10_000))


def rec(
    scope: str,
    key: str,
    value: str,
    v: np.ndarray | None,
    *,
    trust: str = "candidate",
    seen: int = 1,
    sessions: int = 1,
    helped: int = 0,
    not_helped: int = 0,
    age_days: float = 1,
    lesson_id: int | None = None,
) -> Record:
    at = NOW - timedelta(days=age_days)
    return Record(
        id=lesson_id or next(_ids), scope=scope, key=key, value=value, kind="lesson", trust=trust, archived=False,
        version=1, seen_count=seen, sessions=sessions, helped=helped, not_helped=not_helped, created_at=at,
        updated_at=at, vector=v,
    )  # fmt: skip


R = "repo::acme/api"


def test_a_cluster_merges_into_the_verified_member_and_says_why() -> None:
    a = rec(R, "pin-pytest", "Pin pytest to 8.x because the plugin breaks on 9", vec(0), seen=2)
    b = rec(R, "pytest-pin", "Pin pytest to 8.x as the plugin breaks on 9", vec(0, 0.1), trust="verified")
    c = rec(R, "pytest-8", "pin pytest to 8.x: the plugin breaks on 9", vec(0, 0.2), seen=5)
    unrelated = rec(R, "db", "Use WAL mode for SQLite", vec(5))
    actions = plan([a, b, c, unrelated], NOW)
    assert [x.kind for x in actions] == ["merge"]
    merge = actions[0]
    assert merge.keep_id == b.id  # verified beats seen 5 times
    assert merge.lesson_ids == (b.id, c.id, a.id)  # the others by rank: seen 5 before seen 2
    assert "keeping pytest-pin (verified)" in merge.reason and "pytest-8" in merge.reason


def test_recurrence_then_helped_ratio_then_recency_decide_the_keeper() -> None:
    a = rec(R, "a", "retry the flaky upload test twice", vec(1), seen=3)
    b = rec(R, "b", "retry the flaky upload test twice please", vec(1, 0.05), seen=4)
    assert plan([a, b], NOW)[0].keep_id == b.id
    c = rec(R, "c", "retry the flaky upload test twice", vec(1), helped=3)
    d = rec(R, "d", "retry the flaky upload test twice now", vec(1, 0.05), helped=1, not_helped=2)
    assert plan([c, d], NOW)[0].keep_id == c.id
    e = rec(R, "e", "retry the flaky upload test twice", vec(1), age_days=10)
    f = rec(R, "f", "retry the flaky upload test twice again", vec(1, 0.05), age_days=2)
    first = plan([e, f], NOW)[0]
    assert first.keep_id == f.id and "most recent" in first.reason


def test_a_negation_pair_is_never_merged_but_flagged_as_a_contradiction() -> None:
    yes = rec(R, "use-x", "use the system python for builds", vec(2), trust="verified")
    no = rec(R, "never-x", "never use the system python for builds", vec(2, 0.3))
    actions = plan([yes, no], NOW)
    assert [x.kind for x in actions] == ["flag-contradiction"]
    assert set(actions[0].lesson_ids) == {yes.id, no.id}
    assert "disagree (negation)" in actions[0].reason


def test_an_already_linked_contradiction_is_not_flagged_again_nor_archived_as_stale() -> None:
    yes = rec(R, "use-x", "use the system python for builds", vec(2), age_days=200)
    no = rec(R, "never-x", "never use the system python for builds", vec(2, 0.3), age_days=200)
    assert plan([yes, no], NOW, flagged=[(no.id, yes.id)]) == []


def test_lessons_in_different_scopes_are_not_merged() -> None:
    a = rec("repo::acme/api", "x", "cache the wheel downloads in CI", vec(3))
    b = rec("repo::acme/web", "x", "cache the wheel downloads in CI", vec(3))
    kinds = [x.kind for x in plan([a, b], NOW)]
    assert "merge" not in kinds


def test_far_vectors_with_the_same_words_are_not_duplicates() -> None:
    a = rec(R, "a", "restart the worker after deploy", vec(4))
    b = rec(R, "b", "restart the worker after deploy finishes", vec(6))
    assert plan([a, b], NOW) == []


def test_the_same_lesson_in_two_branches_is_promoted_to_the_repository() -> None:
    a = rec("branch::acme/api::feat-a", "tz", "store timestamps in UTC", vec(7), seen=2)
    b = rec("branch::acme/api::feat-b", "tz-utc", "store timestamps in UTC", vec(7))
    other_repo = rec("branch::acme/web::main", "tz", "store timestamps in UTC", vec(7))
    actions = plan([a, b, other_repo], NOW)
    assert [(x.kind, x.target_scope, x.lesson_ids) for x in actions] == [("promote", R, (a.id, b.id))]
    assert "2 branches" in actions[0].reason and "key tz" in actions[0].reason


def test_promotion_is_not_proposed_when_the_rung_above_holds_it() -> None:
    a = rec("branch::acme/api::feat-a", "tz", "store timestamps in UTC", vec(7))
    b = rec("branch::acme/api::feat-b", "tz", "store timestamps in UTC", vec(7))
    held = rec(R, "tz", "store timestamps in UTC", vec(7))
    assert [x.kind for x in plan([a, b, held], NOW)] == []


def test_promotion_is_not_proposed_at_an_address_a_lesson_holds() -> None:
    a = rec("branch::acme/api::feat-a", "tz", "store timestamps in UTC", vec(7))
    b = rec("branch::acme/api::feat-b", "tz", "store timestamps in UTC", vec(7))
    # An archived (or superseded) lesson at repo::acme/api tz: the write would be refused there.
    assert plan([a, b], NOW, taken=[(R, "tz")]) == []
    # An active, different lesson under that key: the same.
    other = rec(R, "tz", "deploy on Tuesdays only", vec(12))
    assert [x.kind for x in plan([a, b, other], NOW)] == []
    # Another address in that scope, or the same key elsewhere, does not stop it.
    assert [x.kind for x in plan([a, b], NOW, taken=[(R, "tz-old"), ("repo::acme/web", "tz")])] == ["promote"]


def test_repositories_of_one_project_promote_to_the_project() -> None:
    a = rec("repo::acme/shop", "money", "keep money in integer cents", vec(8))
    b = rec("repo::fork/shop", "money", "keep money in integer cents", vec(8, 0.05))
    actions = plan([a, b], NOW)
    assert [(x.kind, x.target_scope) for x in actions] == [("promote", "project::shop")]


def test_stale_candidates_are_archived_and_nothing_else_is() -> None:
    stale = rec(R, "old", "one-off note", vec(9), age_days=120)
    fresh = rec(R, "new", "recent note", vec(10), age_days=10)
    verified = rec(R, "kept", "old verified", vec(11), trust="verified", age_days=400)
    seen_twice = rec(R, "twice", "seen twice", vec(12), seen=2, age_days=400)
    helped = rec(R, "helped", "helped once", vec(13), helped=1, age_days=400)
    two_sessions = rec(R, "sessions", "two sessions", vec(14), sessions=2, age_days=400)
    records = [stale, fresh, verified, seen_twice, helped, two_sessions]
    actions = plan(records, NOW)
    assert [(x.kind, x.lesson_ids) for x in actions] == [("archive-stale", (stale.id,))]
    assert "120 days" in actions[0].reason
    # One action per scope, oldest first.
    assert [x.lesson_ids for x in plan(records, NOW, Params(stale_days=5))] == [(stale.id, fresh.id)]
    assert "2 candidate(s)" in plan(records, NOW, Params(stale_days=5))[0].reason


def test_stale_candidates_are_batched_per_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "STALE_BATCH", 2)
    olds = [rec(R, f"n{i}", f"note {i}", vec(i), age_days=100 + i) for i in range(3)]
    other = rec("repo::acme/web", "w", "web note", vec(5), age_days=100)
    actions = plan([*olds, other], NOW)
    assert [x.lesson_ids for x in actions] == [(olds[2].id, olds[1].id), (olds[0].id,), (other.id,)]


def test_scopes_filter_and_a_repository_includes_its_branches() -> None:
    a = rec("branch::acme/api::b", "s", "stale", vec(0), age_days=200)
    b = rec("repo::acme/web", "s", "stale", vec(1), age_days=200)
    actions = plan([a, b], NOW, Params(scopes=(R,)))
    assert [x.lesson_ids for x in actions] == [(a.id,)]


def test_a_lesson_takes_part_in_one_action_only() -> None:
    a = rec(R, "a", "vendor the protobuf files", vec(15), age_days=200)
    b = rec(R, "b", "vendor the protobuf files please", vec(15, 0.05), age_days=200)
    actions = plan([a, b], NOW)
    assert [x.kind for x in actions] == ["merge"]  # not also two stale archives


def test_lessons_without_vectors_merge_only_on_identical_words() -> None:
    a = rec("branch::acme/api::x", "k", "Run make lint first.", None)
    b = rec("branch::acme/api::y", "k", "run make lint first", None)
    c = rec("branch::acme/api::z", "k", "run make lint second", None)
    actions = plan([a, b, c], NOW)
    assert [(x.kind, x.lesson_ids) for x in actions] == [("promote", (a.id, b.id))]


def test_recompute_proposes_from_the_current_state() -> None:
    a = rec(R, "a", "pin node to 20 for the build", vec(3), lesson_id=501)
    b = rec(R, "b", "pin node to 20 for the build please", vec(3, 0.05), seen=9, lesson_id=502)
    again = recompute("merge", [a, b], NOW)
    assert again is not None and again.keep_id == 502
    edited = rec(R, "b", "never pin node for the build", vec(3, 0.3), lesson_id=502)
    assert recompute("merge", [a, edited], NOW) is None


def test_neighbour_pairs_match_the_full_product_across_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    base = rng.normal(size=(40, DIM)).astype(np.float32)
    vectors = np.concatenate([base, base + rng.normal(scale=0.05, size=base.shape).astype(np.float32)])
    expected = neighbour_pairs(vectors, 0.9)
    monkeypatch.setattr(core, "PRODUCT_BUDGET", 7 * len(vectors))  # blocks of 7 rows
    blocked = neighbour_pairs(vectors, 0.9)
    assert [(i, j) for i, j, _ in blocked] == [(i, j) for i, j, _ in expected]
    assert len(expected) >= 40  # every row and its copy


def test_schedule_names_and_durations() -> None:
    assert schedule_interval("daily") == timedelta(days=1)
    assert schedule_interval("off") is None
    assert schedule_interval("12h") == timedelta(hours=12)
    with pytest.raises(CairnError) as bad:
        schedule_interval("sometimes")
    assert bad.value.code == "INVALID_INPUT"
    assert "'sometimes'" in bad.value.message and "off, hourly, daily, weekly or a duration" in bad.value.message
    with pytest.raises(CairnError) as often:
        schedule_interval("1m")  # more often than a whole-store read should run
    assert "at least 5m" in often.value.message


def test_a_scheduled_plan_is_due_one_interval_after_the_newest_run() -> None:
    assert core.due(None, NOW, "daily")
    assert not core.due(NOW - timedelta(hours=23), NOW, "daily")
    assert core.due(NOW - timedelta(hours=24), NOW, "daily")
    assert core.due(NOW - timedelta(hours=2), NOW, "1h")
    assert not core.due(None, NOW, "off")
