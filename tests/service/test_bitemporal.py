"""Bi-temporal reads: record time (``as_of``: what Cairn held) and valid time (``valid_at``)."""

from __future__ import annotations

from cairn.service.api import Cairn
from tests.contract import at, refused, rows

SCOPE = "repo::acme/widget"


def test_as_of_between_two_versions_returns_the_old_value(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, SCOPE, "k", "first value")
    clock("2025-02-01T00:00:00Z")
    svc.write(me, SCOPE, "k", "second value")
    clock("2025-03-01T00:00:00Z")
    svc.write(me, SCOPE, "k", "third value")
    old = svc.read(me, SCOPE, "k", as_of=at("2025-01-15T00:00:00"))
    assert old["lesson"]["value"] == "first value"
    assert old["version"] == 1
    assert old["lesson"]["recorded_at"] == "2025-01-01T00:00:00Z"
    mid = svc.read(me, SCOPE, "k", as_of=at("2025-02-20T00:00:00"))
    assert (mid["lesson"]["value"], mid["version"]) == ("second value", 2)
    # Exactly at a version's record time, that version is what Cairn held.
    assert svc.read(me, SCOPE, "k", as_of=at("2025-02-01T00:00:00"))["lesson"]["value"] == "second value"
    assert svc.read(me, SCOPE, "k", as_of=at("2030-01-01T00:00:00"))["lesson"]["value"] == "third value"
    assert svc.read(me, SCOPE, "k")["lesson"]["value"] == "third value"


def test_as_of_before_creation_is_not_found(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, SCOPE, "k", "first value")
    refused("NOT_FOUND", svc.read, me, SCOPE, "k", as_of=at("2024-12-31T23:59:59"))


def test_as_of_while_archived_is_not_found_but_before_is(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, SCOPE, "k", "value")
    clock("2025-02-01T00:00:00Z")
    svc.archive(me, SCOPE, "k")
    refused("NOT_FOUND", svc.read, me, SCOPE, "k", as_of=at("2025-02-15T00:00:00"))
    assert svc.read(me, SCOPE, "k", as_of=at("2025-01-15T00:00:00"))["lesson"]["value"] == "value"


def test_as_of_never_returns_a_rejected_lesson(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, SCOPE, "k", "value")
    clock("2025-02-01T00:00:00Z")
    svc.forget(me, SCOPE, "k", "wrong")
    refused("NOT_FOUND", svc.read, me, SCOPE, "k", as_of=at("2025-01-15T00:00:00"))
    refused("NOT_FOUND", svc.read, me, SCOPE, "k", valid_at=at("2025-01-15T00:00:00"))


def test_as_of_reads_a_superseded_lesson_as_it_was(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, SCOPE, "old", "old advice")
    clock("2025-02-01T00:00:00Z")
    svc.supersede(me, SCOPE, "new", "new advice", supersedes=(SCOPE, "old"))
    refused("NOT_FOUND", svc.read, me, SCOPE, "old")
    assert svc.read(me, SCOPE, "old", as_of=at("2025-01-15T00:00:00"))["lesson"]["value"] == "old advice"
    refused("NOT_FOUND", svc.read, me, SCOPE, "new", as_of=at("2025-01-15T00:00:00"))


def test_valid_at_picks_the_version_whose_interval_contains_it(svc: Cairn, me) -> None:
    svc.write(me, SCOPE, "k", "Node 18 is the LTS.", valid_from=at("2023-01-01"), valid_to=at("2024-01-01"))
    svc.write(me, SCOPE, "k", "Node 20 is the LTS.", valid_from=at("2024-01-01"), valid_to=at("2025-01-01"))
    svc.write(me, SCOPE, "k", "Node 22 is the LTS.", valid_from=at("2025-01-01"))
    assert svc.read(me, SCOPE, "k", valid_at=at("2023-06-01"))["lesson"]["value"] == "Node 18 is the LTS."
    mid = svc.read(me, SCOPE, "k", valid_at=at("2024-06-01"))
    assert (mid["lesson"]["value"], mid["version"]) == ("Node 20 is the LTS.", 2)
    # valid_from is inclusive, valid_to exclusive.
    assert svc.read(me, SCOPE, "k", valid_at=at("2024-01-01"))["lesson"]["value"] == "Node 20 is the LTS."
    assert svc.read(me, SCOPE, "k", valid_at=at("2030-01-01"))["lesson"]["value"] == "Node 22 is the LTS."
    refused("NOT_FOUND", svc.read, me, SCOPE, "k", valid_at=at("2022-06-01"))


def test_a_new_start_after_the_old_end_opens_the_interval(svc: Cairn, me) -> None:
    """Only valid_from given on an edit: the old valid_to is not inherited into an empty interval."""
    svc.write(me, SCOPE, "k", "Node 18 is the LTS.", valid_from=at("2023-01-01"), valid_to=at("2024-01-01"))
    out = svc.write(me, SCOPE, "k", "Node 20 is the LTS.", valid_from=at("2024-01-01"))
    assert (out["lesson"]["valid_from"], out["lesson"]["valid_to"]) == ("2024-01-01T00:00:00Z", None)
    assert svc.read(me, SCOPE, "k", valid_at=at("2024-06-01"))["lesson"]["value"] == "Node 20 is the LTS."
    # No version in the store has an empty valid interval.
    for v in rows(svc.store, "SELECT valid_from, valid_to FROM lesson_versions"):
        assert v["valid_from"] is None or v["valid_to"] is None or v["valid_from"] < v["valid_to"]


def test_an_edit_that_gives_no_bounds_keeps_the_interval(svc: Cairn, me) -> None:
    svc.write(me, SCOPE, "k", "one", valid_from=at("2023-01-01"), valid_to=at("2024-01-01"))
    out = svc.write(me, SCOPE, "k", "two")
    assert (out["lesson"]["valid_from"], out["lesson"]["valid_to"]) == ("2023-01-01T00:00:00Z", "2024-01-01T00:00:00Z")


def test_valid_at_and_as_of_combine(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, SCOPE, "k", "v1", valid_from=at("2020-01-01"), valid_to=at("2021-01-01"))
    clock("2025-02-01T00:00:00Z")
    svc.write(me, SCOPE, "k", "v2", valid_from=at("2020-01-01"), valid_to=at("2021-01-01"))
    # What did Cairn believe, in January, was true in mid-2020?
    both = svc.read(me, SCOPE, "k", as_of=at("2025-01-15T00:00:00"), valid_at=at("2020-06-01"))
    assert both["lesson"]["value"] == "v1"
    assert svc.read(me, SCOPE, "k", valid_at=at("2020-06-01"))["lesson"]["value"] == "v2"


def test_history_carries_record_and_valid_time(svc: Cairn, me, clock) -> None:
    clock("2025-01-01T00:00:00Z")
    svc.write(me, SCOPE, "k", "v1", valid_from=at("2020-01-01"))
    clock("2025-01-02T00:00:00Z")
    svc.write(me, SCOPE, "k", "v2", valid_to=at("2030-01-01"))
    versions = svc.history(me, SCOPE, "k")["versions"]
    assert [(v["recorded_at"], v["recorded_until"]) for v in versions] == [
        ("2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z"),
        ("2025-01-02T00:00:00Z", None),
    ]
    assert [(v["valid_from"], v["valid_to"]) for v in versions] == [
        ("2020-01-01T00:00:00Z", None),
        ("2020-01-01T00:00:00Z", "2030-01-01T00:00:00Z"),
    ]
