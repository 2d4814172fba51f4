"""Negative evals for tenancy through tokens, on both databases: another tenant's lessons never come back.

Two accounts made by the operator (``create_user``), each acting through its own bearer token, and
an org neither of them... belongs to jointly. Every read path is asked for the other tenant's
material by address, by query and in bulk; every write path is pointed at it. What must hold:
nothing of B reaches A, not even as a count in the scope map, and nothing of B changes.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from cairn.core.principal import Principal
from cairn.service.api import Cairn
from tests.contract import refused, snapshot

S = "repo::bob/secret-service"
MARK = "zebra-umbrella-quartz"  # a word only bob's lessons contain


@pytest.fixture(autouse=True)
def _hash_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")


@pytest.fixture
def pair(svc: Cairn, me: Principal) -> tuple[Principal, Principal]:
    alice = svc.resolve_token(svc.create_user(me, "alice")["token"])
    bob = svc.resolve_token(svc.create_user(me, "bob")["token"])
    svc.write(bob, S, "db-password-rotation", f"rotate the {MARK} credentials every Friday")
    svc.write(bob, S, "cache-warmup", f"warm the {MARK} cache before traffic")
    svc.write(bob, "global", "bob-global", f"{MARK} applies everywhere")
    svc.link(bob, S, "db-password-rotation", S, "cache-warmup", "related")
    svc.drain_embeddings(bob)
    svc.write(alice, "global", "alice-own", "alice's own lesson about caches")
    svc.drain_embeddings(alice)
    return alice, bob


def _no_mark(obj: object) -> None:
    if isinstance(obj, dict):  # the question echoed back is the caller's own words
        obj = {k: v for k, v in obj.items() if k not in ("query", "error", "error_text", "text", "terms")}
    assert MARK not in json.dumps(obj, default=str)


def test_tokens_resolve_to_their_own_tenant(pair) -> None:
    alice, bob = pair
    assert (alice.tenant_id, alice.user_id) == ("alice", "alice")
    assert (bob.tenant_id, bob.user_id) == ("bob", "bob")


def test_reads_by_address_find_nothing(svc: Cairn, pair) -> None:
    alice, _ = pair
    refused("NOT_FOUND", svc.read, alice, S, "db-password-rotation")
    refused("NOT_FOUND", svc.history, alice, S, "db-password-rotation")
    refused("NOT_FOUND", svc.neighborhood, alice, S, "db-password-rotation")


def test_bulk_reads_return_nothing_of_the_other_tenant(svc: Cairn, pair) -> None:
    alice, _ = pair
    _no_mark(svc.list(alice))
    _no_mark(svc.list(alice, scope=S))
    _no_mark(svc.search(alice, f"{MARK} credentials", limit=50))
    _no_mark(svc.search(alice, f"{MARK}", mode="fts", limit=50))
    _no_mark(svc.search(alice, "rotate credentials Friday", mode="vector", limit=50))
    _no_mark(svc.recall(alice, f"error: {MARK} credentials rejected"))
    _no_mark(svc.review_queue(alice))
    _no_mark(svc.tombstones(alice, include_lifted=True))
    _no_mark(list(svc.export(alice)))
    audit = svc.audit(alice, limit=1000)
    assert all(e.get("scope") != S for e in audit["entries"]), audit
    assert svc.audit_verify(alice)["ok"] is True


def test_the_scope_map_never_counts_the_other_tenant(svc: Cairn, pair) -> None:
    alice, _ = pair
    out = svc.context(alice, repo="bob/secret-service", branch="main")
    _no_mark(out)
    by_scope = {row["scope"]: row for row in out["scopes"]}
    assert by_scope[S]["eligible"] == 0 and by_scope[S]["loaded"] == 0
    assert by_scope["global"]["eligible"] == 1  # alice's own global lesson only, not bob's
    assert out["eligible"] == 1


def test_writes_aimed_at_the_other_tenant_change_nothing_of_it(svc: Cairn, store, pair) -> None:
    alice, bob = pair
    before = {k: v for k, v in snapshot(store).items() if k in ("lessons", "lesson_versions", "links", "tombstones")}
    bob_rows = {k: [r for r in v if "bob" in r] for k, v in before.items()}
    refused("NOT_FOUND", svc.archive, alice, S, "db-password-rotation")
    refused("NOT_FOUND", svc.restore, alice, S, "db-password-rotation")
    refused("NOT_FOUND", svc.forget, alice, S, "db-password-rotation", "not yours")
    refused("NOT_FOUND", svc.feedback, alice, S, "db-password-rotation", "helped")
    refused("NOT_FOUND", svc.link, alice, S, "db-password-rotation", S, "cache-warmup", "related")
    refused("NOT_FOUND", svc.supersede, alice, S, "new-key", "replacement", supersedes=(S, "db-password-rotation"))
    # A write at bob's address creates alice's own lesson there; bob's is untouched.
    assert svc.write(alice, S, "db-password-rotation", "alice's version")["action"] == "created"
    after = {k: v for k, v in snapshot(store).items() if k in before}
    assert {k: [r for r in v if "bob" in r] for k, v in after.items()} == bob_rows
    assert svc.read(bob, S, "db-password-rotation")["lesson"]["value"].startswith("rotate the")


def test_an_org_token_sees_the_org_only(svc: Cairn, pair) -> None:
    alice, bob = pair
    svc.org_create(alice, "acme")
    org_token = svc.resolve_token(svc.token_create(alice, perm="write", org="acme")["token"])
    assert org_token.tenant_id == "org:acme"
    svc.write(org_token, "repo::acme/api", "org-lesson", "the org's lesson")
    _no_mark(svc.list(org_token))
    assert [r["key"] for r in svc.list(org_token)["lessons"]] == ["org-lesson"]
    # Alice's personal lessons are not in the org's store either, nor the org's in bob's.
    assert "alice-own" not in json.dumps(svc.list(org_token))
    assert "org-lesson" not in json.dumps(svc.list(bob))
    refused("NOT_FOUND", svc.read, bob, "repo::acme/api", "org-lesson")
    # Bob cannot mint a token for an org he is not in, nor act on it.
    refused("NOT_FOUND", svc.token_create, bob, perm="read", org="acme")
    refused("NOT_FOUND", svc.org_members, bob, "acme")
    refused("NOT_FOUND", svc.org_invite, bob, "acme")


def test_expired_and_revoked_tokens_are_refused(svc: Cairn, pair) -> None:
    alice, _ = pair
    made = svc.token_create(alice, perm="read", expires="1s")
    import time

    time.sleep(1.2)
    assert "expired" in refused("UNAUTHENTICATED", svc.resolve_token, made["token"]).message
    other = svc.token_create(alice, perm="read")
    svc.token_revoke(alice, other["id"])
    assert "revoked" in refused("UNAUTHENTICATED", svc.resolve_token, other["token"]).message
    refused("UNAUTHENTICATED", svc.resolve_token, "cairn_" + "x" * 43)
    refused("UNAUTHENTICATED", svc.resolve_token, "not-a-token")
    assert timedelta(seconds=1)  # expiry parsing accepts seconds


def test_a_tombstone_elsewhere_is_not_described_to_a_scope_limited_token(svc: Cairn, pair) -> None:
    alice, _ = pair
    svc.write(alice, "repo::alice/private", "leaked", "the vault password is in the wiki")
    svc.forget(alice, "repo::alice/private", "leaked", "secret: private-reason-text")
    narrow = svc.resolve_token(svc.token_create(alice, perm="write", scope_patterns=["repo::alice/public"])["token"])
    err = refused("TOMBSTONED", svc.write, narrow, "repo::alice/public", "copy", "the vault password is in the wiki")
    assert "repo::alice/private" not in err.message and "private-reason-text" not in err.message
    assert "reason" not in err.data and "tombstone_id" not in err.data
    # The unrestricted token is told which tombstone and why.
    full = refused("TOMBSTONED", svc.write, alice, "repo::alice/public", "copy", "the vault password is in the wiki")
    assert "private-reason-text" in full.message


def test_import_respects_the_lesson_limit(svc: Cairn, me, pair) -> None:
    alice, _ = pair
    svc.limits_set(me, "alice", max_lessons=3)  # alice holds 1
    lines = [json.dumps({"scope": "global", "key": f"imp-{i}", "value": f"imported lesson {i}"}) for i in range(5)]
    err = refused("LIMIT", svc.import_lines, alice, lines)
    assert err.data["allowed"] == 3
    assert [r["key"] for r in svc.list(alice)["lessons"]] == ["alice-own"]  # the batch was rolled back whole
    svc.limits_set(me, "alice", max_lessons=0)  # 0 removes the override: no limit
    assert svc.import_lines(alice, lines)["created"] == 5
