"""The scope map: counts per scope of the caller's own tenant, only scopes it may see (both databases)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from cairn.core.principal import Principal
from cairn.core.timeparse import utcnow
from cairn.service.api import Cairn
from cairn.service.scopes import counts_query
from cairn.store.engine import Store
from tests.conftest import human


def test_counts_per_scope_and_nothing_of_another_tenant(svc: Cairn, me: Principal) -> None:
    svc.write(me, "repo::acme/api", "a", "first api lesson")
    svc.write(me, "repo::acme/api", "b", "second api lesson")
    svc.write(me, "repo::acme/api", "c", "archived api lesson")
    svc.archive(me, "repo::acme/api", "c")
    svc.write(
        me,
        "global",
        "g",
        "a global lesson",
    )
    svc.forget(me, "global", "g", "wrong")  # rejected: neither active nor archived
    other = Principal("other", "o")
    svc.ensure_tenant(other)
    svc.write(other, "repo::other/x", "x", "someone else's")
    out = svc.scopes(me)
    assert out["scopes"] == [{"scope": "repo::acme/api", "active": 2, "verified": 0, "archived": 1}]
    assert out["total_active"] == 2


def test_a_scope_limited_principal_sees_only_its_scopes(svc: Cairn, me: Principal) -> None:
    svc.write(me, "repo::acme/api", "a", "api lesson")
    svc.write(me, "repo::acme/web", "w", "web lesson")
    narrow = Principal(me.tenant_id, me.actor, scope_patterns=("repo::acme/web",), user_id=me.user_id)
    assert [s["scope"] for s in svc.scopes(narrow)["scopes"]] == ["repo::acme/web"]


def test_expired_lessons_count_neither_active_nor_archived_and_verified_is_active_only(
    svc: Cairn, me: Principal, clock: Callable[[str], None]
) -> None:
    svc.write(me, "repo::acme/api", "keep", "stays active")
    svc.write(me, "repo::acme/api", "ttl", "expires after a day", ttl=timedelta(days=1))
    svc.write(me, "repo::acme/api", "vouched", "a verified lesson")
    svc.verify(human(me), "repo::acme/api", "vouched")
    svc.write(me, "repo::acme/web", "gone", "expires, the scope's only lesson", ttl=timedelta(days=1))
    before = svc.scopes(me)["scopes"]
    assert [(s["scope"], s["active"], s["verified"]) for s in before] == [
        ("repo::acme/api", 3, 1),
        ("repo::acme/web", 1, 0),
    ]
    clock("2025-01-03T00:00:00Z")
    after = svc.scopes(me)
    # An expired lesson is not active, not archived: a scope holding only expired lessons is not listed.
    assert after["scopes"] == [{"scope": "repo::acme/api", "active": 2, "verified": 1, "archived": 0}]
    assert after["total_active"] == 2


def test_the_counts_are_read_from_the_index_alone(store: Store) -> None:
    """SQLite's plan for the map is a covering-index search: no lesson row (and its text) is read."""
    if store.dialect != "sqlite":
        pytest.skip("Postgres picks an index-only scan only once its visibility map is set (after VACUUM)")
    query = counts_query("local", utcnow())
    with store.connect(write=False) as conn:
        sql = str(query.compile(conn.engine, compile_kwargs={"literal_binds": True}))
        plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
    assert "USING COVERING INDEX ix_lessons_tenant_scope_state" in plan, plan
    assert "TEMP B-TREE" not in plan, plan  # already in scope order: no sort for GROUP BY / ORDER BY
