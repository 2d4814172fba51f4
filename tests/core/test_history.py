"""The version graph a history shows (``core/history.py: shape``): siblings, tips, the current one."""

from __future__ import annotations

from datetime import datetime, timedelta

from cairn.core.history import shape

T0 = datetime(2026, 1, 1)


def _v(uid: str, parents: list[str], minutes: int, human: bool = False) -> dict:
    return {"uid": uid, "parents": parents, "recorded_at": T0 + timedelta(minutes=minutes), "human": human}


def test_a_line_has_one_tip_and_each_version_ends_where_the_next_begins() -> None:
    g = shape([_v("a", [], 0), _v("b", ["a"], 1), _v("c", ["b"], 2)])
    assert g is not None
    assert [g[u]["parents"] for u in "abc"] == [[], ["a"], ["b"]]
    assert [g[u]["superseded_at"] for u in "abc"] == [T0 + timedelta(minutes=1), T0 + timedelta(minutes=2), None]
    assert [(g[u]["tip"], g[u]["current"]) for u in "abc"] == [(False, False), (False, False), (True, True)]


def test_two_versions_written_beside_each_other_are_both_tips_and_the_rule_picks_one() -> None:
    # b (a person's, earlier) and c (an agent's, later) were both written on a: the person's wins.
    versions = [_v("a", [], 0), _v("c", ["a"], 5), _v("b", ["a"], 3, human=True)]
    g = shape(versions)
    assert g is not None
    assert g["a"]["superseded_at"] == T0 + timedelta(minutes=3)  # the earliest child, not the next row
    assert g["b"]["superseded_at"] is None and g["c"]["superseded_at"] is None
    assert (g["b"]["tip"], g["b"]["current"]) == (True, True)
    assert (g["c"]["tip"], g["c"]["current"]) == (True, False)
    # The same versions in another order: the same graph (a function of the set alone).
    assert shape(list(reversed(versions))) == g
    # A write on top of both tips joins them: one tip again.
    joined = shape([*versions, _v("d", ["b", "c"], 9)])
    assert joined is not None and [u for u, n in joined.items() if n["tip"]] == ["d"] and joined["d"]["current"]


def test_parents_not_held_here_are_left_out_and_a_history_without_uids_has_no_graph() -> None:
    g = shape([_v("a", ["gone"], 0), _v("b", ["a"], 1)])
    assert g is not None and g["a"]["parents"] == [] and g["b"]["tip"]
    assert shape([{"uid": None, "parents": [], "recorded_at": T0}]) is None
    assert shape([]) is None
