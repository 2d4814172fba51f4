"""Accounts, orgs, roles, invites, tokens, bindings and limits through the service, on both databases.

The org ``acme`` of every test: bob owns it, carol is an admin, dave a member, erin a viewer. Each
principal is what a request presenting that person's token resolves to (``resolve_token``), so the
permissions checked are the ones a real request would carry. Each capability is tested both ways:
the role that may, and the role just below it that may not (and a refusal changes nothing).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from cairn.core.principal import Principal
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.contract import refused, rows, snapshot

API = "repo::acme/api"
WEB = "repo::acme/web"
BOUND = "repo::acme/*"


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Search without loading the real model (the tiny deterministic one the other suites use)."""
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")


# -- helpers ------------------------------------------------------------------------------------


def new_user(svc: Cairn, me: Principal, name: str) -> Principal:
    """An account, as the request presenting its first (personal, admin) token resolves it."""
    return svc.resolve_token(svc.create_user(me, name)["token"])


def join(svc: Cairn, inviter: Principal, who: Principal, role: str, slug: str = "acme") -> None:
    svc.org_accept(who, svc.org_invite(inviter, slug, role)["code"])


def mint(
    svc: Cairn, p: Principal, perm: str, org: str | None = "acme", session: str | None = None, **kw: Any
) -> tuple[Principal, dict[str, Any]]:
    out = svc.token_create(p, perm=perm, org=org, **kw)
    return svc.resolve_token(out["token"], session=session), out


def as_org(svc: Cairn, p: Principal, perm: str, org: str = "acme", **kw: Any) -> Principal:
    return mint(svc, p, perm, org, **kw)[0]


def org_lessons(store: Store, tenant: str = "org:acme") -> list[dict[str, Any]]:
    return rows(store, "SELECT scope, key, value, archived_at FROM lessons WHERE tenant_id = :t ORDER BY key", t=tenant)


def strings_in(snap: dict[str, list[tuple[Any, ...]]]) -> list[tuple[str, str]]:
    return [(t, v) for t, rs in snap.items() for r in rs for v in r if isinstance(v, str)]


def unchanged(store: Store, before: dict[str, Any]) -> None:
    assert snapshot(store) == before


@dataclass
class Acme:
    bob: Principal  # owner
    carol: Principal  # admin
    dave: Principal  # member
    erin: Principal  # viewer


@pytest.fixture
def acme(svc: Cairn, me: Principal) -> Acme:
    bob, carol, dave, erin = (new_user(svc, me, n) for n in ("bob", "carol", "dave", "erin"))
    assert svc.org_create(bob, "acme")["tenant"] == "org:acme"
    join(svc, bob, carol, "admin")
    join(svc, bob, dave, "member")
    join(svc, bob, erin, "viewer")
    return Acme(bob, carol, dave, erin)


def test_the_org_has_its_roles(svc: Cairn, acme: Acme) -> None:
    members = svc.org_members(acme.dave, "acme")["members"]
    assert {m["user"]: m["role"] for m in members} == {
        "bob": "owner",
        "carol": "admin",
        "dave": "member",
        "erin": "viewer",
    }
    assert svc.org_list(acme.erin)["orgs"] == [{"org": "acme", "name": "acme", "role": "viewer"}]


def test_the_service_says_who_manages_members_and_that_answer_holds(svc: Cairn, acme: Acme) -> None:
    """``can_manage`` is the service's answer (a surface shows the controls from it): the owner and the
    admin manage, the member and the viewer do not, and what the answer denies is refused."""
    answers = {name: svc.org_members(p, "acme")["can_manage"] for name, p in vars(acme).items()}
    assert answers == {"bob": True, "carol": True, "dave": False, "erin": False}
    refused("FORBIDDEN", svc.member_role, acme.dave, "acme", "erin", "member")
    assert svc.member_role(acme.carol, "acme", "erin", "member")["role"] == "member"


# -- what each role may do with lessons --------------------------------------------------------


def test_members_write_archive_and_restore_in_the_org(svc: Cairn, acme: Acme, store: Store) -> None:
    dave = as_org(svc, acme.dave, "write")
    assert dave.tenant_id == "org:acme"
    assert svc.write(dave, API, "retry", "Retry with jitter.")["action"] == "created"
    assert [r["key"] for r in org_lessons(store)] == ["retry"]
    assert svc.archive(dave, API, "retry")["changed"] is True
    assert org_lessons(store)[0]["archived_at"] is not None
    assert svc.restore(dave, API, "retry")["changed"] is True
    assert org_lessons(store)[0]["archived_at"] is None
    assert svc.read(dave, API, "retry")["lesson"]["value"] == "Retry with jitter."
    # Nothing went to dave's own store.
    assert org_lessons(store, "dave") == []


def test_viewers_read_and_search_but_cannot_write_or_archive(svc: Cairn, acme: Acme, store: Store) -> None:
    bob = as_org(svc, acme.bob, "write")
    svc.write(bob, API, "retry", "Billing retries need jittered exponential backoff.")
    erin = as_org(svc, acme.erin, "read")
    assert svc.read(erin, API, "retry")["lesson"]["value"].startswith("Billing retries")
    assert [x["key"] for x in svc.list(erin, API)["lessons"]] == ["retry"]
    hits = svc.search(erin, "jittered backoff", mode="fts")["results"]
    assert [h["key"] for h in hits] == ["retry"]
    before = snapshot(store)
    refused("FORBIDDEN", svc.write, erin, API, "mine", "A viewer's lesson.")
    refused("FORBIDDEN", svc.write, erin, API, "retry", "Overwritten by a viewer.")
    refused("FORBIDDEN", svc.archive, erin, API, "retry")
    refused("FORBIDDEN", svc.restore, erin, API, "retry")
    refused("FORBIDDEN", svc.forget, erin, API, "retry", "viewer says so")
    unchanged(store, before)


