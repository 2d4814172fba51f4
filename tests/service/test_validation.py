"""Validation at the service boundary: clear codes, corrected forms, and a store left untouched."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cairn.errors import CairnError
from cairn.service.api import Cairn
from tests.contract import at, counts, refused, snapshot

S = "repo::acme/widget"


@pytest.fixture
def seeded(svc: Cairn, me) -> Cairn:
    svc.write(me, S, "existing", "already stored")
    return svc


def test_single_colon_scope_is_refused_with_the_corrected_form(seeded: Cairn, me, store) -> None:
    before = snapshot(store)
    err = refused("INVALID_SCOPE", seeded.write, me, "repo:acme/widget", "k", "v")
    assert err.data["corrected"] == "repo::acme/widget"
    assert "repo::acme/widget" in err.message
    assert '"::"' in err.message
    assert snapshot(store) == before


@pytest.mark.parametrize(
    "scope",
    [
        "global::x",
        "repo::../x",
        "repo::acme/../etc",
        "repo::acme",
        "branch::acme/widget",
        "project::",
        "",
        "   ",
        "unknown::thing",
        "repo::acme/widget/extra",
        "repo::/abs",
    ],
)
def test_malformed_scopes_are_refused_and_never_fall_into_global(seeded: Cairn, me, store, scope: str) -> None:
    before = counts(store)
    refused("INVALID_SCOPE", seeded.write, me, scope, "k", "a new value")
    assert counts(store) == before
    assert [lesson["key"] for lesson in seeded.list(me, "global")["lessons"]] == []


@pytest.mark.parametrize(("key", "code"), [("", "INVALID_KEY"), ("   ", "INVALID_KEY"), ("!!!", "INVALID_KEY")])
def test_empty_keys_are_refused(seeded: Cairn, me, store, key: str, code: str) -> None:
    before = snapshot(store)
    refused(code, seeded.write, me, S, key, "v")
    assert snapshot(store) == before


def test_overlong_key_is_refused(seeded: Cairn, me, store) -> None:
    before = snapshot(store)
    refused("INVALID_KEY", seeded.write, me, S, "k" * 201, "v")
    assert snapshot(store) == before


def test_value_over_64_kib_is_refused_and_64_kib_is_accepted(seeded: Cairn, me, store) -> None:
    before = snapshot(store)
    err = refused("VALUE_TOO_LARGE", seeded.write, me, S, "big", "x" * 65_537)
    assert err.data == {"size": 65_537, "limit": 65_536}
    # Bytes, not characters: 21,846 three-byte characters are over the limit.
    refused("VALUE_TOO_LARGE", seeded.write, me, S, "big", "€" * 21_846)
    assert snapshot(store) == before
    assert seeded.write(me, S, "big", "x" * 65_536)["action"] == "created"


@pytest.mark.parametrize("value", ["", "   \n\t", "nul\x00inside"])
def test_empty_or_binary_values_are_refused(seeded: Cairn, me, store, value: str) -> None:
    before = snapshot(store)
    refused("INVALID_VALUE", seeded.write, me, S, "k", value)
    assert snapshot(store) == before


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"kind": "opinion"}, "INVALID_INPUT"),
        ({"kind": "Lesson"}, "INVALID_INPUT"),
        ({"tags": ["has space"]}, "INVALID_INPUT"),
        ({"tags": ["-leading-dash"]}, "INVALID_INPUT"),
        ({"tags": ["x" * 65]}, "INVALID_INPUT"),
        ({"tags": [f"t{i}" for i in range(33)]}, "INVALID_INPUT"),
        ({"ttl": timedelta(0)}, "INVALID_TTL"),
        ({"ttl": timedelta(milliseconds=500)}, "INVALID_TTL"),
        ({"ttl": timedelta(days=366)}, "INVALID_TTL"),
        ({"ttl": timedelta(seconds=-5)}, "INVALID_TTL"),
        ({"valid_from": at("2025-02-01"), "valid_to": at("2025-01-01")}, "INVALID_TIME"),
        ({"valid_from": at("2025-01-01"), "valid_to": at("2025-01-01")}, "INVALID_TIME"),
        ({"origin": "martian"}, "INVALID_INPUT"),
        ({"source_agent": "a" * 501}, "INVALID_INPUT"),
    ],
)
def test_bad_options_are_refused_and_change_nothing(seeded: Cairn, me, store, options, code: str) -> None:
    before = snapshot(store)
    refused(code, seeded.write, me, S, "k", "a new value", **options)
    # An edit of an existing lesson is refused the same way.
    refused(code, seeded.write, me, S, "existing", "a changed value", **options)
    assert snapshot(store) == before


@pytest.mark.parametrize("ttl", [timedelta(seconds=1), timedelta(days=365)])
def test_ttl_bounds_are_inclusive(seeded: Cairn, me, ttl: timedelta) -> None:
    assert seeded.write(me, S, "k", "bounded", ttl=ttl)["lesson"]["expires_at"] is not None


def test_valid_to_before_the_inherited_valid_from_on_an_edit(svc: Cairn, me) -> None:
    """An edit giving only valid_to earlier than the stored valid_from never stores an empty interval."""
    svc.write(me, S, "k", "one", valid_from=at("2025-01-01"))
    out = svc.write(me, S, "k", "two", valid_to=at("2024-01-01"))["lesson"]
    assert out["valid_from"] is None or out["valid_from"] < out["valid_to"]


def test_tags_are_normalized(svc: Cairn, me) -> None:
    out = svc.write(me, S, "k", "v", tags=["CI", " ci ", "Py3.12"])
    assert out["lesson"]["tags"] == ["ci", "py3.12"]


def test_every_verb_validates_the_scope(seeded: Cairn, me, store) -> None:
    bad = "repo:acme/widget"
    before = snapshot(store)
    for call in (
        lambda: seeded.read(me, bad, "k"),
        lambda: seeded.list(me, bad),
        lambda: seeded.history(me, bad, "k"),
        lambda: seeded.archive(me, bad, "k"),
        lambda: seeded.restore(me, bad, "k"),
        lambda: seeded.forget(me, bad, "k", "r"),
        lambda: seeded.feedback(me, bad, "k", "helped"),
        lambda: seeded.supersede(me, bad, "k", "v"),
        lambda: seeded.supersede(me, S, "k", "v", supersedes=(bad, "k")),
        lambda: seeded.link(me, S, "existing", bad, "k", "related"),
        lambda: seeded.neighborhood(me, bad, "k"),
        lambda: seeded.verify(me, bad, "k"),
        lambda: seeded.audit(me, scope=bad, key="k"),
        lambda: list(seeded.export(me, scope=bad)),
    ):
        err = refused("INVALID_SCOPE", call)
        assert err.data["corrected"] == "repo::acme/widget"
    assert snapshot(store) == before


def test_list_and_review_limits_are_validated(seeded: Cairn, me) -> None:
    for limit in (0, -1, 10_001):
        refused("INVALID_INPUT", seeded.list, me, limit=limit)
        refused("INVALID_INPUT", seeded.review_queue, me, limit=limit)
    refused("INVALID_INPUT", seeded.list, me, trust="rejected")
    refused("INVALID_INPUT", seeded.audit, me, scope=S)


def test_a_session_id_longer_than_the_store_keeps_is_refused_on_every_database(seeded: Cairn, me, store) -> None:
    """The schema holds a session id in 200 characters (``sightings.session``): Postgres enforces
    that and SQLite does not, so the limit is checked before either sees it — the same answer on both."""
    from tests.conftest import session

    before = snapshot(store)
    with pytest.raises(CairnError) as info:
        seeded.write(session(me, "s" * 201), "global", "k", "a value")
    assert info.value.code == "INVALID_INPUT"
    assert snapshot(store) == before
    assert seeded.write(session(me, "s" * 200), "global", "k", "a value")["action"] in ("created", "recurred", "edited")


def test_null_characters_in_text_fields_are_refused_on_every_database(seeded: Cairn, me, store) -> None:
    """Postgres cannot store U+0000 in text; SQLite can. One rule for both: refused before the store."""
    before = snapshot(store)
    for field in ("source_agent", "trigger"):
        refused("INVALID_INPUT", seeded.write, me, "global", "k", "a value", **{field: "bad\x00value"})
    refused("INVALID_INPUT", seeded.write, me, "global", "k", "a value", tags=["a\x00b"])
    assert snapshot(store) == before
