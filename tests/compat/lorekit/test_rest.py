"""LoreKit's REST subset as its CLI and hooks call it, served by Cairn: shapes, Cairn's semantics
under LoreKit's names, tenancy and bad input (LoreKit's error shape, never a 500)."""

from __future__ import annotations

import urllib.parse

import pytest
from sqlalchemy import select

from cairn.service.accounts import secret_hash
from cairn.store.schema import tokens
from tests.compat.lorekit.conftest import LoreKitServer


def q(**params: object) -> str:
    return "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})


def write(lk: LoreKitServer, scope: str, key: str, value: str, token: str | None = None, **extra: object):
    return lk.http("POST", "/memories", {"scope": scope, "key": key, "value": value, **extra}, token=token or lk.alice)


def read(lk: LoreKitServer, scope: str, key: str, token: str | None = None) -> list[dict]:
    r = lk.http("GET", "/memories" + q(scope=scope, key=key, limit=1), token=token or lk.alice)
    assert r.status == 200, r.body
    return r.body["entries"]


def test_health_needs_no_token_and_memories_do(lk: LoreKitServer) -> None:
    assert lk.http("GET", "/health").body == {"status": "ok"}
    r = lk.http("GET", "/memories?limit=1")
    assert r.status == 401 and r.body["code"] == "unauthorized"
    r = lk.http("GET", "/memories?limit=1", token="lk_rw_not-a-real-token")
    assert r.status == 401 and r.body["code"] == "unauthorized"
    assert lk.http("GET", "/memories?limit=1", token=lk.alice).status == 200  # doctor's verifyAuth


def test_write_returns_the_row_and_read_finds_it(lk: LoreKitServer) -> None:
    claims: dict = {"kind": "signal", "host": "claude", "origin_repo": "acme/widget", "origin_commit": "ABCDEF1"}
    claims.update(tags=["ci"], source_agent="claude", origin_pr=7)
    r = write(lk, "global", "run-linter", "always run the linter", **claims)
    assert r.status == 201
    row = r.body
    assert (row["scope"], row["key"], row["value"], row["tags"]) == (
        "global",
        "run-linter",
        "always run the linter",
        ["ci"],
    )
    assert (row["kind"], row["host"], row["origin_repo"], row["origin_commit"], row["origin_pr"]) == (
        "signal", "claude", "acme/widget", "abcdef1", 7,
    )  # fmt: skip
    assert row["seen_count"] == 1 and row["archived_at"] is None and row["source_agent"] == "claude"
    [got] = read(lk, "global", "run-linter")
    assert got["id"] == row["id"] and got["value"] == "always run the linter" and got["kind"] == "signal"


def test_overwrite_is_a_new_version_with_history_kept(lk: LoreKitServer) -> None:
    write(lk, "global", "deploy", "deploy on fridays is fine", host="cursor")
    r = write(lk, "global", "deploy", "never deploy on fridays")
    assert r.status == 200 and r.body["value"] == "never deploy on fridays"
    assert r.body["host"] == "cursor"  # a claim not repeated keeps its value, as LoreKit's coalescing write
    [got] = read(lk, "global", "deploy")
    assert got["value"] == "never deploy on fridays" and got["cairn"]["version"] == 2
    history = lk.svc.history(lk.svc.resolve_token(lk.alice), "global", "deploy")["versions"]
    assert [v["value"] for v in history] == ["deploy on fridays is fine", "never deploy on fridays"]
    same = write(lk, "global", "deploy", "never deploy on fridays")
    assert same.body["seen_count"] == 2  # the same text again is a recurrence


def test_single_colon_scope_gets_the_corrected_form(lk: LoreKitServer) -> None:
    r = write(lk, "repo:acme/widget", "k", "v")
    assert r.status == 400 and "::" in r.body["error"]
    assert r.body["details"]["corrected"] == "repo::acme/widget"
    r = lk.http("GET", "/memories" + q(scope="repo:acme/widget"), token=lk.alice)
    assert r.status == 400 and r.body["details"]["corrected"] == "repo::acme/widget"


def test_list_pages_newest_first(lk: LoreKitServer) -> None:
    for i in range(3):
        write(lk, "project::paging", f"p{i}", f"paging lesson number {i}")
    first = lk.http("GET", "/memories" + q(scope="project::paging", limit=2), token=lk.alice).body
    assert [e["key"] for e in first["entries"]] == ["p2", "p1"] and first["hasMore"] is True
    rest = lk.http("GET", "/memories" + q(scope="project::paging", limit=2, cursor=first["nextCursor"]), token=lk.alice)
    assert [e["key"] for e in rest.body["entries"]] == ["p0"] and rest.body["hasMore"] is False
    assert rest.body["nextCursor"] is None