def test_a_viewer_cannot_mint_a_token_above_read(svc: Cairn, acme: Acme, store: Store) -> None:
    before = snapshot(store)
    refused("FORBIDDEN", svc.token_create, acme.erin, perm="write", org="acme")
    refused("FORBIDDEN", svc.token_create, acme.erin, perm="admin", org="acme")
    refused("FORBIDDEN", svc.token_create, acme.dave, perm="admin", org="acme")
    unchanged(store, before)
    assert svc.token_create(acme.erin, perm="read", org="acme")["perm"] == "read"
    assert svc.token_create(acme.dave, perm="write", org="acme")["perm"] == "write"


def _archived_org_lesson(svc: Cairn, acme: Acme) -> None:
    bob = as_org(svc, acme.bob, "write")
    svc.write(bob, API, "old", "An old lesson to erase.")
    svc.archive(bob, API, "old")


def test_members_cannot_purge(svc: Cairn, acme: Acme, store: Store) -> None:
    _archived_org_lesson(svc, acme)
    dave = as_org(svc, acme.dave, "write")
    before = snapshot(store)
    refused("FORBIDDEN", svc.purge, dave, archived=True, older_than=timedelta(0))
    unchanged(store, before)
    assert len(org_lessons(store)) == 1


def test_admins_purge_archived_lessons(svc: Cairn, acme: Acme, store: Store) -> None:
    _archived_org_lesson(svc, acme)
    carol = as_org(svc, acme.carol, "admin")
    out = svc.purge(carol, archived=True, older_than=timedelta(0))
    assert (out["purged"], out["lessons"]) == (1, [{"scope": API, "key": "old"}])
    assert org_lessons(store) == []
    assert rows(store, "SELECT * FROM lesson_versions WHERE tenant_id = 'org:acme'") == []


# -- managing the org --------------------------------------------------------------------------


def test_admins_invite_change_roles_of_viewers_and_members_and_bind(svc: Cairn, me: Principal, acme: Acme) -> None:
    frank = new_user(svc, me, "frank")
    assert svc.org_invite(acme.carol, "acme", "member")["role"] == "member"
    join(svc, acme.carol, frank, "viewer")
    assert svc.member_role(acme.carol, "acme", "dave", "viewer") == {
        "org": "acme",
        "user": "dave",
        "role": "viewer",
        "was": "member",
    }
    assert svc.member_role(acme.carol, "acme", "erin", "member")["role"] == "member"
    assert svc.org_bind(acme.carol, "acme", BOUND)["bound"] is True
    assert svc.member_remove(acme.carol, "acme", "frank")["removed"] is True
    roles = {m["user"]: m["role"] for m in svc.org_members(acme.carol, "acme")["members"]}
    assert roles == {"bob": "owner", "carol": "admin", "dave": "viewer", "erin": "member"}
    assert svc.org_bindings(acme.dave, "acme")["bindings"] == [BOUND]


def test_members_cannot_invite_bind_or_change_roles(svc: Cairn, acme: Acme, store: Store) -> None:
    before = snapshot(store)
    refused("FORBIDDEN", svc.org_invite, acme.dave, "acme", "viewer")
    refused("FORBIDDEN", svc.org_bind, acme.dave, "acme", BOUND)
    refused("FORBIDDEN", svc.member_role, acme.dave, "acme", "erin", "member")
    refused("FORBIDDEN", svc.member_remove, acme.dave, "acme", "erin")
    refused("FORBIDDEN", svc.org_invite, acme.erin, "acme", "viewer")
    refused("FORBIDDEN", svc.org_rename, acme.dave, "acme", "Acme Inc")
    unchanged(store, before)


def test_an_admin_cannot_touch_owners_or_admins_nor_promote(
    svc: Cairn, me: Principal, acme: Acme, store: Store
) -> None:
    frank = new_user(svc, me, "frank")
    join(svc, acme.bob, frank, "admin")
    before = snapshot(store)
    refused("FORBIDDEN", svc.member_role, acme.carol, "acme", "bob", "member")
    refused("FORBIDDEN", svc.member_remove, acme.carol, "acme", "bob")
    refused("FORBIDDEN", svc.member_role, acme.carol, "acme", "frank", "member")
    refused("FORBIDDEN", svc.member_remove, acme.carol, "acme", "frank")
    refused("FORBIDDEN", svc.member_role, acme.carol, "acme", "dave", "admin")
    refused("FORBIDDEN", svc.member_role, acme.carol, "acme", "dave", "owner")
    refused("FORBIDDEN", svc.member_role, acme.carol, "acme", "carol", "owner")
    refused("FORBIDDEN", svc.org_invite, acme.carol, "acme", "admin")
    refused("FORBIDDEN", svc.org_invite, acme.carol, "acme", "owner")
    unchanged(store, before)


def test_owners_manage_everyone(svc: Cairn, me: Principal, acme: Acme) -> None:
    frank = new_user(svc, me, "frank")
    join(svc, acme.bob, frank, "admin")
    join(svc, acme.bob, new_user(svc, me, "gina"), "owner")
    assert svc.member_role(acme.bob, "acme", "carol", "member")["was"] == "admin"
    assert svc.member_role(acme.bob, "acme", "dave", "admin")["role"] == "admin"
    assert svc.member_role(acme.bob, "acme", "erin", "owner")["role"] == "owner"
    assert svc.member_remove(acme.bob, "acme", "frank")["removed"] is True
    assert svc.member_remove(acme.bob, "acme", "gina")["removed"] is True  # another owner
    roles = {m["user"]: m["role"] for m in svc.org_members(acme.bob, "acme")["members"]}
    assert roles == {"bob": "owner", "carol": "member", "dave": "admin", "erin": "owner"}


