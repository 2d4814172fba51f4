"""The reviewer's reads (service/browse.py) on both databases: expired lessons and one lesson's page."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from cairn.core.principal import Principal
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store


@pytest.fixture
def bsvc(store: Store) -> Cairn:
    return Cairn(store, Settings())


@pytest.fixture
def p(bsvc: Cairn) -> Principal:
    me = Principal("t1", "agent-a", user_id=None)
    bsvc.ensure_tenant(me)
    return me


def test_expired_lists_only_lessons_whose_ttl_ran_out(
    bsvc: Cairn, p: Principal, clock: Callable[[str], None]
) -> None:
    day = timedelta(days=1)
    bsvc.write(p, "repo::acme/api", "short", "expires after a day", ttl=day)
    bsvc.write(p, "repo::acme/api", "shorter", "expires after an hour", ttl=timedelta(hours=1))
    bsvc.write(p, "repo::acme/web", "other-scope", "expires too, elsewhere", ttl=day)
    bsvc.write(p, "repo::acme/api", "forever", "never expires")
    bsvc.write(p, "repo::acme/api", "later", "expires in a month", ttl=timedelta(days=30))
    bsvc.write(p, "repo::acme/api", "archived", "archived, and expired", ttl=day)
    bsvc.archive(p, "repo::acme/api", "archived")
    bsvc.write(p, "repo::acme/api", "rejected", "rejected, and expired", ttl=day)
    bsvc.forget(p, "repo::acme/api", "rejected", "wrong")
    assert bsvc.expired(p)["lessons"] == []
    clock("2025-01-03T00:00:00Z")
    out = bsvc.expired(p)
    assert [x["key"] for x in out["lessons"]] == ["other-scope", "short", "shorter"]  # latest expiry first
    assert {x["status"] for x in out["lessons"]} == {"expired"}
    assert out["next_cursor"] is None
    assert [x["key"] for x in bsvc.expired(p, "repo::acme/api")["lessons"]] == ["short", "shorter"]


def test_expired_pages_with_a_cursor_and_refuses_a_bad_one(
    bsvc: Cairn, p: Principal, clock: Callable[[str], None]
) -> None:
    for i in range(5):
        bsvc.write(p, "global", f"k{i}", f"lesson number {i}", ttl=timedelta(hours=i + 1))
    clock("2025-01-02T00:00:00Z")
    first = bsvc.expired(p, limit=2)
    second = bsvc.expired(p, limit=2, cursor=first["next_cursor"])
    third = bsvc.expired(p, limit=2, cursor=second["next_cursor"])
    keys = [x["key"] for page in (first, second, third) for x in page["lessons"]]
    assert keys == ["k4", "k3", "k2", "k1", "k0"] and third["next_cursor"] is None
    with pytest.raises(CairnError) as bad:
        bsvc.expired(p, cursor="not-a-cursor")
    assert bad.value.code == "INVALID_INPUT"
    with pytest.raises(CairnError):
        bsvc.expired(p, limit=0)


def test_expired_respects_tenants_and_scope_limits(bsvc: Cairn, p: Principal, clock: Callable[[str], None]) -> None:
    bsvc.write(p, "repo::acme/api", "api", "api lesson", ttl=timedelta(hours=1))
    bsvc.write(p, "repo::acme/web", "web", "web lesson", ttl=timedelta(hours=1))
    other = Principal("t2", "someone")
    bsvc.ensure_tenant(other)
    clock("2025-01-02T00:00:00Z")
    assert bsvc.expired(other)["lessons"] == []
    narrow = Principal(p.tenant_id, p.actor, scope_patterns=("repo::acme/web",))
    assert [x["key"] for x in bsvc.expired(narrow)["lessons"]] == ["web"]
    with pytest.raises(CairnError) as refused:
        bsvc.expired(narrow, "repo::acme/api")
    assert refused.value.code == "FORBIDDEN"


def test_lesson_detail_shows_any_state_but_rejected(bsvc: Cairn, p: Principal, clock: Callable[[str], None]) -> None:
    bsvc.write(p, "global", "active", "an active lesson")
    bsvc.write(p, "global", "archived", "an archived lesson")
    bsvc.archive(p, "global", "archived")
    bsvc.write(p, "global", "expiring", "an expiring lesson", ttl=timedelta(hours=1))
    bsvc.write(p, "global", "rejected", "a rejected lesson")
    bsvc.forget(p, "global", "rejected", "wrong")
    clock("2025-01-02T00:00:00Z")
    assert bsvc.lesson_detail(p, "global", "active")["lesson"]["status"] == "active"
    assert bsvc.lesson_detail(p, "global", "archived")["lesson"]["status"] == "archived"
    assert bsvc.lesson_detail(p, "global", "Expiring")["lesson"]["status"] == "expired"  # keys normalize
    for key in ("rejected", "missing"):
        with pytest.raises(CairnError) as gone:
            bsvc.lesson_detail(p, "global", key)
        assert gone.value.code == "NOT_FOUND"
        assert "a rejected lesson" not in gone.value.message


def test_lesson_detail_is_the_callers_tenant_and_scopes_only(bsvc: Cairn, p: Principal) -> None:
    bsvc.write(p, "repo::acme/api", "mine", "tenant one's lesson")
    other = Principal("t2", "someone")
    bsvc.ensure_tenant(other)
    with pytest.raises(CairnError) as missing:
        bsvc.lesson_detail(other, "repo::acme/api", "mine")
    assert missing.value.code == "NOT_FOUND"
    narrow = Principal(p.tenant_id, p.actor, scope_patterns=("repo::acme/web",))
    with pytest.raises(CairnError) as refused:
        bsvc.lesson_detail(narrow, "repo::acme/api", "mine")
    assert refused.value.code == "FORBIDDEN"
    with pytest.raises(CairnError) as invalid:
        bsvc.lesson_detail(p, "repo:acme/api", "mine")
    assert invalid.value.code == "INVALID_SCOPE"


def test_lesson_detail_lists_links_both_ways_and_hides_what_the_caller_may_not_see(
    bsvc: Cairn, p: Principal
) -> None:
    bsvc.write(p, "repo::acme/api", "hub", "the lesson in the middle")
    bsvc.write(p, "repo::acme/api", "related", "a related lesson")
    bsvc.write(p, "repo::acme/web", "elsewhere", "a lesson in another scope")
    bsvc.write(p, "repo::acme/api", "doomed", "a lesson that will be rejected")
    bsvc.link(p, "repo::acme/api", "hub", "repo::acme/api", "related", "related")
    bsvc.link(p, "repo::acme/web", "elsewhere", "repo::acme/api", "hub", "contradicts")
    bsvc.link(p, "repo::acme/api", "hub", "repo::acme/api", "doomed", "derived_from")
    bsvc.forget(p, "repo::acme/api", "doomed", "wrong")
    bsvc.supersede(p, "repo::acme/api", "hub-v2", "the new middle", supersedes=("repo::acme/api", "hub"))
    out = bsvc.lesson_detail(p, "repo::acme/api", "hub")
    assert out["lesson"]["status"] == "superseded"
    assert out["superseded_by"] == {"scope": "repo::acme/api", "key": "hub-v2"}
    links = {(x["rel"], x["direction"], x["scope"], x["key"]) for x in out["links"]}
    assert links == {
        ("related", "out", "repo::acme/api", "related"),
        ("contradicts", "in", "repo::acme/web", "elsewhere"),
        ("supersedes", "in", "repo::acme/api", "hub-v2"),
    }
    assert out["hidden_links"] == 1  # the rejected one: not even its address is shown
    narrow = Principal(p.tenant_id, p.actor, scope_patterns=("repo::acme/api",))
    seen = bsvc.lesson_detail(narrow, "repo::acme/api", "hub")
    assert {x["key"] for x in seen["links"]} == {"related", "hub-v2"} and seen["hidden_links"] == 2
