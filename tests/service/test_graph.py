"""Links and the neighborhood walk: depth 1-3, inside a character budget, with exact omissions."""

from __future__ import annotations

import pytest

from cairn.service.api import Cairn
from tests.contract import audit_rows, refused, rows, snapshot

S = "repo::acme/widget"


@pytest.fixture
def chain(svc: Cairn, me) -> Cairn:
    """a -related-> b -derived_from-> c -contradicts-> d, each value 100 characters."""
    for name in "abcd":
        svc.write(me, S, name, f"lesson {name} " + name * 91)
    svc.link(me, S, "a", S, "b", "related")
    svc.link(me, S, "b", S, "c", "derived_from")
    svc.link(me, S, "c", S, "d", "contradicts")
    return svc


def test_link_is_stored_and_audited(svc: Cairn, me, store) -> None:
    svc.write(me, S, "a", "first")
    svc.write(me, "global", "b", "second")
    out = svc.link(me, S, "a", "global", "b", "related")
    assert out == {"changed": True, "rel": "related"}
    assert [r["rel"] for r in rows(store, "SELECT rel FROM links")] == ["related"]
    last = audit_rows(store)[-1]
    assert (last["action"], last["scope"], last["key"]) == ("link", S, "a")
    snap = snapshot(store)
    assert svc.link(me, S, "a", "global", "b", "related")["changed"] is False
    assert snapshot(store) == snap


def test_invalid_links_are_refused(svc: Cairn, me, store) -> None:
    svc.write(me, S, "a", "first")
    svc.write(me, S, "b", "second")
    svc.write(me, S, "gone", "third")
    svc.forget(me, S, "gone", "wrong")
    snap = snapshot(store)
    refused("INVALID_INPUT", svc.link, me, S, "a", S, "b", "supersedes")
    refused("INVALID_INPUT", svc.link, me, S, "a", S, "b", "likes")
    refused("INVALID_INPUT", svc.link, me, S, "a", S, "A", "related")
    refused("NOT_FOUND", svc.link, me, S, "a", S, "missing", "related")
    refused("NOT_FOUND", svc.link, me, S, "a", S, "gone", "related")
    assert snapshot(store) == snap


def test_depth_limits_the_walk(chain: Cairn, me) -> None:
    one = chain.neighborhood(me, S, "a", depth=1)
    assert [(n["key"], n["depth"], n["rel"]) for n in one["nodes"]] == [("b", 1, "related")]
    two = chain.neighborhood(me, S, "a", depth=2)
    assert [(n["key"], n["depth"]) for n in two["nodes"]] == [("b", 1), ("c", 2)]
    three = chain.neighborhood(me, S, "a", depth=3)
    assert [(n["key"], n["depth"], n["rel"]) for n in three["nodes"]] == [
        ("b", 1, "related"),
        ("c", 2, "derived_from"),
        ("d", 3, "contradicts"),
    ]
    assert three["omitted"] == 0
    assert three["chars"] == 400


def test_links_are_walked_in_both_directions(chain: Cairn, me) -> None:
    hood = chain.neighborhood(me, S, "c", depth=1)
    assert sorted((n["key"], n["direction"]) for n in hood["nodes"]) == [("b", "in"), ("d", "out")]


def test_budget_omits_what_does_not_fit_and_counts_it(chain: Cairn, me) -> None:
    hood = chain.neighborhood(me, S, "a", depth=3, budget=250)
    # The seed costs 100; b fits (200); c would make 300 and is omitted, so d is never reached.
    assert [n["key"] for n in hood["nodes"]] == ["b"]
    assert hood["omitted"] == 1
    assert hood["chars"] == 200
    assert hood["chars"] <= hood["budget"] == 250


def test_budget_counts_every_omitted_neighbor(svc: Cairn, me) -> None:
    svc.write(me, S, "hub", "h" * 100)
    for i in range(5):
        svc.write(me, S, f"spoke-{i}", f"spoke {i} " + "x" * 92)
        svc.link(me, S, "hub", S, f"spoke-{i}", "related")
    hood = svc.neighborhood(me, S, "hub", depth=1, budget=300)
    assert len(hood["nodes"]) == 2
    assert hood["omitted"] == 3


def test_inactive_neighbors_are_skipped(chain: Cairn, me) -> None:
    chain.archive(me, S, "b")
    assert chain.neighborhood(me, S, "a", depth=3)["nodes"] == []
    chain.restore(me, S, "b")
    chain.forget(me, S, "c", "wrong")
    assert [n["key"] for n in chain.neighborhood(me, S, "a", depth=3)["nodes"]] == ["b"]


def test_invalid_walks_are_refused(chain: Cairn, me) -> None:
    for depth in (0, 4, -1):
        refused("INVALID_INPUT", chain.neighborhood, me, S, "a", depth=depth)
    for budget in (0, 99, 20_001):
        refused("INVALID_INPUT", chain.neighborhood, me, S, "a", budget=budget)
    refused("NOT_FOUND", chain.neighborhood, me, S, "missing")
    chain.archive(me, S, "a")
    refused("NOT_FOUND", chain.neighborhood, me, S, "a")