def test_only_an_owner_deletes_the_org_and_only_with_confirm(
    svc: Cairn, me: Principal, acme: Acme, store: Store
) -> None:
    bob, bob_out = mint(svc, acme.bob, "admin")
    dave, dave_out = mint(svc, acme.dave, "write", session="s-1")
    svc.write(bob, API, "retry", "Retry billing calls with jittered backoff.", tags=["billing"])
    svc.write(dave, WEB, "cache", "Bust the CDN cache after deploys.")
    svc.write(dave, WEB, "cache", "Bust the CDN cache after every deploy.")
    svc.archive(dave, WEB, "cache")
    svc.link(bob, API, "retry", WEB, "cache", "related")
    frank = new_user(svc, me, "frank")
    open_code = svc.org_invite(acme.bob, "acme", "member")["code"]
    before = snapshot(store)
    refused("FORBIDDEN", svc.org_delete, acme.carol, "acme", "acme")  # an admin
    refused("FORBIDDEN", svc.org_delete, acme.dave, "acme", "acme")
    for confirm in (None, "", "ACME", "org:acme", "acme "):
        refused("INVALID_INPUT", svc.org_delete, acme.bob, "acme", confirm)
    unchanged(store, before)
    assert len(org_lessons(store)) == 2

    out = svc.org_delete(acme.bob, "acme", "acme")
    assert (out["deleted"], out["lessons_erased"]) == (True, 2)
    assert org_lessons(store) == []
    assert rows(store, "SELECT * FROM lesson_versions WHERE tenant_id = 'org:acme'") == []
    assert rows(store, "SELECT * FROM memberships WHERE tenant_id = 'org:acme'") == []
    # The content is nowhere in the database (the audit chain keeps hashes only).
    for text in ("jittered backoff", "CDN cache"):
        assert not [(t, v) for t, v in strings_in(snapshot(store)) if text in v], text
    refused("FORBIDDEN", svc.org_accept, frank, open_code)  # its open invites were revoked
    for secret in (bob_out["token"], dave_out["token"]):
        refused("UNAUTHENTICATED", svc.resolve_token, secret)
    for p in (acme.bob, acme.carol, acme.dave, acme.erin):
        assert svc.org_list(p)["orgs"] == []
    refused("NOT_FOUND", svc.org_members, acme.bob, "acme")
    refused("NOT_FOUND", svc.token_create, acme.bob, perm="read", org="acme")
    refused("CONFLICT", svc.org_create, acme.bob, "acme")  # org names are never reused


def test_the_last_owner_cannot_leave_or_be_demoted_until_another_owner_exists(
    svc: Cairn, acme: Acme, store: Store
) -> None:
    before = snapshot(store)
    refused("FORBIDDEN", svc.org_leave, acme.bob, "acme")
    refused("FORBIDDEN", svc.member_role, acme.bob, "acme", "bob", "admin")
    unchanged(store, before)
    svc.member_role(acme.bob, "acme", "carol", "owner")
    bob_token = svc.token_create(acme.bob, perm="admin", org="acme")["token"]
    assert svc.member_role(acme.bob, "acme", "bob", "admin")["was"] == "owner"
    # carol is now the only owner: the same protection holds for her.
    refused("FORBIDDEN", svc.org_leave, acme.carol, "acme")
    refused("FORBIDDEN", svc.member_role, acme.carol, "acme", "carol", "member")
    assert svc.org_leave(acme.bob, "acme")["left"] is True
    refused("UNAUTHENTICATED", svc.resolve_token, bob_token)  # leaving revokes the org tokens
    assert svc.org_list(acme.bob)["orgs"] == []
    assert {m["user"] for m in svc.org_members(acme.carol, "acme")["members"]} == {"carol", "dave", "erin"}


def test_members_and_viewers_may_leave(svc: Cairn, acme: Acme) -> None:
    assert svc.org_leave(acme.erin, "acme")["left"] is True
    assert svc.org_leave(acme.dave, "acme")["left"] is True
    assert {m["user"] for m in svc.org_members(acme.bob, "acme")["members"]} == {"bob", "carol"}


# -- invites -----------------------------------------------------------------------------------


def test_an_invite_is_single_use(svc: Cairn, me: Principal, acme: Acme, store: Store) -> None:
    frank, gina = new_user(svc, me, "frank"), new_user(svc, me, "gina")
    code = svc.org_invite(acme.bob, "acme", "member")["code"]
    assert svc.org_accept(frank, code) == {"org": "acme", "role": "member"}
    before = snapshot(store)
    refused("CONFLICT", svc.org_accept, gina, code)
    unchanged(store, before)
    assert svc.org_list(gina)["orgs"] == []


def test_a_revoked_invite_is_refused(svc: Cairn, me: Principal, acme: Acme, store: Store) -> None:
    frank = new_user(svc, me, "frank")
    inv = svc.org_invite(acme.carol, "acme", "viewer")
    refused("FORBIDDEN", svc.org_revoke_invite, acme.dave, "acme", inv["invite_id"])
    assert svc.org_revoke_invite(acme.carol, "acme", inv["invite_id"])["revoked"] is True
    before = snapshot(store)
    refused("FORBIDDEN", svc.org_accept, frank, inv["code"])
    unchanged(store, before)
    states = {i["id"]: i["state"] for i in svc.org_invites(acme.bob, "acme")["invites"]}
    assert states[inv["invite_id"]] == "revoked"


def test_an_expired_invite_is_refused(svc: Cairn, me: Principal, store: Store, clock) -> None:  # type: ignore[no-untyped-def]
    clock("2025-01-01T00:00:00Z")
    bob, frank, gina = (new_user(svc, me, n) for n in ("bob", "frank", "gina"))
    svc.org_create(bob, "acme")
    early = svc.org_invite(bob, "acme", "member", expires="1h")["code"]
    late = svc.org_invite(bob, "acme", "member", expires="1h")["code"]
    clock("2025-01-01T00:59:00Z")
    assert svc.org_accept(frank, early)["role"] == "member"
    clock("2025-01-01T01:00:01Z")
    before = snapshot(store)
    err = refused("FORBIDDEN", svc.org_accept, gina, late)
    assert "expired" in err.message
    unchanged(store, before)


