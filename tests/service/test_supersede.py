"""Supersede: replace a lesson with another in one transaction, linked; never guess the target."""

from __future__ import annotations

from cairn.service.api import Cairn
from tests.contract import audit_rows, refused, rows, snapshot

SCOPE = "repo::acme/widget"


def test_explicit_supersedes_retires_and_links(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "old-way", "Build with make.")
    out = svc.supersede(me, SCOPE, "new-way", "Build with just.", supersedes=(SCOPE, "old-way"))
    assert out["action"] == "created"
    assert out["superseded"] == {"scope": SCOPE, "key": "old-way", "version": 1}
    assert out["superseded_status"] == "superseded"
    refused("NOT_FOUND", svc.read, me, SCOPE, "old-way")
    assert [lesson["key"] for lesson in svc.list(me, SCOPE)["lessons"]] == ["new-way"]
    assert svc.read(me, SCOPE, "new-way")["lesson"]["value"] == "Build with just."
    link = rows(store, "SELECT src_id, dst_id, rel FROM links")
    ids = {r["key"]: r["id"] for r in rows(store, "SELECT id, key FROM lessons")}
    assert link == [{"src_id": ids["new-way"], "dst_id": ids["old-way"], "rel": "supersedes"}]
    old = rows(store, "SELECT superseded_by FROM lessons WHERE key = 'old-way'")[0]
    assert old["superseded_by"] == ids["new-way"]
    # The old lesson's history is intact and records the retirement.
    hist = svc.history(me, SCOPE, "old-way")
    assert hist["status"] == "superseded"
    assert [v["action"] for v in hist["versions"]] == ["create", "superseded"]
    assert hist["versions"][0]["value"] == "Build with make."
    # Both lessons' changes are in the audit, each with its versions.
    tail = audit_rows(store)[-2:]
    assert [(r["action"], r["key"], r["version_before"], r["version_after"]) for r in tail] == [
        ("create", "new-way", None, 1),
        ("superseded", "old-way", 1, 2),
    ]


def test_the_supersedes_link_is_visible_in_the_neighborhood(svc: Cairn, me) -> None:
    svc.write(me, SCOPE, "old-way", "Build with make.")
    svc.supersede(me, SCOPE, "new-way", "Build with just.", supersedes=(SCOPE, "old-way"))
    hood = svc.neighborhood(me, SCOPE, "new-way")
    assert [(n["key"], n["rel"], n["direction"], n["status"]) for n in hood["nodes"]] == [
        ("old-way", "supersedes", "out", "superseded")
    ]


def test_supersede_across_scopes(svc: Cairn, me) -> None:
    svc.write(me, "repo::acme/widget", "lint", "Run flake8.")
    out = svc.supersede(me, "global", "lint", "Run ruff everywhere.", supersedes=("repo::acme/widget", "lint"))
    assert out["superseded"]["scope"] == "repo::acme/widget"
    refused("NOT_FOUND", svc.read, me, "repo::acme/widget", "lint")
    assert svc.read(me, "global", "lint")["lesson"]["value"] == "Run ruff everywhere."


def test_identity_search_none_is_a_plain_create(svc: Cairn, me, store) -> None:
    out = svc.supersede(me, SCOPE, "fresh", "Nothing to replace.")
    assert out["action"] == "created"
    assert out["superseded"] is None
    assert rows(store, "SELECT * FROM links") == []


def test_identity_search_one_in_another_scope_is_replaced(svc: Cairn, me, store) -> None:
    svc.write(me, "repo::acme/old-home", "deploy", "Deploy with fab.")
    out = svc.supersede(me, SCOPE, "Deploy", "Deploy with the release workflow.")
    assert out["superseded"] == {"scope": "repo::acme/old-home", "key": "deploy", "version": 1}
    refused("NOT_FOUND", svc.read, me, "repo::acme/old-home", "deploy")
    assert svc.list(me, "repo::acme/old-home")["lessons"] == []
    assert [r["rel"] for r in rows(store, "SELECT rel FROM links")] == ["supersedes"]
    hood = svc.neighborhood(me, SCOPE, "deploy")
    assert [(n["scope"], n["rel"]) for n in hood["nodes"]] == [("repo::acme/old-home", "supersedes")]