def test_archive_keeps_the_address_and_restore_brings_it_back(lk: LoreKitServer) -> None:
    write(lk, "project::arch", "flaky", "the flaky test needs a retry")
    r = lk.http("DELETE", "/memories" + q(scope="project::arch", key="flaky"), token=lk.alice)
    assert r.status == 204
    assert read(lk, "project::arch", "flaky") == []
    listed = lk.http("GET", "/memories" + q(scope="project::arch"), token=lk.alice).body["entries"]
    assert listed == []
    # Writing to the archived address is a new version that stays archived: the slot is not freed.
    write(lk, "project::arch", "flaky", "the flaky test needs two retries")
    assert read(lk, "project::arch", "flaky") == []
    r = lk.http("POST", "/memories/restore", {"scope": "project::arch", "key": "flaky"}, token=lk.alice)
    assert r.status == 200 and r.body == {"restored": True}
    [got] = read(lk, "project::arch", "flaky")
    assert got["value"] == "the flaky test needs two retries"
    r = lk.http("POST", "/memories/restore", {"scope": "project::arch", "key": "flaky"}, token=lk.alice)
    assert r.status == 404 and r.body["code"] == "not_found"
    r = lk.http("DELETE", "/memories" + q(scope="project::arch", key="absent"), token=lk.alice)
    assert r.status == 404 and r.body["code"] == "not_found"


def test_force_delete_forgets_and_erases(lk: LoreKitServer) -> None:
    write(lk, "project::forget", "secret", "the staging password is hunter2")
    r = lk.http("DELETE", "/memories" + q(scope="project::forget", key="secret", force="true"), token=lk.alice)
    assert r.status == 204
    assert read(lk, "project::forget", "secret") == []
    # The content is tombstoned: the same text is refused under any key, in LoreKit's error shape.
    again = write(lk, "project::forget", "other", "the staging password is hunter2")
    assert again.status == 409 and again.body["code"] == "conflict"
    assert again.body["details"]["cairn_code"] == "TOMBSTONED"
    # And its text is erased now (an admin token), not left for the sweep.
    p = lk.svc.resolve_token(lk.alice)
    lines = "\n".join(lk.svc.export(p))
    assert "hunter2" not in lines


def test_search_is_ranked_and_takes_lorekit_query_syntax(lk: LoreKitServer) -> None:
    write(lk, "project::search", "shellcheck", "when the bash linter fails run shellcheck locally")
    write(lk, "project::search", "unrelated", "coffee machine is on the third floor")
    r = lk.http("POST", "/memories/search", {"q": "bash OR linter OR shellcheck", "scopes": ["project::search"]},
                token=lk.alice)  # fmt: skip
    assert r.status == 200, r.body
    keys = [e["key"] for e in r.body["entries"]]
    assert keys and keys[0] == "shellcheck"  # best first (the meaning arm may add weaker neighbours after it)
    assert isinstance(r.body["entries"][0]["rank"], float) and r.body["hasMore"] is False
    wild = lk.http("POST", "/memories/search", {"q": "shellcheck", "scopes": ["project::*"]}, token=lk.alice)
    assert [e["key"] for e in wild.body["entries"]][:1] == ["shellcheck"]
    none = lk.http("POST", "/memories/search", {"q": "shellcheck", "scopes": ["nonsense:x"]}, token=lk.alice)
    assert none.status == 200 and none.body["entries"] == []  # an invalid scope is skipped, LoreKit's rule
    rel = lk.http("GET", "/memories/relevant" + q(q="shellcheck linter", scopes="project::search"), token=lk.alice)
    assert rel.status == 200 and rel.body["entries"][0]["key"] == "shellcheck" and rel.body["candidates"] >= 1


def test_scopes_counts_active_memories(lk: LoreKitServer) -> None:
    write(lk, "project::counted", "a", "first counted lesson")
    write(lk, "project::counted", "b", "second counted lesson")
    r = lk.http("GET", "/memories/scopes", token=lk.alice)
    assert r.status == 200
    by = {s["scope"]: s["count"] for s in r.body["scopes"]}
    assert by["project::counted"] == 2
    counts = [s["count"] for s in r.body["scopes"]]
    assert counts == sorted(counts, reverse=True)


def test_purge_sweeps_answer_purged_counts(lk: LoreKitServer) -> None:
    r = lk.http("POST", "/memories/purge", {"retention_days": 30}, token=lk.alice)
    assert r.status == 200 and isinstance(r.body["purged"], int)
    r = lk.http("POST", "/memories/purge-expired", token=lk.alice)
    assert r.status == 200 and isinstance(r.body["purged"], int)
    r = lk.http("POST", "/memories/purge", {"retention_days": 0}, token=lk.alice)
    assert r.status == 400 and "retention_days" in r.body["error"]


def test_another_accounts_token_sees_nothing(lk: LoreKitServer) -> None:
    write(lk, "project::private", "alice-only", "alice's private lesson about the vault")
    assert read(lk, "project::private", "alice-only", token=lk.bob) == []
    listed = lk.http("GET", "/memories" + q(scope="project::private"), token=lk.bob).body
    assert listed["entries"] == []
    found = lk.http("POST", "/memories/search", {"q": "vault"}, token=lk.bob).body
    assert found["entries"] == []
    assert "project::private" not in [
        s["scope"] for s in lk.http("GET", "/memories/scopes", token=lk.bob).body["scopes"]
    ]
    r = lk.http("DELETE", "/memories" + q(scope="project::private", key="alice-only", force="true"), token=lk.bob)
    assert r.status == 404
    assert (
        lk.http("POST", "/memories/restore", {"scope": "project::private", "key": "alice-only"}, token=lk.bob).status
        == 404
    )
    [still] = read(lk, "project::private", "alice-only")
    assert still["value"] == "alice's private lesson about the vault"


