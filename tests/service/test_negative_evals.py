"""Negative evals: material that must NOT come back, from any read path.

Each fixture lesson carries a unique marker word in its value. A test gathers everything a surface
returns as text and asserts the forbidden markers are absent, while the one active, visible lesson
is present (so an empty answer cannot pass for a correct one).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from cairn.core.principal import Principal
from cairn.service.api import Cairn
from tests.conftest import human, session
from tests.contract import refused, snapshot

S = "repo::acme/widget"
ELSEWHERE = "repo::elsewhere/tool"
OTHER = Principal("other", "someone-else")
LIMITED = Principal("local", "limited-token", scope_patterns=("repo::acme/*",))

VISIBLE = "marker-visible"
FORBIDDEN_IN_TENANT = {
    "archived": "marker-archived",
    "expired": "marker-expired",
    "rejected": "marker-rejected",
    "tombstoned": "marker-tombstoned",
    "lifted-but-rejected": "marker-lifted",
    "superseded": "marker-superseded",
}
OTHER_SCOPE = "marker-other-scope"
OTHER_TENANT = "marker-other-tenant"


@pytest.fixture
def world(svc: Cairn, me, clock) -> Cairn:
    clock("2025-01-01T00:00:00Z")
    svc.ensure_tenant(OTHER)
    svc.write(me, S, "visible", f"{VISIBLE} is active and in scope")
    svc.write(me, S, "archived", f"{FORBIDDEN_IN_TENANT['archived']} was archived")
    svc.archive(me, S, "archived")
    svc.write(me, S, "expired", f"{FORBIDDEN_IN_TENANT['expired']} has expired", ttl=timedelta(hours=1))
    svc.write(me, S, "rejected", f"{FORBIDDEN_IN_TENANT['rejected']} was rejected in review")
    svc.reject(human(me), S, "rejected", "wrong")
    svc.write(me, S, "tombstoned", f"{FORBIDDEN_IN_TENANT['tombstoned']} was forgotten")
    svc.forget(me, S, "tombstoned", "leaked a secret")
    svc.write(me, S, "lifted", f"{FORBIDDEN_IN_TENANT['lifted-but-rejected']} was forgotten, then lifted")
    tid = svc.forget(me, S, "lifted", "looked wrong")["tombstone_id"]
    svc.unforget(me, tid, "not wrong after all")
    svc.write(me, S, "old-way", f"{FORBIDDEN_IN_TENANT['superseded']} was superseded")
    svc.supersede(me, S, "new-way", f"{VISIBLE} replacement", supersedes=(S, "old-way"))
    svc.write(me, ELSEWHERE, "visible", f"{OTHER_SCOPE} belongs to another repo")
    svc.write(OTHER, S, "visible", f"{OTHER_TENANT} belongs to another tenant")
    svc.write(OTHER, S, "theirs", f"{OTHER_TENANT} second lesson")
    # All of the above are candidates unless rejected, so the review queue has material too.
    svc.write(session(me, "s1"), S, "queue", f"{VISIBLE} queued candidate")
    clock("2025-01-02T00:00:00Z")  # the TTL has passed
    return svc


def text_of(obj) -> str:  # type: ignore[no-untyped-def]
    return json.dumps(obj, default=str)


def assert_clean(blob: str, *, forbidden: list[str], must_have: str | None = VISIBLE) -> None:
    for marker in forbidden:
        assert marker not in blob, f"{marker} came back"
    if must_have:
        assert must_have in blob


ALL_IN_TENANT = list(FORBIDDEN_IN_TENANT.values())


# -- read ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["archived", "expired", "rejected", "tombstoned", "lifted", "old-way"])
def test_read_never_returns_inactive_lessons(world: Cairn, me, key: str) -> None:
    refused("NOT_FOUND", world.read, me, S, key)


@pytest.mark.parametrize("key", ["rejected", "tombstoned", "lifted"])
def test_historical_reads_never_return_rejected_lessons(world: Cairn, me, key: str) -> None:
    from tests.contract import at

    refused("NOT_FOUND", world.read, me, S, key, as_of=at("2025-01-01T00:00:00"))
    refused("NOT_FOUND", world.read, me, S, key, valid_at=at("2025-01-01T00:00:00"))


@pytest.mark.parametrize("key", ["rejected", "tombstoned", "lifted"])
def test_history_and_diff_never_return_rejected_content(world: Cairn, me, key: str) -> None:
    """Rejected is never returned by a read, and the version history is a read of every value."""
    refused("NOT_FOUND", world.history, me, S, key)
    refused("NOT_FOUND", world.diff, me, S, key, 1, 2)


def test_read_of_the_active_lesson_works(world: Cairn, me) -> None:
    assert VISIBLE in world.read(me, S, "visible")["lesson"]["value"]


def test_read_never_crosses_tenants(world: Cairn, me) -> None:
    assert OTHER_TENANT not in text_of(world.read(me, S, "visible"))
    refused("NOT_FOUND", world.read, me, S, "theirs")
    assert OTHER_TENANT in world.read(OTHER, S, "visible")["lesson"]["value"]
    refused("NOT_FOUND", world.read, OTHER, S, "queue")
    refused("NOT_FOUND", world.read, OTHER, ELSEWHERE, "visible")


def test_read_of_another_scope_gets_that_scope_only(world: Cairn, me) -> None:
    assert OTHER_SCOPE not in text_of(world.read(me, S, "visible"))


# -- list ---------------------------------------------------------------------------------------


def test_list_of_the_scope_excludes_everything_inactive_and_elsewhere(world: Cairn, me) -> None:
    out = world.list(me, S)
    assert_clean(text_of(out), forbidden=[*ALL_IN_TENANT, OTHER_SCOPE, OTHER_TENANT])
    assert sorted(lesson["key"] for lesson in out["lessons"]) == ["new-way", "queue", "visible"]


def test_list_of_every_scope_excludes_everything_inactive_and_the_other_tenant(world: Cairn, me) -> None:
    out = world.list(me)
    assert_clean(text_of(out), forbidden=[*ALL_IN_TENANT, OTHER_TENANT])
    assert OTHER_SCOPE in text_of(out)  # the same tenant's other scope is fine for a full principal


@pytest.mark.parametrize("trust", ["candidate", "verified"])
def test_list_by_trust_never_shows_rejected(world: Cairn, me, trust: str) -> None:
    assert_clean(text_of(world.list(me, trust=trust)), forbidden=ALL_IN_TENANT, must_have=None)


def test_list_of_archived_shows_only_the_archived(world: Cairn, me) -> None:
    out = world.list(me, archived=True)
    assert [lesson["key"] for lesson in out["lessons"]] == ["archived"]
    forbidden = [m for k, m in FORBIDDEN_IN_TENANT.items() if k != "archived"]
    assert_clean(text_of(out), forbidden=[*forbidden, OTHER_TENANT], must_have=FORBIDDEN_IN_TENANT["archived"])


def test_list_of_the_other_tenant(world: Cairn) -> None:
    out = world.list(OTHER)
    assert sorted(lesson["key"] for lesson in out["lessons"]) == ["theirs", "visible"]
    assert_clean(text_of(out), forbidden=[*ALL_IN_TENANT, OTHER_SCOPE, VISIBLE], must_have=OTHER_TENANT)


# -- export of active lessons ---------------------------------------------------------------------


def test_active_export_excludes_everything_inactive_and_the_other_tenant(world: Cairn, me) -> None:
    blob = "\n".join(world.export(me, active_only=True))
    assert_clean(blob, forbidden=[*ALL_IN_TENANT, OTHER_TENANT])
    # Active export carries neither tombstones nor links (a link could name a retired lesson).
    types = {json.loads(line)["type"] for line in blob.splitlines()}
    assert types == {"header", "lesson"}


def test_active_export_of_the_other_tenant(world: Cairn) -> None:
    blob = "\n".join(world.export(OTHER, active_only=True))
    assert_clean(blob, forbidden=[*ALL_IN_TENANT, OTHER_SCOPE, VISIBLE], must_have=OTHER_TENANT)


def test_full_export_never_crosses_tenants(world: Cairn, me) -> None:
    assert OTHER_TENANT not in "\n".join(world.export(me))
    theirs = "\n".join(world.export(OTHER))
    assert_clean(theirs, forbidden=[*ALL_IN_TENANT, OTHER_SCOPE, VISIBLE], must_have=OTHER_TENANT)
    assert "leaked a secret" not in theirs  # tombstone reasons are tenant data too


# -- review queue and audit -----------------------------------------------------------------------


def test_review_queue_shows_only_active_candidates(world: Cairn, me) -> None:
    out = world.review_queue(me)
    assert_clean(text_of(out), forbidden=[*ALL_IN_TENANT, OTHER_TENANT])


def test_review_queue_of_the_other_tenant_holds_only_its_own(world: Cairn) -> None:
    out = world.review_queue(OTHER)
    assert sorted(c["key"] for c in out["candidates"]) == ["theirs", "visible"]
    assert_clean(text_of(out), forbidden=[*ALL_IN_TENANT, OTHER_SCOPE, VISIBLE], must_have=OTHER_TENANT)


def test_audit_of_the_other_tenant_holds_only_its_own(world: Cairn, me) -> None:
    theirs = world.audit(OTHER)["entries"]
    assert [(e["action"], e["key"]) for e in theirs] == [("create", "visible"), ("create", "theirs")]
    assert all(e["actor"] == "someone-else" for e in theirs)
    mine = world.audit(me, limit=1000)["entries"]
    assert "someone-else" not in {e["actor"] for e in mine}
    assert world.audit_verify(OTHER)["checked"] == 2


def test_tombstones_of_the_other_tenant(world: Cairn) -> None:
    assert world.tombstones(OTHER, include_lifted=True)["tombstones"] == []


# -- a scope-limited principal ----------------------------------------------------------------------


def test_scope_limited_principal_cannot_read_outside_its_patterns(world: Cairn, store) -> None:
    assert VISIBLE in world.read(LIMITED, S, "visible")["lesson"]["value"]
    before = snapshot(store)
    refused("FORBIDDEN", world.read, LIMITED, ELSEWHERE, "visible")
    refused("FORBIDDEN", world.read, LIMITED, "global", "anything")
    refused("FORBIDDEN", world.history, LIMITED, ELSEWHERE, "visible")
    refused("FORBIDDEN", world.diff, LIMITED, ELSEWHERE, "visible", 1, 1)
    refused("FORBIDDEN", world.list, LIMITED, ELSEWHERE)
    refused("FORBIDDEN", world.export, LIMITED)  # a full backup is account-wide
    refused("FORBIDDEN", world.audit, LIMITED, scope=ELSEWHERE, key="visible")
    assert snapshot(store) == before


def test_scope_limited_principal_cannot_write_outside_its_patterns(world: Cairn, store) -> None:
    before = snapshot(store)
    refused("FORBIDDEN", world.write, LIMITED, ELSEWHERE, "new", "not allowed here")
    refused("FORBIDDEN", world.write, LIMITED, "global", "new", "not allowed here")
    refused("FORBIDDEN", world.write, LIMITED, "repo::acme-corp/x", "new", "pattern is not a prefix")
    refused("FORBIDDEN", world.archive, LIMITED, ELSEWHERE, "visible")
    refused("FORBIDDEN", world.forget, LIMITED, ELSEWHERE, "visible", "no")
    refused("FORBIDDEN", world.feedback, LIMITED, ELSEWHERE, "visible", "helped")
    refused("FORBIDDEN", world.supersede, LIMITED, S, "x", "new text", supersedes=(ELSEWHERE, "visible"))
    refused("FORBIDDEN", world.link, LIMITED, S, "visible", ELSEWHERE, "visible", "related")
    refused("FORBIDDEN", world.purge, LIMITED, expired=True)
    bad = json.dumps({"scope": ELSEWHERE, "key": "x", "value": "via import"})
    out = world.import_lines(LIMITED, [bad])
    assert [r["code"] for r in out["refused"]] == ["FORBIDDEN"]
    assert snapshot(store) == before
    # Inside its pattern it writes normally.
    assert world.write(LIMITED, "repo::acme/other", "k", "allowed")["action"] == "created"


def test_scope_limited_list_and_exports_never_include_other_scopes(world: Cairn) -> None:
    out = world.list(LIMITED)
    assert {lesson["scope"] for lesson in out["lessons"]} == {S}
    assert_clean(text_of(out), forbidden=[*ALL_IN_TENANT, OTHER_SCOPE, OTHER_TENANT])
    assert_clean(
        "\n".join(world.export(LIMITED, active_only=True)), forbidden=[*ALL_IN_TENANT, OTHER_SCOPE, OTHER_TENANT]
    )
    assert_clean(text_of(world.review_queue(LIMITED)), forbidden=[OTHER_SCOPE, OTHER_TENANT])
    audit = world.audit(LIMITED, limit=1000)["entries"]
    assert {e["scope"] for e in audit} <= {S, None}


def test_scope_limited_list_fills_its_limit_from_its_own_scopes(world: Cairn, me, clock) -> None:
    """Other scopes' newer lessons must not crowd the caller's own out of a limited page."""
    clock("2025-01-03T00:00:00Z")
    for i in range(5):
        world.write(me, ELSEWHERE, f"newer-{i}", f"{OTHER_SCOPE} newer lesson {i}")
    out = world.list(LIMITED, limit=2)
    assert len(out["lessons"]) == 2
    assert {lesson["scope"] for lesson in out["lessons"]} == {S}
    assert out["truncated"] is True
    everything = world.list(LIMITED, limit=3)
    assert (len(everything["lessons"]), everything["truncated"]) == (3, False)
    queue = world.review_queue(LIMITED, limit=1)["candidates"]
    assert [c["scope"] for c in queue] == [S]


def test_scope_limited_neighborhood_hides_other_scopes(world: Cairn, me) -> None:
    world.link(me, S, "visible", ELSEWHERE, "visible", "related")
    assert [n["scope"] for n in world.neighborhood(me, S, "visible")["nodes"]] == [ELSEWHERE]
    assert world.neighborhood(LIMITED, S, "visible")["nodes"] == []


# -- forgotten content stays forgotten ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "key"),
    [(S, "tombstoned"), (S, "brand-new-key"), (ELSEWHERE, "k"), ("global", "k"), ("project::p", "k")],
)
def test_forgotten_content_cannot_be_written_back(world: Cairn, me, store, scope: str, key: str) -> None:
    before = snapshot(store)
    value = f"{FORBIDDEN_IN_TENANT['tombstoned'].upper()} WAS FORGOTTEN!"
    refused("TOMBSTONED", world.write, me, scope, key, value)
    refused("TOMBSTONED", world.write, human(me), scope, key, value)
    refused("TOMBSTONED", world.supersede, me, scope, key, value)
    out = world.import_lines(me, [json.dumps({"scope": scope, "key": key, "value": value})])
    assert [r["code"] for r in out["refused"]] == ["TOMBSTONED"]
    assert snapshot(store) == before


def test_forgotten_content_is_not_forgotten_for_another_tenant(world: Cairn) -> None:
    """Tombstones are tenant data: they neither leak nor bind across tenants."""
    value = f"{FORBIDDEN_IN_TENANT['tombstoned']} was forgotten"
    assert world.write(OTHER, S, "theirs-now", value)["action"] == "created"