def test_unknown_codes_and_members_accepting_again(svc: Cairn, me: Principal, acme: Acme) -> None:
    frank = new_user(svc, me, "frank")
    refused("NOT_FOUND", svc.org_accept, frank, "cairn-invite-" + "x" * 32)
    refused("NOT_FOUND", svc.org_accept, frank, "")
    code = svc.org_invite(acme.bob, "acme", "admin")["code"]
    refused("CONFLICT", svc.org_accept, acme.dave, code)  # already a member
    # The refusal did not use the invite up, nor change dave's role.
    assert {m["user"]: m["role"] for m in svc.org_members(acme.bob, "acme")["members"]}["dave"] == "member"
    assert svc.org_accept(frank, code)["role"] == "admin"


def test_invite_codes_are_stored_only_as_hashes(svc: Cairn, acme: Acme, store: Store) -> None:
    inv = svc.org_invite(acme.bob, "acme", "member")
    code = inv["code"]
    assert code.startswith("cairn-invite-")
    stored = rows(store, "SELECT * FROM invites")
    assert len(stored) == 4  # the three of the fixture and this one
    assert not any(isinstance(v, str) and code in v for r in stored for v in r.values())
    mine = next(r for r in stored if r["id"] == inv["invite_id"])
    assert mine["code_hash"] == hashlib.sha256(code.encode()).hexdigest()
    assert not [(t, v) for t, v in strings_in(snapshot(store)) if code in v]
    assert all("code" not in i for i in svc.org_invites(acme.bob, "acme")["invites"])


# -- tokens ------------------------------------------------------------------------------------


def test_token_secrets_are_stored_nowhere(svc: Cairn, me: Principal, store: Store) -> None:
    first = svc.create_user(me, "bob")
    bob = svc.resolve_token(first["token"])
    svc.org_create(bob, "acme")
    second = svc.token_create(bob, perm="write", org="acme", name="ci")
    third = svc.token_create(bob, perm="read", scope_patterns=[API])
    svc.write(svc.resolve_token(second["token"]), API, "k", "A lesson written with the token.")
    everything = strings_in(snapshot(store))
    for out in (first, second, third):
        secret = out["token"]
        assert secret.startswith("cairn_") and len(secret) > 40
        assert not [(t, v) for t, v in everything if secret in v], "a token secret was stored in clear"
        digest = hashlib.sha256(secret.encode()).hexdigest()
        [row] = rows(store, "SELECT * FROM tokens WHERE token_hash = :h", h=digest)
        assert secret.startswith(row["prefix"]) and len(row["prefix"]) < len(secret) // 2
    listed = svc.token_list(bob)["tokens"] + svc.token_list(bob, org="acme")["tokens"]
    assert {t["id"] for t in listed} == {first["token_id"], second["token_id"], third["token_id"]}
    text = repr(listed)
    for out in (first, second, third):
        assert out["token"] not in text
        assert hashlib.sha256(out["token"].encode()).hexdigest() not in text
    assert all("token" not in t and "token_hash" not in t for t in listed)


def test_a_revoked_token_is_refused(svc: Cairn, acme: Acme) -> None:
    out = svc.token_create(acme.dave, perm="write", org="acme")
    assert svc.resolve_token(out["token"]).tenant_id == "org:acme"
    assert svc.token_revoke(acme.dave, out["token_id"])["revoked"] is True
    err = refused("UNAUTHENTICATED", svc.resolve_token, out["token"])
    assert "revoked" in err.message
    assert {t["id"]: t["state"] for t in svc.token_list(acme.dave)["tokens"]}[out["token_id"]] == "revoked"
    refused("UNAUTHENTICATED", svc.resolve_token, "cairn_not-a-real-token")
    refused("UNAUTHENTICATED", svc.resolve_token, "")


def test_an_expired_token_is_refused(svc: Cairn, me: Principal, clock) -> None:  # type: ignore[no-untyped-def]
    clock("2025-01-01T00:00:00Z")
    bob = new_user(svc, me, "bob")
    out = svc.token_create(bob, perm="write", expires="1h")
    clock("2025-01-01T00:59:00Z")
    assert "write" in svc.resolve_token(out["token"]).permissions
    clock("2025-01-01T01:00:01Z")
    err = refused("UNAUTHENTICATED", svc.resolve_token, out["token"])
    assert "expired" in err.message


def test_demotion_disarms_a_token_at_once_and_removal_kills_it(svc: Cairn, acme: Acme, store: Store) -> None:
    secret = svc.token_create(acme.dave, perm="write", org="acme")["token"]
    svc.write(svc.resolve_token(secret), API, "first", "Written while a member.")
    svc.member_role(acme.bob, "acme", "dave", "viewer")
    demoted = svc.resolve_token(secret)
    assert demoted.permissions == {"read"}
    before = snapshot(store)
    refused("FORBIDDEN", svc.write, demoted, API, "second", "Written after the demotion.")
    unchanged(store, before)
    assert svc.read(demoted, API, "first")["lesson"]["value"] == "Written while a member."
    svc.member_remove(acme.bob, "acme", "dave")
    refused("UNAUTHENTICATED", svc.resolve_token, secret)


def test_a_read_token_cannot_write(svc: Cairn, acme: Acme, store: Store) -> None:
    writer = as_org(svc, acme.bob, "write")
    svc.write(writer, API, "k", "A lesson.")
    reader = as_org(svc, acme.bob, "read")  # an owner's read token is still a read token
    assert reader.permissions == {"read"}
    before = snapshot(store)
    refused("FORBIDDEN", svc.write, reader, API, "k2", "Another lesson.")
    refused("FORBIDDEN", svc.archive, reader, API, "k")
    unchanged(store, before)
    assert svc.read(reader, API, "k")["lesson"]["value"] == "A lesson."