def test_identity_search_several_is_ambiguous_and_names_them(svc: Cairn, me, store) -> None:
    svc.write(me, "repo::acme/a", "deploy", "Deploy A with fab.")
    svc.write(me, "repo::acme/b", "deploy", "Deploy B with ansible.")
    snap = snapshot(store)
    err = refused("SUPERSEDE_AMBIGUOUS", svc.supersede, me, SCOPE, "deploy", "Deploy with the workflow.")
    assert sorted((c["scope"], c["key"]) for c in err.data["candidates"]) == [
        ("repo::acme/a", "deploy"),
        ("repo::acme/b", "deploy"),
    ]
    assert "repo::acme/a" in err.message and "repo::acme/b" in err.message
    assert snapshot(store) == snap
    # Naming the target resolves it.
    out = svc.supersede(me, SCOPE, "deploy", "Deploy with the workflow.", supersedes=("repo::acme/b", "deploy"))
    assert out["superseded"]["scope"] == "repo::acme/b"
    assert svc.read(me, "repo::acme/a", "deploy")["lesson"]["value"] == "Deploy A with fab."


def test_identity_search_ignores_inactive_lessons(svc: Cairn, me) -> None:
    svc.write(me, "repo::acme/a", "deploy", "Deploy A with fab.")
    svc.write(me, "repo::acme/b", "deploy", "Deploy B with ansible.")
    svc.archive(me, "repo::acme/b", "deploy")
    out = svc.supersede(me, SCOPE, "deploy", "Deploy with the workflow.")
    assert out["superseded"]["scope"] == "repo::acme/a"


def test_same_address_supersede_makes_a_new_version(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", "old advice")
    out = svc.supersede(me, SCOPE, "k", "new advice")
    assert out["action"] == "updated"
    assert out["superseded"] == {"scope": SCOPE, "key": "k", "version": 1}
    assert out["lesson"]["version"] == 2
    assert svc.read(me, SCOPE, "k")["lesson"]["value"] == "new advice"
    assert [v["value"] for v in svc.history(me, SCOPE, "k")["versions"]] == ["old advice", "new advice"]
    assert len(rows(store, "SELECT * FROM lessons")) == 1
    assert rows(store, "SELECT * FROM links") == []


def test_explicit_same_address_supersede_makes_a_new_version(svc: Cairn, me) -> None:
    svc.write(me, SCOPE, "k", "old advice")
    out = svc.supersede(me, SCOPE, "k", "new advice", supersedes=(SCOPE, "k"))
    assert out["lesson"]["version"] == 2
    assert svc.read(me, SCOPE, "k")["lesson"]["value"] == "new advice"


def test_supersede_refusals_change_nothing(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "old", "old advice")
    svc.supersede(me, SCOPE, "new", "new advice", supersedes=(SCOPE, "old"))
    svc.write(me, SCOPE, "gone", "rejected advice")
    svc.forget(me, SCOPE, "gone", "wrong")
    snap = snapshot(store)
    refused("NOT_FOUND", svc.supersede, me, SCOPE, "x", "text one", supersedes=(SCOPE, "missing"))
    refused("NOT_FOUND", svc.supersede, me, SCOPE, "x", "text two", supersedes=(SCOPE, "gone"))
    refused("CONFLICT", svc.supersede, me, SCOPE, "x", "text three", supersedes=(SCOPE, "old"))
    refused("TOMBSTONED", svc.supersede, me, SCOPE, "x", "Rejected advice!", supersedes=(SCOPE, "new"))
    assert snapshot(store) == snap


def test_supersede_with_content_already_stored_in_the_scope_is_refused(svc: Cairn, me, store) -> None:
    """The new content recurs on an existing lesson, so there is no new lesson to link: refuse cleanly."""
    svc.write(me, SCOPE, "old", "Use tox.")
    svc.write(me, SCOPE, "elsewhere", "Use nox.")
    snap = snapshot(store)
    refused("CONFLICT", svc.supersede, me, SCOPE, "new", "use nox", supersedes=(SCOPE, "old"))
    refused("CONFLICT", svc.supersede, me, SCOPE, "new", "use tox", supersedes=(SCOPE, "old"))
    assert snapshot(store) == snap
    assert svc.read(me, SCOPE, "old")["lesson"]["value"] == "Use tox."


def test_rewriting_a_superseded_address_brings_it_back(svc: Cairn, me) -> None:
    svc.write(me, SCOPE, "old", "old advice")
    svc.supersede(me, SCOPE, "new", "new advice", supersedes=(SCOPE, "old"))
    out = svc.write(me, SCOPE, "old", "fresh advice at the old address")
    assert out["lesson"]["status"] == "active"
    assert svc.read(me, SCOPE, "old")["lesson"]["value"] == "fresh advice at the old address"
