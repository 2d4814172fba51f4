"""Writing: create, edit as a new version, recurrence instead of copies, trust on write."""

from __future__ import annotations

import pytest

from cairn.errors import CairnError
from cairn.service.api import Cairn
from tests.conftest import human
from tests.contract import audit_rows, counts, rows

SCOPE = "repo::acme/widget"


def lesson_rows(store, scope=None):
    sql = "SELECT * FROM lessons WHERE tenant_id = 'local'"
    if scope:
        return rows(store, sql + " AND scope = :s ORDER BY id", s=scope)
    return rows(store, sql + " ORDER BY id")


def test_create_returns_a_candidate_at_the_normalized_address(svc: Cairn, me, store) -> None:
    out = svc.write(me, "Repo::Acme/Widget", "Use  UV Cache!", "Run `uv sync --frozen` in CI.", tags=["CI", "uv"])
    assert out["action"] == "created"
    lesson = out["lesson"]
    assert (lesson["scope"], lesson["key"]) == (SCOPE, "use-uv-cache")
    assert lesson["trust"] == "candidate"
    assert lesson["version"] == 1
    assert lesson["seen_count"] == 1
    assert lesson["tags"] == ["ci", "uv"]
    assert lesson["origin"] == "agent"
    assert lesson["status"] == "active"
    # Readable under any spelling of the key.
    assert svc.read(me, SCOPE, "use-uv-cache")["lesson"]["value"] == "Run `uv sync --frozen` in CI."
    assert len(lesson_rows(store)) == 1
    assert len(rows(store, "SELECT * FROM lesson_versions")) == 1


def test_same_address_same_normalized_content_is_a_recurrence(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "cache", "Clear the cache before a rebuild.")
    before = counts(store)
    out = svc.write(me, SCOPE, "Cache", "  clear THE cache, before a rebuild!!")
    assert out["action"] == "recurred"
    assert out["lesson"]["seen_count"] == 2
    # The stored value is the first wording; no new lesson appeared.
    assert out["lesson"]["value"] == "Clear the cache before a rebuild."
    after = counts(store)
    assert after["lessons"] == before["lessons"] == 1
    assert svc.read(me, SCOPE, "cache")["lesson"]["seen_count"] == 2


def test_same_scope_other_key_same_content_recurs_on_the_existing_lesson(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "first-key", "Pin numpy below 3 for the ONNX runtime.")
    out = svc.write(me, SCOPE, "second-key", "pin numpy below 3 for the onnx runtime")
    assert out["action"] == "recurred"
    assert out["lesson"]["key"] == "first-key"
    assert out["lesson"]["seen_count"] == 2
    assert [r["key"] for r in lesson_rows(store)] == ["first-key"]
    from cairn.errors import CairnError

    with pytest.raises(CairnError) as info:
        svc.read(me, SCOPE, "second-key")
    assert info.value.code == "NOT_FOUND"


def test_an_address_that_holds_a_lesson_is_edited_even_when_its_scope_has_the_same_content(
    svc: Cairn, me, store
) -> None:
    # The address and same-content look-ups are read together: the twin counts only when the
    # address is free, so new content at a held address edits that lesson, never recurs elsewhere.
    svc.write(me, SCOPE, "twin", "Cache the wheels between CI runs.")
    svc.write(me, SCOPE, "held", "Something else entirely.")
    out = svc.write(me, SCOPE, "held", "cache the wheels between CI runs")
    assert out["action"] == "updated"
    assert (out["lesson"]["key"], out["lesson"]["version"], out["lesson"]["seen_count"]) == ("held", 2, 1)
    assert svc.read(me, SCOPE, "twin")["lesson"]["seen_count"] == 1
    assert len(lesson_rows(store)) == 2


def test_rejected_or_superseded_lessons_are_no_twin(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "old", "Use the staging bucket for fixtures.")
    svc.supersede(me, SCOPE, "new", "Fixtures live in the test bucket.", supersedes=(SCOPE, "old"))
    out = svc.write(me, SCOPE, "again", "use the staging bucket for fixtures")
    assert out["action"] == "created"
    assert out["lesson"]["key"] == "again"