def test_a_scope_limited_token_stays_inside_its_scopes(svc: Cairn, acme: Acme, store: Store) -> None:
    full = as_org(svc, acme.bob, "admin")
    svc.write(full, WEB, "outside", "A lesson outside the token's scopes.")
    narrow = as_org(svc, acme.bob, "admin", scope_patterns=[API])
    assert narrow.scope_patterns == (API,)
    assert svc.write(narrow, API, "inside", "A lesson inside.")["action"] == "created"
    assert svc.read(narrow, API, "inside")["lesson"]["value"] == "A lesson inside."
    assert [x["key"] for x in svc.list(narrow)["lessons"]] == ["inside"]
    assert list(svc.export(narrow, scope=API))
    before = snapshot(store)
    refused("FORBIDDEN", svc.write, narrow, WEB, "x", "A lesson outside.")
    refused("FORBIDDEN", svc.read, narrow, WEB, "outside")
    refused("FORBIDDEN", svc.archive, narrow, WEB, "outside")
    refused("FORBIDDEN", svc.list, narrow, WEB)
    refused("FORBIDDEN", svc.token_create, narrow, perm="read", org="acme")
    refused("FORBIDDEN", svc.token_create, narrow, perm="read", org="acme", scope_patterns=[API])
    refused("FORBIDDEN", svc.purge, narrow, archived=True, older_than=timedelta(0))
    refused("FORBIDDEN", svc.export, narrow)
    refused("FORBIDDEN", svc.reindex, narrow)
    refused("FORBIDDEN", svc.org_invite, narrow, "acme", "viewer")
    unchanged(store, before)
    # A personal scope-limited admin token cannot make orgs or tokens either.
    personal = as_org(svc, acme.bob, "admin", org=None, scope_patterns=[API])
    assert personal.tenant_id == "bob"
    refused("FORBIDDEN", svc.org_create, personal, "zeta")
    refused("FORBIDDEN", svc.token_create, personal, perm="read")
    refused("FORBIDDEN", svc.org_accept, personal, svc.org_invite(acme.bob, "acme", "viewer")["code"])
    unchanged_orgs = svc.org_list(acme.bob)["orgs"]
    assert [o["org"] for o in unchanged_orgs] == ["acme"]


def test_a_branch_pattern_keeps_the_branchs_case(svc: Cairn, me: Principal, store: Store) -> None:
    """Scopes keep a branch's case (``Feature/X`` and ``feature/x`` are different branches), and so
    does a scope pattern (``core.scope._pattern_regex``): a token limited to a branch works on it."""
    bob = new_user(svc, me, "bob")
    branch = "branch::acme/api::Feature/Login"
    assert svc.write(bob, branch, "k", "Written with the account's token.")["lesson"]["scope"] == branch
    for pattern in (branch, "branch::acme/api::Feature/*"):
        out = svc.token_create(bob, perm="write", scope_patterns=[pattern])
        narrow = svc.resolve_token(out["token"])
        assert narrow.can_see(branch), (pattern, out["scope_patterns"])
        assert svc.read(narrow, branch, "k")["lesson"]["value"] == "Written with the account's token."
    # The lowercase branch is another branch, outside the token's scopes.
    refused("FORBIDDEN", svc.read, narrow, "branch::acme/api::feature/login", "k")


def test_a_token_cannot_reach_another_tenant(svc: Cairn, me: Principal, store: Store) -> None:
    bob, carol = new_user(svc, me, "bob"), new_user(svc, me, "carol")
    secret_text = "Carol's private lesson: the vault key rotates on Fridays."
    svc.write(carol, API, "vault", secret_text)
    svc.org_create(carol, "zeta")
    zeta = as_org(svc, carol, "admin", org="zeta")
    svc.write(zeta, WEB, "zeta-only", "Zeta's private lesson about the deploy freeze.")
    seen: list[Any] = []
    for scope, key in ((API, "vault"), (WEB, "zeta-only")):
        err = refused("NOT_FOUND", svc.read, bob, scope, key)
        seen.append(err.message)
    seen.append(svc.list(bob))
    seen.append(svc.list(bob, API))
    seen.append(svc.search(bob, "vault key rotates Fridays", mode="fts"))
    seen.append(svc.search(bob, "deploy freeze", mode="fts"))
    seen.append(list(svc.export(bob)))
    for out in seen[2:6]:
        assert not out.get("lessons") and not out.get("results")
    assert "private lesson" not in repr(seen)  # the queries echo back; the lessons' text must not
    refused("NOT_FOUND", svc.token_create, bob, perm="read", org="zeta")
    refused("NOT_FOUND", svc.org_members, bob, "zeta")
    refused("NOT_FOUND", svc.org_invite, bob, "zeta", "viewer")
    refused("FORBIDDEN", svc.token_list, bob, org="zeta")
    # A token of carol's account is carol's; bob's requests never get carol's principal.
    assert svc.read(carol, API, "vault")["lesson"]["value"] == secret_text


def test_a_member_cannot_revoke_another_members_token(svc: Cairn, acme: Acme, store: Store) -> None:
    erin_out = svc.token_create(acme.erin, perm="read", org="acme")
    carol_out = svc.token_create(acme.carol, perm="admin", org="acme")
    bob_out = svc.token_create(acme.bob, perm="admin", org="acme")
    before = snapshot(store)
    for victim in (erin_out, carol_out, bob_out):
        with pytest.raises(CairnError) as info:
            svc.token_revoke(acme.dave, victim["token_id"])
        assert info.value.code in ("FORBIDDEN", "NOT_FOUND"), info.value
    # An admin cannot revoke the owner's token either.
    refused("FORBIDDEN", svc.token_revoke, acme.carol, bob_out["token_id"])
    unchanged(store, before)
    for out in (erin_out, carol_out, bob_out):
        assert svc.resolve_token(out["token"]).tenant_id == "org:acme"
    # An admin may revoke a viewer's token, and anyone their own.
    assert svc.token_revoke(acme.carol, erin_out["token_id"])["revoked"] is True
    refused("UNAUTHENTICATED", svc.resolve_token, erin_out["token"])
    assert svc.token_revoke(acme.bob, bob_out["token_id"])["revoked"] is True


