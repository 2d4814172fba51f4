"""The scope map: counts per scope of the caller's own tenant, only scopes it may see (both databases)."""

from __future__ import annotations

from cairn.core.principal import Principal
from cairn.service.api import Cairn


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