def test_same_content_in_another_scope_is_a_new_lesson(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", "Migrations must say why.")
    out = svc.write(me, "repo::acme/other", "k", "Migrations must say why.")
    assert out["action"] == "created"
    assert out["lesson"]["seen_count"] == 1
    assert sorted(r["scope"] for r in lesson_rows(store)) == ["repo::acme/other", SCOPE]


def test_edit_makes_a_new_version_and_history_keeps_every_value(svc: Cairn, me, store) -> None:
    values = ["first wording", "second, different wording", "a third thing entirely"]
    for v in values:
        svc.write(me, SCOPE, "k", v)
    read = svc.read(me, SCOPE, "k")["lesson"]
    assert read["value"] == values[-1]
    assert read["version"] == 3
    hist = svc.history(me, SCOPE, "k")
    assert [v["value"] for v in hist["versions"]] == values
    assert [v["version"] for v in hist["versions"]] == [1, 2, 3]
    assert [v["action"] for v in hist["versions"]] == ["create", "update", "update"]
    assert all(v["actor"] == "agent-a" for v in hist["versions"])
    # Record intervals chain: each version is held until the next one was recorded.
    for a, b in zip(hist["versions"], hist["versions"][1:], strict=False):
        assert a["recorded_until"] == b["recorded_at"]
    assert hist["versions"][-1]["recorded_until"] is None
    # Nothing overwritten in place: the table holds all three values.
    stored = rows(store, "SELECT value FROM lesson_versions ORDER BY version")
    assert [r["value"] for r in stored] == values
    assert len(lesson_rows(store)) == 1
    diff = svc.diff(me, SCOPE, "k", 1, 3)
    assert "-first wording" in diff["value_diff"]
    assert "+a third thing entirely" in diff["value_diff"]


def test_edit_keeps_ttl_and_tags_it_was_not_given(svc: Cairn, me, clock) -> None:
    from datetime import timedelta

    svc.write(me, SCOPE, "k", "one", tags=["x"], ttl=timedelta(days=7))
    first = svc.read(me, SCOPE, "k")["lesson"]
    out = svc.write(me, SCOPE, "k", "two")
    assert out["lesson"]["expires_at"] == first["expires_at"] == "2025-01-08T00:00:00Z"
    assert out["lesson"]["tags"] == ["x"]


def test_the_service_parses_a_ttl_as_people_write_it(svc: Cairn, me, clock, store) -> None:
    """A duration string ("7d") is parsed by the service itself, the same for every surface that passes
    one through; one it cannot read is INVALID_TTL with the accepted forms, and nothing is written."""
    out = svc.write(me, SCOPE, "k", "one", ttl="7d")
    assert out["lesson"]["expires_at"] == "2025-01-08T00:00:00Z"
    for bad in ("soon", "0s", "400d"):
        with pytest.raises(CairnError) as info:
            svc.write(me, SCOPE, "other", "two", ttl=bad)
        assert info.value.code == "INVALID_TTL"
    assert [r["key"] for r in lesson_rows(store)] == ["k"]


def test_agent_edit_of_a_verified_lesson_makes_it_a_candidate(svc: Cairn, me) -> None:
    svc.write(human(me), SCOPE, "k", "Checked by a person.")
    assert svc.read(me, SCOPE, "k")["lesson"]["trust"] == "verified"
    out = svc.write(me, SCOPE, "k", "Rewritten by an agent.")
    assert out["action"] == "updated"
    assert out["lesson"]["trust"] == "candidate"
    hist = svc.history(me, SCOPE, "k")["versions"]
    assert [v["trust"] for v in hist] == ["verified", "candidate"]


def test_agent_recurrence_keeps_a_verified_lesson_verified(svc: Cairn, me) -> None:
    svc.write(human(me), SCOPE, "k", "Checked by a person.")
    out = svc.write(me, SCOPE, "k", "checked by a person")
    assert out["action"] == "recurred"
    assert out["lesson"]["trust"] == "verified"


def test_human_write_is_verified_and_human_edit_verifies(svc: Cairn, me) -> None:
    out = svc.write(human(me), SCOPE, "h", "A person wrote this.")
    assert out["lesson"]["trust"] == "verified"
    assert out["lesson"]["origin"] == "human"
    svc.write(me, SCOPE, "a", "An agent wrote this.")
    edited = svc.write(human(me), SCOPE, "a", "A person corrected this.")
    assert edited["lesson"]["trust"] == "verified"


def test_human_recurrence_of_a_candidate_verifies_it(svc: Cairn, me) -> None:
    svc.write(me, SCOPE, "a", "An agent wrote this.")
    out = svc.write(human(me), SCOPE, "a", "an agent wrote this")
    assert out["action"] == "promoted"
    assert out["lesson"]["trust"] == "verified"


def test_write_options_are_stored(svc: Cairn, me) -> None:
    out = svc.write(
        me, SCOPE, "k", "v", kind="fact", source_agent="claude-code", trigger="pytest failed", url="https://x.test/1"
    )["lesson"]
    assert (out["kind"], out["source_agent"], out["trigger"], out["url"]) == (
        "fact",
        "claude-code",
        "pytest failed",
        "https://x.test/1",
    )
    assert out["author"] == "agent-a"


def test_every_write_is_audited_with_versions(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", "one")
    svc.write(me, SCOPE, "k", "one")  # recurrence
    svc.write(me, SCOPE, "k", "two")  # edit
    audit = audit_rows(store)
    assert [r["action"] for r in audit] == ["create", "recur", "update"]
    assert [(r["version_before"], r["version_after"]) for r in audit] == [(None, 1), (1, 2), (2, 3)]
    # Recurrence is a mutation too: it has its own version row.
    assert [v["seen_count"] for v in svc.history(me, SCOPE, "k")["versions"]] == [1, 2, 2]


def test_write_to_an_archived_address_does_not_create_a_second_lesson(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", "one")
    svc.archive(me, SCOPE, "k")
    svc.write(me, SCOPE, "k", "two")
    assert len(lesson_rows(store)) == 1