def test_an_outsider_learns_nothing_about_an_orgs_tokens(svc: Cairn, me: Principal, acme: Acme, store: Store) -> None:
    """Revoking a token of an org you are not in answers exactly like revoking one that does not exist.

    "A non-member learns nothing about it": the answer must not tell an outsider that token N exists,
    nor that it belongs to an org, and it must be the same on both databases.
    """
    frank = new_user(svc, me, "frank")
    erin_out = svc.token_create(acme.erin, perm="read", org="acme")
    before = snapshot(store)
    missing = refused("NOT_FOUND", svc.token_revoke, frank, 999_999)
    probe = refused("NOT_FOUND", svc.token_revoke, frank, erin_out["token_id"])
    assert "member" not in probe.message and "org" not in probe.message, probe.message
    assert probe.message.replace(str(erin_out["token_id"]), "N") == missing.message.replace("999999", "N")
    unchanged(store, before)
    assert svc.resolve_token(erin_out["token"]).tenant_id == "org:acme"


def test_a_member_cannot_list_the_orgs_tokens(svc: Cairn, acme: Acme) -> None:
    svc.token_create(acme.dave, perm="write", org="acme")
    refused("FORBIDDEN", svc.token_list, acme.dave, org="acme")
    listed = svc.token_list(acme.carol, org="acme")["tokens"]
    assert [(t["user"], t["tenant"]) for t in listed] == [("dave", "org:acme")]


# -- scope bindings ----------------------------------------------------------------------------


def test_a_members_personal_write_on_a_bound_scope_lands_in_the_org(svc: Cairn, acme: Acme, store: Store) -> None:
    svc.org_bind(acme.bob, "acme", BOUND)
    out = svc.write(acme.dave, API, "retry", "Retry with jitter.")
    assert out["routed_to"] == "org:acme"
    assert [r["key"] for r in org_lessons(store)] == ["retry"]
    assert org_lessons(store, "dave") == []
    refused("NOT_FOUND", svc.read, acme.dave, API, "retry")  # not in dave's own store
    reader = as_org(svc, acme.erin, "read")
    assert svc.read(reader, API, "retry")["lesson"]["value"] == "Retry with jitter."
    # An unbound scope stays personal.
    out = svc.write(acme.dave, "repo::dave/dotfiles", "alias", "Alias ll to ls -la.")
    assert "routed_to" not in out
    assert [r["key"] for r in org_lessons(store, "dave")] == ["alias"]


def test_write_many_routes_each_lesson_on_a_bound_scope_to_the_org(svc: Cairn, acme: Acme, store: Store) -> None:
    svc.org_bind(acme.bob, "acme", BOUND)
    out = svc.write_many(
        acme.dave,
        [
            {"scope": "repo::dave/dotfiles", "key": "alias", "value": "Alias ll to ls -la."},
            {"scope": API, "key": "retry", "value": "Retry with jitter."},
            {"scope": "repo::dave/dotfiles", "key": "editor", "value": "EDITOR is nvim."},
        ],
    )
    assert [r.get("routed_to") for r in out["results"]] == [None, "org:acme", None]
    assert [r["key"] for r in org_lessons(store)] == ["retry"]
    assert [r["key"] for r in org_lessons(store, "dave")] == ["alias", "editor"]
    assert svc.audit_verify(as_org(svc, acme.bob, "admin"))["ok"]


def test_a_viewers_write_on_a_bound_scope_is_not_routed(svc: Cairn, acme: Acme, store: Store) -> None:
    svc.org_bind(acme.bob, "acme", BOUND)
    out = svc.write(acme.erin, API, "note", "A viewer's own note.")
    assert "routed_to" not in out
    assert [r["key"] for r in org_lessons(store, "erin")] == ["note"]
    assert org_lessons(store) == []


def test_a_personal_read_token_is_not_routed_either(svc: Cairn, acme: Acme, store: Store) -> None:
    svc.org_bind(acme.bob, "acme", BOUND)
    reader = as_org(svc, acme.dave, "read", org=None)
    before = snapshot(store)
    refused("FORBIDDEN", svc.write, reader, API, "x", "Written with a read token.")
    unchanged(store, before)


def test_a_members_personal_supersede_on_a_bound_scope_lands_in_the_org(svc: Cairn, acme: Acme, store: Store) -> None:
    """Supersede writes a lesson: on a bound scope it goes where a plain write goes (docs/teams.md)."""
    svc.org_bind(acme.bob, "acme", BOUND)
    assert svc.write(acme.dave, API, "retry", "Retry three times.")["routed_to"] == "org:acme"
    out = svc.supersede(acme.dave, API, "retry", "Retry with jittered backoff, five times at most.")
    assert out.get("routed_to") == "org:acme", out
    assert org_lessons(store, "dave") == []
    assert [r["value"] for r in org_lessons(store)] == ["Retry with jittered backoff, five times at most."]


def test_viewers_list_members_and_bindings(svc: Cairn, acme: Acme) -> None:
    svc.org_bind(acme.carol, "acme", BOUND)
    assert svc.org_bindings(acme.erin, "acme")["bindings"] == [BOUND]
    assert len(svc.org_members(acme.erin, "acme")["members"]) == 4
    refused("FORBIDDEN", svc.org_invites, acme.erin, "acme")
    refused("FORBIDDEN", svc.org_invites, acme.dave, "acme")
    assert len(svc.org_invites(acme.carol, "acme")["invites"]) == 3