def test_read_only_token_reads_and_may_not_write(lk: LoreKitServer) -> None:
    assert lk.alice_ro.startswith("lk_ro_") and lk.alice.startswith("lk_rw_")
    write(lk, "project::ro", "k", "readable by the read-only token")
    assert read(lk, "project::ro", "k", token=lk.alice_ro)[0]["value"] == "readable by the read-only token"
    r = write(lk, "project::ro", "k2", "refused", token=lk.alice_ro)
    assert r.status == 403 and r.body["code"] == "forbidden"
    r = lk.http("POST", "/memories/purge", {"retention_days": 30}, token=lk.alice_ro)
    assert r.status == 403


def test_lorekit_tokens_are_stored_hashed_and_work_on_cairn_api_too(lk: LoreKitServer) -> None:
    digest = secret_hash(lk.alice)

    def rows(conn):  # type: ignore[no-untyped-def]
        return conn.execute(select(tokens).where(tokens.c.token_hash == digest)).mappings().all()

    [row] = lk.store.run(rows, write=False, token=digest)  # row security admits a lookup by hash
    assert row["prefix"] == lk.alice[:14]
    assert all(lk.alice not in str(v) for v in row.values())
    assert lk.svc.resolve_token(lk.alice).actor == lk.alice_name


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/memories?limit=0", None),
        ("GET", "/memories?limit=abc", None),
        ("GET", "/memories?limit=101", None),
        ("GET", "/memories?scope=global&cursor=%21%21", None),
        ("POST", "/memories", {"scope": "global", "key": "k"}),
        ("POST", "/memories", {"scope": "global", "key": "k", "value": 3}),
        ("POST", "/memories", {"scope": "global", "key": "k", "value": "v", "tags": "one"}),
        ("POST", "/memories", {"scope": "global", "key": "k", "value": "v", "tags": ["Bad Tag!"]}),
        ("POST", "/memories", {"scope": "global", "key": "k", "value": "v", "kind": "fact"}),
        ("POST", "/memories", {"scope": "global", "key": "k", "value": "v", "ttl_days": 400}),
        ("POST", "/memories", {"scope": "global", "key": "k", "value": "v", "origin_commit": "xyz"}),
        ("POST", "/memories", {"scope": "global", "key": "k" * 513, "value": "v"}),
        ("POST", "/memories", {"scope": "nowhere::x", "key": "k", "value": "v"}),
        ("POST", "/memories", {"scope": "global", "key": "k", "value": "v", "created_at": "yesterday"}),
        ("DELETE", "/memories?scope=global&key=k&force=maybe", None),
        ("POST", "/memories/search", {"q": 5}),
        ("POST", "/memories/search", {}),
        ("GET", "/memories/relevant?q=x&min_score=nan", None),
        ("POST", "/memories/restore", {"scope": "global"}),
    ],
)
def test_bad_input_is_a_400_in_lorekits_shape(lk: LoreKitServer, method: str, path: str, body: object) -> None:
    r = lk.http(method, path, body, token=lk.alice)
    assert r.status == 400, (r.status, r.body)
    assert isinstance(r.body["error"], str) and r.body["error"]


def test_malformed_bodies_and_unknown_paths(lk: LoreKitServer) -> None:
    r = lk.http("POST", "/memories", raw=b"{not json", token=lk.alice)
    assert r.status == 400 and "JSON" in r.body["error"]
    r = lk.http("POST", "/memories", raw=b"[1,2]", token=lk.alice)
    assert r.status == 400
    r = lk.http("GET", "/nothing-here", token=lk.alice)
    assert r.status == 404 and r.body["code"] == "not_found"
    r = lk.http("PUT", "/memories", {"x": 1}, token=lk.alice)
    assert r.status == 405 and r.body["code"] == "method_not_allowed"


def test_a_store_at_its_limit_answers_lorekits_429(lk: LoreKitServer) -> None:
    from cairn.runtime.local import local_principal

    operator = local_principal()
    bob = lk.svc.resolve_token(lk.bob)
    lk.svc.limits_set(operator, bob.tenant_id, max_lessons=1)
    try:
        assert write(lk, "project::capped", "first", "the one lesson this store may hold", token=lk.bob).status == 201
        r = write(lk, "project::capped", "second", "one lesson too many", token=lk.bob)
        assert r.status == 429 and r.body["code"] == "memory_cap" and r.body["retryAfterSeconds"] == 60
        assert read(lk, "project::capped", "second", token=lk.bob) == []
    finally:
        lk.svc.limits_set(operator, bob.tenant_id, max_lessons=0)
