"""Consolidation on a fixed store, on both databases: the exact plan, apply (history and audit hold),
undo to the exact prior state, and the two guards (a lesson edited, the store erased from)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import select

from cairn.core.lesson import STATE_FIELDS
from cairn.core.principal import READ, Principal
from cairn.errors import CairnError
from cairn.service.api import Cairn
from cairn.store.schema import audit_log, lessons, links, sightings
from tests.conftest import human, session

API, WEB = "repo::acme/api", "repo::acme/web"
FEAT_A, FEAT_B = "branch::acme/api::feat-a", "branch::acme/api::feat-b"


@pytest.fixture(autouse=True)
def _real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAIRN_EMBED_MODEL", raising=False)  # the real model: paraphrases are close


@pytest.fixture
def fixed(svc: Cairn, me: Principal, clock: Callable[[str], None]) -> Principal:
    """Written on 2025-01-01, read on 2025-06-01 (151 days later)."""
    clock("2025-01-01T00:00:00Z")
    svc.write(session(me, "s1"), API, "pin-pytest", "Pin pytest to 8.x because the plugin breaks on pytest 9")
    svc.write(session(me, "s2"), API, "pin-pytest", "Pin pytest to 8.x because the plugin breaks on pytest 9")
    svc.write(human(session(me, "s0")), API, "pytest-pin", "Pin pytest to 8.x since the plugin breaks on pytest 9")
    svc.write(me, API, "system-python", "Use the system python for release builds")
    svc.write(me, API, "no-system-python", "Never use the system python for release builds")
    svc.write(me, FEAT_A, "utc", "Store timestamps in UTC in the database")
    svc.write(me, FEAT_B, "utc-db", "Store timestamps in UTC in the database.")
    svc.write(me, WEB, "old-note", "The staging bucket was renamed to assets-old")
    clock("2025-06-01T00:00:00Z")
    return me


def _plan_shape(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (a["kind"], tuple((x["scope"], x["key"]) for x in a["lessons"]), a["target_scope"]) for a in result["actions"]
    ]


EXPECTED = [
    ("merge", ((API, "pytest-pin"), (API, "pin-pytest")), None),
    ("promote", ((FEAT_A, "utc"), (FEAT_B, "utc-db")), API),
    ("flag-contradiction", ((API, "system-python"), (API, "no-system-python")), None),
    ("archive-stale", ((WEB, "old-note"),), None),
]


def test_the_plan_names_every_action_and_a_dry_run_stores_nothing(svc: Cairn, fixed: Principal) -> None:
    preview = svc.consolidate_preview(fixed)
    assert _plan_shape(preview) == EXPECTED
    assert preview["run"] is None and svc.consolidate_runs(fixed)["runs"] == []
    merge = preview["actions"][0]
    assert merge["keep"]["key"] == "pytest-pin" and "(verified)" in merge["reason"]
    assert "disagree (negation)" in preview["actions"][2]["reason"]
    assert "151 days" in preview["actions"][3]["reason"]

    planned = svc.consolidate_plan(fixed)
    assert _plan_shape(planned) == EXPECTED
    assert planned["run"]["status"] == "planned" and planned["run"]["mode"] == "plan"
    assert all(a["status"] == "planned" for a in planned["actions"])
    assert svc.read(fixed, API, "pin-pytest")["lesson"]["status"] == "active"  # a plan changes no lesson
    assert _plan_shape(svc.consolidate_preview(fixed, scopes=[WEB])) == [EXPECTED[3]]


def test_apply_writes_through_the_audited_paths(svc: Cairn, fixed: Principal) -> None:
    result = svc.consolidate_apply(fixed)
    assert [a["status"] for a in result["actions"]] == ["applied"] * 4
    assert result["run"]["status"] == "finished"

    keeper = svc.read(fixed, API, "pytest-pin")["lesson"]
    assert keeper["seen_count"] == 3 and keeper["trust"] == "verified"  # 1 + the merged lesson's 2
    merged = svc.lesson_detail(fixed, API, "pin-pytest")["lesson"]
    assert merged["status"] == "superseded"
    assert [v["action"] for v in svc.history(fixed, API, "pin-pytest")["versions"]][-1] == "superseded"
    assert [v["action"] for v in svc.history(fixed, API, "pytest-pin")["versions"]][-1] == "merge"

    promoted = svc.read(fixed, API, "utc")["lesson"]
    assert (promoted["trust"], promoted["origin"], promoted["value"]) == (
        "candidate", "consolidation", "Store timestamps in UTC in the database",
    )  # fmt: skip
    assert svc.read(fixed, FEAT_A, "utc")["lesson"]["status"] == "active"  # sources stay

    queue = {(c["scope"], c["key"]): c for c in svc.review_queue(fixed, scope=API)["candidates"]}
    assert {(API, "system-python"), (API, "no-system-python"), (API, "utc")} <= set(queue)
    # The flagged pair is decided together: each entry names the other; nothing else is marked.
    assert queue[API, "system-python"]["contradicts"] == [{"scope": API, "key": "no-system-python"}]
    assert queue[API, "no-system-python"]["contradicts"] == [{"scope": API, "key": "system-python"}]
    assert "contradicts" not in queue[API, "utc"]
    assert svc.lesson_detail(fixed, WEB, "old-note")["lesson"]["status"] == "archived"

    def edges(conn: Any) -> set[tuple[int, int, str]]:
        return {(a, b, r) for a, b, r in conn.execute(select(links.c.src_id, links.c.dst_id, links.c.rel))}

    rels = sorted(r for _, _, r in svc.store.run(edges, write=False, **fixed.db_vars))
    assert rels == ["contradicts", "derived_from", "derived_from", "supersedes"]
    assert svc.audit_verify(fixed)["state"]["lessons"] == 8  # 7 written, 1 promoted
    # Nothing is merged, promoted or flagged twice; what is left are the promotion's old one-off sources.
    again = svc.consolidate_preview(fixed)
    assert {a["kind"] for a in again["actions"]} == {"archive-stale"}
    assert {a["lessons"][0]["key"] for a in again["actions"]} == {"utc", "utc-db"}  # not the flagged pair


def _state(svc: Cairn, p: Principal) -> dict[str, Any]:
    def read(conn: Any) -> dict[str, Any]:
        rows = {r["id"]: {k: r[k] for k in STATE_FIELDS} for r in conn.execute(select(lessons)).mappings()}
        edges = sorted(conn.execute(select(links.c.src_id, links.c.dst_id, links.c.rel)).all())
        seen = sorted(conn.execute(select(sightings.c.lesson_id, sightings.c.session)).all())
        return {"lessons": rows, "links": edges, "sightings": seen}

    return svc.store.run(read, write=False, **p.db_vars)


def test_undo_restores_the_exact_prior_state(svc: Cairn, fixed: Principal) -> None:
    before = _state(svc, fixed)
    run = svc.consolidate_apply(fixed)["run"]["id"]
    assert _state(svc, fixed) != before
    undone = svc.consolidate_undo(fixed, run)
    assert undone["reversed"] == 4 and undone["left"] == [] and undone["run"]["status"] == "undone"
    after = _state(svc, fixed)
    created = set(after["lessons"]) - set(before["lessons"])
    assert len(created) == 1  # the promoted candidate: never hard-deleted, archived by the undo
    assert after["lessons"][created.pop()]["archived_at"] is not None
    assert {i: after["lessons"][i] for i in before["lessons"]} == before["lessons"]
    assert after["links"] == before["links"] and after["sightings"] == before["sightings"]
    assert [v["action"] for v in svc.history(fixed, API, "pin-pytest")["versions"]][-2:] == ["superseded", "undo"]
    svc.audit_verify(fixed)
    with pytest.raises(CairnError) as twice:
        svc.consolidate_undo(fixed, run)
    assert twice.value.code == "CONFLICT"
    # The undone promotion's candidate stays archived at its address: a new plan does not propose it
    # again (the write would be refused there, on every scheduled run).
    kinds = [a["kind"] for a in svc.consolidate_preview(fixed)["actions"]]
    assert "promote" not in kinds and kinds[:2] == ["merge", "flag-contradiction"]


def test_a_lesson_edited_after_the_plan_is_discarded_and_recomputed(svc: Cairn, fixed: Principal) -> None:
    run = svc.consolidate_plan(fixed)["run"]["id"]
    # Still a near-duplicate after the edit: the recomputed merge applies from the new version.
    svc.write(fixed, API, "pin-pytest", "Pin pytest to 8.x because the plugin breaks with pytest 9")
    # No longer alike: the recomputed contradiction check finds nothing to flag.
    svc.write(fixed, API, "no-system-python", "Release builds run in the python:3.12 container image")
    result = svc.consolidate_apply(fixed, run)
    by_pos = {a["position"]: a for a in result["actions"]}
    assert by_pos[1]["status"] == "discarded" and "pin-pytest v2 → v3" in by_pos[1]["status_reason"]
    assert by_pos[3]["status"] == "discarded" and "call for nothing now" in by_pos[3]["status_reason"]
    recomputed = [a for a in result["actions"] if a["recomputed"]]
    assert [(a["kind"], a["status"], a["position"]) for a in recomputed] == [("merge", "applied", 5)]
    assert recomputed[0]["lessons"][1]["version_read"] == 3
    assert svc.lesson_detail(fixed, API, "pin-pytest")["lesson"]["status"] == "superseded"
    assert svc.read(fixed, API, "no-system-python")["lesson"]["status"] == "active"
    guards = _guards(svc, fixed)
    assert [(g["guard"], g["then"]) for g in guards] == [("source_revision", "recompute")] * 2
    svc.audit_verify(fixed)


def test_a_recomputed_action_whose_lessons_change_again_is_skipped(
    svc: Cairn, fixed: Principal, clock: Callable[[str], None]
) -> None:
    run = svc.consolidate_plan(fixed, scopes=[WEB])["run"]["id"]

    def old_feedback() -> None:  # a new version of old-note that leaves it stale (dated back)
        clock("2025-01-02T00:00:00Z")
        svc.feedback(fixed, WEB, "old-note", "not-helped")
        clock("2025-06-01T00:00:00Z")

    old_feedback()

    def edit_again(position: int) -> None:
        if position == 2:
            old_feedback()

    svc.services.consolidation.before_action = edit_again
    result = svc.consolidate_apply(fixed, run)
    assert [(a["status"], a["recomputed"]) for a in result["actions"]] == [("discarded", False), ("skipped", True)]
    assert "changed again" in result["actions"][1]["status_reason"]
    assert svc.read(fixed, WEB, "old-note")["lesson"]["status"] == "active"
    assert [g["then"] for g in _guards(svc, fixed)] == ["recompute", "skip"]


def test_an_erasure_after_the_plan_stops_every_derived_write(svc: Cairn, fixed: Principal) -> None:
    run = svc.consolidate_plan(fixed)["run"]["id"]
    before = _state(svc, fixed)["lessons"]
    svc.forget(fixed, WEB, "old-note", "wrong")  # bumps the tenant's deletion epoch
    forgotten = _state(svc, fixed)["lessons"]
    assert forgotten != before
    result = svc.consolidate_apply(fixed, run)
    assert [a["status"] for a in result["actions"]] == ["skipped"] * 4
    assert all("erased" in a["status_reason"] for a in result["actions"])
    assert _state(svc, fixed)["lessons"] == forgotten  # nothing written after the forget
    assert {(g["guard"], g["then"]) for g in _guards(svc, fixed)} == {("deletion_epoch", "skip")}
    svc.audit_verify(fixed)


def test_resume_with_nothing_interrupted_and_bad_input(svc: Cairn, fixed: Principal) -> None:
    assert svc.consolidate_resume(fixed)["run"] is None
    for call, code in (
        (lambda: svc.consolidate_show(fixed, 999), "NOT_FOUND"),
        (lambda: svc.consolidate_undo(fixed, 999), "NOT_FOUND"),
        (lambda: svc.consolidate_preview(fixed, scopes=["repo:acme/api"]), "INVALID_SCOPE"),
        (lambda: svc.consolidate_preview(fixed, stale_days=0), "INVALID_INPUT"),
        (lambda: svc.consolidate_apply(fixed, positions=[1]), "INVALID_INPUT"),
    ):
        with pytest.raises(CairnError) as exc:
            call()
        assert exc.value.code == code
    run = svc.consolidate_plan(fixed)["run"]["id"]
    with pytest.raises(CairnError) as exc:
        svc.consolidate_apply(fixed, run, positions=[42])
    assert exc.value.code == "NOT_FOUND"


def test_a_read_only_caller_may_preview_but_not_plan_or_apply(svc: Cairn, fixed: Principal) -> None:
    reader = replace(fixed, permissions=frozenset({READ}))
    assert _plan_shape(svc.consolidate_preview(reader)) == EXPECTED
    for call in (svc.consolidate_plan, svc.consolidate_apply, svc.consolidate_resume):
        with pytest.raises(CairnError) as exc:
            call(reader)
        assert exc.value.code == "FORBIDDEN"
    assert svc.consolidate_runs(reader)["runs"] == []


def test_drop_then_apply_leaves_dropped_actions_alone(svc: Cairn, fixed: Principal) -> None:
    run = svc.consolidate_plan(fixed)["run"]["id"]
    svc.consolidate_drop(fixed, run, positions=[1, 4])
    result = svc.consolidate_apply(fixed, run)
    assert [a["status"] for a in result["actions"]] == ["dropped", "applied", "applied", "dropped"]
    assert svc.read(fixed, API, "pin-pytest")["lesson"]["status"] == "active"
    listed = svc.consolidate_runs(fixed)["runs"][0]
    assert listed["actions"]["dropped"] == 2 and listed["status"] == "finished"


def _guards(svc: Cairn, p: Principal) -> list[dict[str, Any]]:
    def read(conn: Any) -> list[str]:
        q = select(audit_log.c.detail).where(audit_log.c.action == "consolidation-guard").order_by(audit_log.c.seq)
        return list(conn.execute(q).scalars())

    return [json.loads(d) for d in svc.store.run(read, write=False, **p.db_vars)]


def test_a_purge_after_the_plan_stops_every_derived_write(svc: Cairn, fixed: Principal) -> None:
    svc.write(fixed, API, "typo", "Pin pytest to 8.x because the plugin breaks on pytest 9 (typo copy)")
    svc.forget(fixed, API, "typo", "duplicate")  # forgotten before the plan: the plan does not see it
    run = svc.consolidate_plan(fixed)["run"]["id"]
    svc.erase_forgotten(fixed, API, "typo")  # the purge alone bumps the epoch
    purged = _state(svc, fixed)["lessons"]
    result = svc.consolidate_apply(fixed, run)
    assert {a["status"] for a in result["actions"]} == {"skipped"}
    assert _state(svc, fixed)["lessons"] == purged
    svc.audit_verify(fixed)


def test_a_promotion_that_restates_forgotten_content_is_held(svc: Cairn, me: Principal) -> None:
    svc.write(me, FEAT_A, "utc", "Store timestamps in UTC in the database")
    svc.write(me, FEAT_B, "utc-db", "Store timestamps in UTC in the database.")
    svc.write(me, WEB, "utc-web", "Store every timestamp in UTC in the database")
    svc.forget(me, WEB, "utc-web", "we store local time now")  # before the plan: its epoch is the plan's
    result = svc.consolidate_apply(me)
    (promote,) = [a for a in result["actions"] if a["kind"] == "promote"]
    assert promote["status"] == "applied"
    with pytest.raises(CairnError):
        svc.read(me, API, "utc-db")  # held: out of every read until a person decides
    (queued,) = svc.review_queue(me, scope=API)["candidates"]  # the newer source's key: utc-db
    assert (queued["held"]["scope"], queued["held"]["key"]) == (WEB, "utc-web")


def test_undo_names_by_address_a_lesson_changed_since_and_leaves_it(svc: Cairn, fixed: Principal) -> None:
    run = svc.consolidate_apply(fixed, scopes=[API])["run"]["id"]
    edited = "Pin pytest to 8.x: the plugin breaks on pytest 9 (upstream issue 412)"
    svc.write(fixed, API, "pytest-pin", edited)  # the merge's keeper, edited after the run
    undone = svc.consolidate_undo(fixed, run)
    (left,) = [x for x in undone["left"] if x["key"] == "pytest-pin"]
    assert (left["scope"], left["action"]) == (API, 1) and left["reason"].startswith("changed since (version")
    assert svc.read(fixed, API, "pytest-pin")["lesson"]["value"] == edited  # left as it is
    assert svc.read(fixed, API, "pin-pytest")["lesson"]["status"] == "active"  # the rest is reversed