def test_a_pattern_binds_to_one_org_only(svc: Cairn, me: Principal, acme: Acme, store: Store) -> None:
    svc.org_bind(acme.bob, "acme", BOUND)
    refused("CONFLICT", svc.org_bind, acme.carol, "acme", BOUND)
    frank = new_user(svc, me, "frank")  # not in acme: cannot even see its bindings
    svc.org_create(frank, "zeta")
    before = snapshot(store)
    refused("CONFLICT", svc.org_bind, frank, "zeta", BOUND)
    refused("CONFLICT", svc.org_bind, frank, "zeta", "REPO::ACME/*")  # patterns are compared lowercased
    unchanged(store, before)
    svc.org_create(acme.carol, "yolo")
    refused("CONFLICT", svc.org_bind, acme.carol, "yolo", BOUND)
    assert rows(store, "SELECT tenant_id, pattern FROM scope_bindings") == [{"tenant_id": "org:acme", "pattern": BOUND}]


def test_unbinding_stops_routing(svc: Cairn, acme: Acme, store: Store) -> None:
    svc.org_bind(acme.bob, "acme", BOUND)
    assert svc.write(acme.dave, API, "one", "Routed to the org.")["routed_to"] == "org:acme"
    refused("FORBIDDEN", svc.org_unbind, acme.dave, "acme", BOUND)
    assert svc.org_unbind(acme.carol, "acme", BOUND)["bound"] is False
    assert "routed_to" not in svc.write(acme.dave, API, "two", "Stays personal.")
    assert [r["key"] for r in org_lessons(store)] == ["one"]
    assert [r["key"] for r in org_lessons(store, "dave")] == ["two"]
    refused("NOT_FOUND", svc.org_unbind, acme.carol, "acme", BOUND)


# -- operator-only -----------------------------------------------------------------------------


def test_only_the_operator_creates_accounts_and_sets_limits(
    svc: Cairn, me: Principal, acme: Acme, store: Store
) -> None:
    org_admin = as_org(svc, acme.bob, "admin")
    operator_token = as_org(svc, me, "admin", org=None)  # even a token of the operator's own account
    assert operator_token.user_id == "local" and operator_token.token_id is not None
    before = snapshot(store)
    for p in (acme.bob, acme.carol, org_admin, operator_token):
        refused("FORBIDDEN", svc.create_user, p, "mallory")
        refused("FORBIDDEN", svc.limits_set, p, "bob", max_lessons=1000)
        refused("FORBIDDEN", svc.limits_set, p, "org:acme", max_lessons=1000)
        refused("FORBIDDEN", svc.limits_show, p, "dave")
    unchanged(store, before)
    assert svc.create_user(me, "mallory")["user"] == "mallory"
    assert svc.limits_set(me, "bob", max_lessons=1000)["limits"]["max_lessons"] == 1000
    refused("CONFLICT", svc.create_user, me, "mallory")
    refused("CONFLICT", svc.create_user, me, "local")
    refused("INVALID_INPUT", svc.create_user, me, "Mallory Smith")


# -- limits ------------------------------------------------------------------------------------


def test_max_lessons_refuses_a_new_lesson_and_changes_nothing(svc: Cairn, me: Principal, store: Store) -> None:
    bob = new_user(svc, me, "bob")
    svc.limits_set(me, "bob", max_lessons=2)
    svc.write(bob, API, "one", "The first lesson.")
    svc.write(bob, API, "two", "The second lesson.")
    before = snapshot(store)
    err = refused("LIMIT", svc.write, bob, API, "three", "The third lesson.")
    assert err.data["limit"] == "max_lessons" and err.data["allowed"] == 2
    unchanged(store, before)
    # At the limit, an existing lesson still recurs and can be edited.
    assert svc.write(bob, API, "one", "The first lesson.")["action"] == "recurred"
    assert svc.write(bob, API, "two", "The second lesson, edited.")["action"] == "updated"
    assert svc.limits_show(bob)["lessons"] == 2


def test_max_lessons_still_lets_known_content_recur_under_a_new_key(svc: Cairn, me: Principal, store: Store) -> None:
    """The same content written again in the same scope is a recurrence of the stored lesson (no new row)."""
    bob = new_user(svc, me, "bob")
    svc.write(bob, API, "one", "The first lesson.")
    # Without a limit, this write adds no lesson: it counts a recurrence of "one".
    out = svc.write(bob, API, "one-again", "The first lesson.")
    assert (out["action"], out["lesson"]["key"]) == ("recurred", "one")
    assert len(org_lessons(store, "bob")) == 1
    svc.limits_set(me, "bob", max_lessons=1)
    out = svc.write(bob, API, "one-again-2", "The first lesson.")
    assert (out["action"], out["lesson"]["key"]) == ("recurred", "one")


def test_max_value_bytes(svc: Cairn, me: Principal, store: Store) -> None:
    bob = new_user(svc, me, "bob")
    svc.limits_set(me, "bob", max_value_bytes=100)
    assert svc.write(bob, API, "fits", "x" * 100)["action"] == "created"
    before = snapshot(store)
    err = refused("LIMIT", svc.write, bob, API, "big", "x" * 101)
    assert err.data == {"limit": "max_value_bytes", "allowed": 100, "got": 101}
    err = refused("LIMIT", svc.write, bob, API, "wide", "é" * 51)  # 51 characters, 102 bytes
    assert err.data["got"] == 102
    unchanged(store, before)


def test_max_value_bytes_holds_for_imports_too(svc: Cairn, me: Principal, store: Store) -> None:
    """A limit on a lesson's size is a limit on what the store holds, however the lesson arrives."""
    bob, carol = new_user(svc, me, "bob"), new_user(svc, me, "carol")
    svc.write(carol, API, "big", "x" * 101)
    svc.write(carol, API, "small", "y" * 50)
    lines = list(svc.export(carol))
    svc.limits_set(me, "bob", max_value_bytes=100)
    try:
        out = svc.import_lines(bob, lines)
    except CairnError as exc:
        assert exc.code == "LIMIT", exc
    else:
        # Refusing the one record (and keeping the rest) would do as well as refusing the import.
        assert [r["code"] for r in out["refused"]] == ["LIMIT"], out
    sizes = [len(r["value"]) for r in rows(store, "SELECT value FROM lessons WHERE tenant_id = 'bob'")]
    assert all(n <= 100 for n in sizes), sizes


def test_writes_per_minute(svc: Cairn, me: Principal, store: Store, clock) -> None:  # type: ignore[no-untyped-def]
    clock("2025-01-01T00:00:00Z")
    bob = new_user(svc, me, "bob")
    svc.limits_set(me, "bob", writes_per_minute=3)
    clock("2025-01-01T00:10:00Z")
    for i in range(3):
        svc.write(bob, API, f"k{i}", f"Lesson number {i}.")
    before = snapshot(store)
    err = refused("LIMIT", svc.write, bob, API, "k3", "Lesson number 3.")
    assert err.data["limit"] == "writes_per_minute" and err.data["allowed"] == 3
    assert err.data["retry_after"] > 0
    unchanged(store, before)
    clock("2025-01-01T00:11:01Z")
    assert svc.write(bob, API, "k3", "Lesson number 3.")["action"] == "created"


def test_settings_give_the_default_limits_and_an_override_wins(svc: Cairn, me: Principal, store: Store) -> None:
    strict = Cairn(store, Settings(limit_max_lessons=1))
    bob = new_user(strict, me, "bob")
    shown = strict.limits_show(bob)
    assert shown["limits"]["max_lessons"] == 1 and shown["sources"]["max_lessons"] == "default"
    assert shown["limits"]["writes_per_minute"] is None
    strict.write(bob, API, "one", "The first lesson.")
    refused("LIMIT", strict.write, bob, API, "two", "The second lesson.")
    assert svc.write(bob, API, "two", "The second lesson.")["action"] == "created"  # no default there
    out = strict.limits_set(me, "bob", max_lessons=5)
    assert out["sources"]["max_lessons"] == "tenant" and out["limits"]["max_lessons"] == 5
    assert strict.limits_show(me, "bob")["sources"] == {
        "max_lessons": "tenant",
        "max_value_bytes": "default",
        "writes_per_minute": "default",
    }
    assert strict.write(bob, API, "three", "The third lesson.")["action"] == "created"
    cleared = strict.limits_set(me, "bob", max_lessons=0)  # 0 removes the override
    assert cleared["sources"]["max_lessons"] == "default" and cleared["limits"]["max_lessons"] == 1
    refused("LIMIT", strict.write, bob, API, "four", "The fourth lesson.")


def test_limits_set_validates(svc: Cairn, me: Principal) -> None:
    new_user(svc, me, "bob")
    refused("INVALID_INPUT", svc.limits_set, me, "bob")
    refused("INVALID_INPUT", svc.limits_set, me, "bob", max_lessons=-1)
    refused("INVALID_INPUT", svc.limits_set, me, "bob", max_value_bytes=65537)
    refused("NOT_FOUND", svc.limits_set, me, "nobody", max_lessons=1)


def test_org_limits_apply_to_routed_writes(svc: Cairn, me: Principal, acme: Acme, store: Store) -> None:
    svc.org_bind(acme.bob, "acme", BOUND)
    svc.limits_set(me, "org:acme", max_lessons=1)
    assert svc.write(acme.dave, API, "one", "The first org lesson.")["routed_to"] == "org:acme"
    before = snapshot(store)
    refused("LIMIT", svc.write, acme.dave, API, "two", "The second org lesson.")
    unchanged(store, before)


# -- audit -------------------------------------------------------------------------------------


def test_org_actions_are_in_the_orgs_audit_chain(svc: Cairn, me: Principal, acme: Acme) -> None:
    dave_token = svc.token_create(acme.dave, perm="write", org="acme")
    svc.member_role(acme.carol, "acme", "erin", "member")
    svc.token_revoke(acme.carol, dave_token["token_id"])
    svc.org_bind(acme.bob, "acme", BOUND)
    auditor = as_org(svc, acme.bob, "admin")
    entries = svc.audit(auditor)["entries"]
    actions = [e["action"] for e in entries]
    for action in ("org.create", "org.invite", "org.join", "member.role", "token.create", "token.revoke", "org.bind"):
        assert action in actions, (action, actions)
    assert actions[0] == "org.create"
    assert actions.count("org.join") == 3
    joins = [e for e in entries if e["action"] == "org.join"]
    assert [e["detail"]["role"] for e in joins] == ["admin", "member", "viewer"]
    assert [e["actor"] for e in joins] == ["carol", "dave", "erin"]
    role_change = next(e for e in entries if e["action"] == "member.role")
    assert role_change["detail"] == {"user": "erin", "from": "viewer", "to": "member"}
    assert role_change["actor"] == "carol"
    revoke = next(e for e in entries if e["action"] == "token.revoke")
    assert revoke["detail"] == {"token": dave_token["token_id"], "of": "dave"}
    # No secret reaches the ledger.
    assert dave_token["token"] not in repr(entries)
    verified = svc.audit_verify(auditor)
    assert verified["ok"] is True and verified["checked"] == len(entries)
    # A member may read the chain but not verify it (admin); the personal chains are separate.
    member = as_org(svc, acme.dave, "write")
    assert [e["action"] for e in svc.audit(member)["entries"]][: len(actions)] == actions
    refused("FORBIDDEN", svc.audit_verify, member)
    assert "org.create" not in [e["action"] for e in svc.audit(acme.bob)["entries"]]
