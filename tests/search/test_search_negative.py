"""Negative evals: what must never come back from search or recall, in any mode, and what purge erases.

Each hidden lesson is first shown to be found (in every mode and by recall) while it is still visible,
so "it does not appear" can only pass because the lesson was hidden, never because the query missed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from cairn.core.principal import LOCAL_TENANT, Principal
from cairn.core.timeparse import FAKE_NOW_ENV
from cairn.errors import CairnError
from cairn.service.api import Cairn
from cairn.store import search_index as ix
from tests.contract import raw
from tests.search.util import (
    ME,
    MODES,
    default_env,
    fts_text_count,
    keys,
    lesson_id,
    load,
    open_service,
    recalled,
    sql,
)

OTHER = Principal("other", "someone-else")
LIMITED = Principal(LOCAL_TENANT, "ci-bot", scope_patterns=("repo::acme/*", "global"))
CONTEXT = {"repo": "acme/web", "branch": "main"}

# Filler so each topic competes with unrelated lessons, as in a real store.
FILLER = {
    "squash-release": "Use squash merges on release branches so the changelog stays one entry per feature.",
    "timezone-utc": "Store timestamps in UTC and convert to local time only when displaying them.",
    "presigned-upload": "Large file uploads go straight to object storage through presigned URLs.",
    "node-version": "The frontend build requires Node 20 or newer because of the global fetch API.",
}


@dataclass
class Case:
    """A lesson that must be hidden, a visible control on the same topic, and how to hide it."""

    name: str
    scope: str
    key: str
    value: str
    query: str
    error: str
    control: tuple[str, str, str]  # scope, key, value: stays visible and is found by the same query
    who: Principal = ME  # who cannot see it afterwards
    search_kwargs: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case(
        "archived", "global", "probe-old",
        "Kubernetes liveness probes must not call the database, or a slow database restarts every pod.",
        "kubernetes liveness probe restarts pods", "Liveness probe failed: HTTP probe failed with statuscode: 503",
        ("global", "probe-new", "Keep Kubernetes liveness probes cheap: check the process, not its dependencies."),
    ),
    Case(
        "expired", "global", "registry-outage",
        "The container registry mirror is down this week; pull images from the primary registry directly.",
        "container registry mirror down pull images",
        "Error response from daemon: pull access denied, registry mirror unreachable",
        ("global", "registry-auth",
         "Docker pulls from the private registry need docker login with the CI token first."),
    ),
    Case(
        "rejected", "global", "disable-ssl-verify",
        "Fix certificate verify failed errors by setting verify=False on every requests call.",
        "certificate verify failed requests", "requests.exceptions.SSLError: certificate verify failed",
        ("global", "corporate-ca",
         "Certificate verify failed behind the proxy: point REQUESTS_CA_BUNDLE at the company CA."),
    ),
    Case(
        "tombstoned", "global", "force-push-main",
        "When a push to main is rejected as non-fast-forward, force push to main to overwrite it.",
        "push to main rejected non fast forward", "! [rejected] main -> main (non-fast-forward)",
        ("global", "pull-rebase", "A rejected non-fast-forward push means main moved: pull --rebase, then push again."),
    ),
    Case(
        "superseded", "global", "pin-pip-old",
        "Pin pip to 23.0 in the CI image because the resolver in newer pip versions hangs on our lockfile.",
        "pip resolver hangs in CI", "INFO: pip is looking at multiple versions of this package; resolver backtracking",
        ("global", "pin-pip-new",
         "The pip resolver hang in CI is fixed by the pinned constraints file, not by pinning pip."),
    ),
    Case(
        "other-tenant", "global", "vpn-split-tunnel",
        "Split tunnelling must stay off on the corporate VPN; the staging cluster is only reachable through it.",
        "staging cluster unreachable VPN split tunnel", "dial tcp: lookup staging.internal: no such host (VPN)",
        ("global", "vpn-dns",
         "If staging hosts do not resolve, the corporate VPN DNS is not in use; reconnect the VPN."),
    ),
    Case(
        "scope-limited", "repo::zeta/payments", "payments-webhook-secret",
        "The payments webhook secret rotates monthly; a signature mismatch means the secret in the vault is stale.",
        "payments webhook signature mismatch secret",
        "stripe.error.SignatureVerificationError: webhook signature mismatch",
        ("repo::acme/web", "web-webhook-secret",
         "Webhook signature mismatches on the web app mean the signing secret rotated."),
        who=LIMITED,
    ),
    Case(
        "out-of-ladder-repo", "repo::acme/api", "api-flaky-migration",
        "The api migrations test is flaky because two workers race on the schema lock; run it with -p no:xdist.",
        "flaky migrations test schema lock race",
        "psycopg2.errors.LockNotAvailable: could not obtain lock on relation schema_migrations",
        ("repo::acme/web", "web-migration-lock",
         "The web migrations test takes the schema lock; run migrations before the parallel tests."),
        search_kwargs=CONTEXT,
    ),
    Case(
        "out-of-ladder-branch", "branch::acme/web::dev", "dev-feature-flag",
        "On the dev branch the new checkout flow is behind the checkout_v2 feature flag; enable it in .env.local.",
        "checkout flow feature flag enable", "KeyError: 'checkout_v2' feature flag not defined",
        ("branch::acme/web::main", "main-feature-flag",
         "On main every checkout feature flag comes from the flags service, not .env files."),
        search_kwargs=CONTEXT,
    ),
]  # fmt: skip
BY_NAME = {c.name: c for c in CASES}


def _later() -> str:
    return (datetime.now(UTC) + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _finds(svc: Cairn, p: Principal, c: Case, key: str) -> list[str]:
    """Where ``key`` shows up: each search mode, recall at its floor, recall with no floor at all."""
    where = []
    for mode in MODES:
        if key in keys(svc.search(p, c.query, mode=mode, limit=100, **c.search_kwargs)):
            where.append(mode)
    if key in recalled(svc.recall(p, c.error, **c.search_kwargs)):
        where.append("recall")
    if key in recalled(svc.recall(p, c.error, floor=0.0, limit=20, **c.search_kwargs)):
        where.append("recall-unfloored")
    return where


ALL = [*MODES, "recall-unfloored"]  # recall at its floor is checked where the lesson clears it


def _hide(svc: Cairn, c: Case) -> None:
    if c.name == "archived":
        svc.archive(ME, c.scope, c.key)
    elif c.name == "rejected":
        svc.reject(ME, c.scope, c.key, reason="disabling verification is never the fix")
    elif c.name == "tombstoned":
        svc.forget(ME, c.scope, c.key, reason="force-pushing main destroys other people's work")
    elif c.name == "superseded":
        svc.supersede(ME, c.control[0], c.control[1], c.control[2], supersedes=(c.scope, c.key))


@pytest.fixture(scope="module")
def store(request: pytest.FixtureRequest, backend: str, tmp_path_factory: pytest.TempPathFactory) -> Cairn:
    with default_env():
        svc = open_service(request, backend, tmp_path_factory.mktemp("negative"))
        svc.ensure_tenant(OTHER)
        load(svc, FILLER)
        for c in CASES:
            owner = OTHER if c.name == "other-tenant" else ME
            ttl = {"ttl": timedelta(hours=1)} if c.name == "expired" else {}
            svc.write(owner, c.scope, c.key, c.value, **ttl)
            if c.name != "superseded":  # the supersede call writes the control itself
                svc.write(ME, *c.control)
        # Before hiding: every hidden lesson is found by its query in every mode, by its owner.
        for c in CASES:
            owner = OTHER if c.name == "other-tenant" else ME
            plain = Case(**{**c.__dict__, "search_kwargs": {}})
            assert set(_finds(svc, owner, plain, c.key)) >= set(ALL), (c.name, _finds(svc, owner, plain, c.key))
        for c in CASES:
            _hide(svc, c)
        yield svc
        svc.store.dispose()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hidden_lessons_never_come_back(store: Cairn, case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    if case.name == "expired":
        monkeypatch.setenv(FAKE_NOW_ENV, _later())
    who = case.who
    assert _finds(store, who, case, case.key) == []
    # The control on the same topic is still found: the query works, only the hidden lesson is gone.
    control_key = case.control[1]
    control_where = _finds(store, who, case, control_key)
    assert set(control_where) >= set(ALL), control_where


def test_recall_never_surfaces_hidden_lessons_with_any_floor(store: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAKE_NOW_ENV, _later())
    # Hidden from everyone in the local tenant; the scope and ladder cases only from their principal/context.
    universal = {c.key for c in CASES if c.who is ME and not c.search_kwargs}
    assert len(universal) == 6
    for c in CASES:
        for text_ in (c.error, c.value, c.query):
            got = recalled(store.recall(c.who, text_, floor=-1.0, limit=20, **c.search_kwargs))
            assert not (universal | {c.key}) & set(got), (c.name, text_, got)


def test_other_tenant_sees_only_its_own(store: Cairn) -> None:
    c = BY_NAME["other-tenant"]
    theirs = keys(store.search(OTHER, c.query, limit=100))
    assert theirs == [c.key]  # the local tenant's control (and everything else) is invisible to them
    for mode in MODES:
        for q in (BY_NAME["archived"].query, "squash merges release branches", c.control[2]):
            assert set(keys(store.search(OTHER, q, mode=mode, limit=100))) <= {c.key}


def test_scope_limited_principal_cannot_reach_out_of_pattern_scopes(store: Cairn) -> None:
    c = BY_NAME["scope-limited"]
    for mode in MODES:
        assert store.search(LIMITED, c.query, scopes=[c.scope], mode=mode)["results"] == []
        assert c.key not in keys(store.search(LIMITED, c.query, repo="zeta/payments", mode=mode, limit=100))
        found = store.search(LIMITED, c.query, mode=mode, limit=100)["results"]
        assert all(LIMITED.can_see(h["scope"]) for h in found)
        assert found, "the principal still sees its own scopes"
    assert recalled(store.recall(LIMITED, c.error, scopes=[c.scope], floor=-1.0, limit=20)) == []


def test_expired_lesson_is_visible_until_its_ttl(store: Cairn) -> None:
    c = BY_NAME["expired"]
    assert c.key in keys(store.search(ME, c.query, limit=100))


# ------------------------------------------------------------------------------------------- index contents


@pytest.fixture
def fresh(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Cairn:
    with default_env():
        svc = open_service(request, backend, tmp_path / "store")
        load(svc, FILLER)
        yield svc
        svc.store.dispose()


MARKER = "zorblaxquux"
SECRET = f"The {MARKER} deploy token lives in the vault under ops/{MARKER}; never paste it into CI logs."


def _index_state(svc: Cairn, lid: int) -> dict[str, Any]:
    with raw(svc.store) as conn:
        tables = ix.vec_tables(conn)
        return {
            "fts_row": int(ix.fts_has(conn, lid)),
            "fts_match": ix.fts_rowids(conn, MARKER),
            "fts_text": fts_text_count(conn, MARKER),
            "vec_rows": {
                t: conn.execute(text(f"SELECT count(*) FROM {t} WHERE lesson_id = :i"), {"i": lid}).scalar()
                for t in tables
            },
            "vec_tables": tables,
            "embeddings": conn.execute(
                text("SELECT count(*) FROM lesson_embeddings WHERE lesson_id = :i"), {"i": lid}
            ).scalar(),
            "signatures": conn.execute(
                text("SELECT count(*) FROM lesson_signatures WHERE lesson_id = :i"), {"i": lid}
            ).scalar(),
            "queued": conn.execute(text("SELECT count(*) FROM embed_queue WHERE lesson_id = :i"), {"i": lid}).scalar(),
        }


def _assert_indexed(state: dict[str, Any]) -> None:
    assert state["fts_row"] == 1 and len(state["fts_match"]) == 1 and state["fts_text"] == 1, state
    assert state["vec_tables"] and sum(state["vec_rows"].values()) == 1, state
    assert state["embeddings"] == 1 and state["signatures"] == 1, state


def _assert_unindexed(state: dict[str, Any]) -> None:
    assert state["fts_row"] == 0 and state["fts_match"] == [] and state["fts_text"] == 0, state
    assert state["vec_tables"], "the vector table itself stays"
    assert all(n == 0 for n in state["vec_rows"].values()), state
    assert state["embeddings"] == 0 and state["signatures"] == 0 and state["queued"] == 0, state


def _write_and_embed(svc: Cairn, **options: Any) -> int:
    svc.write(ME, "global", "deploy-token", SECRET, tags=[MARKER], **options)
    svc.search(ME, "where is the deploy token kept")  # drains the queue: the vector now exists
    lid = lesson_id(svc, "global", "deploy-token")
    _assert_indexed(_index_state(svc, lid))
    return lid


def _mark_second_model(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    """Give the lesson a vector table under a second model too, so 'every vec0 table' means more than one."""
    from cairn.search.embed import ENV_MODEL, HASH_MODEL_NAME

    monkeypatch.setenv(ENV_MODEL, HASH_MODEL_NAME)
    svc.search(ME, "deploy token")
    monkeypatch.delenv(ENV_MODEL)
    svc.search(ME, "deploy token")


def test_purge_of_archived_lesson_erases_text_and_vectors(fresh: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    lid = _write_and_embed(fresh)
    _mark_second_model(fresh, monkeypatch)
    assert len(_index_state(fresh, lid)["vec_tables"]) == 2
    fresh.archive(ME, "global", "deploy-token")
    result = fresh.purge(ME, archived=True, older_than=timedelta(0))
    assert result["purged"] == 1
    _assert_unindexed(_index_state(fresh, lid))
    assert sql(fresh, "SELECT count(*) FROM lessons WHERE id = :i", i=lid) == [(0,)]
    for mode in MODES:
        assert "deploy-token" not in keys(fresh.search(ME, f"{MARKER} deploy token", mode=mode, limit=100))


def test_purge_of_expired_lesson_erases_text_and_vectors(fresh: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    lid = _write_and_embed(fresh, ttl=timedelta(minutes=5))
    monkeypatch.setenv(FAKE_NOW_ENV, _later())
    # Expired but not yet purged: hidden from every read already.
    assert "deploy-token" not in keys(fresh.search(ME, "deploy token vault", limit=100))
    assert fresh.purge(ME, expired=True)["purged"] == 1
    _assert_unindexed(_index_state(fresh, lid))


def test_purged_text_leaves_no_bytes_in_fts_shadow_tables(fresh: Cairn) -> None:
    # SQLite only: FTS5's shadow tables are SQLite internals. (Postgres keeps a deleted row's bytes
    # in its page until VACUUM; see docs/KNOWN_ISSUES.md.)
    if fresh.store.dialect != "sqlite":
        pytest.skip("FTS5 shadow tables exist on SQLite only")
    _write_and_embed(fresh)
    fresh.archive(ME, "global", "deploy-token")
    fresh.purge(ME, archived=True, older_than=timedelta(0))
    with raw(fresh.store) as conn:
        shadow = [r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE name LIKE 'lesson_fts_%'"))]
        for table in shadow:
            for row in conn.execute(text(f"SELECT * FROM {table}")):
                for cell in row:
                    data = cell if isinstance(cell, bytes) else str(cell).encode()
                    assert MARKER.encode() not in data, table


@pytest.mark.parametrize(
    "hide",
    [
        lambda s: s.archive(ME, "global", "deploy-token"),
        lambda s: s.reject(ME, "global", "deploy-token", reason="secrets do not belong in lessons"),
        lambda s: s.supersede(ME, "global", "deploy-token-v2", "Deploy tokens come from the OIDC exchange now.",
                              supersedes=("global", "deploy-token")),
    ],
    ids=["archive", "reject", "supersede"],
)  # fmt: skip
def test_leaving_the_active_set_leaves_both_indexes(fresh: Cairn, hide: Callable[[Cairn], Any]) -> None:
    lid = _write_and_embed(fresh)
    hide(fresh)
    _assert_unindexed(_index_state(fresh, lid))


def test_restore_puts_the_lesson_back_in_both_indexes(fresh: Cairn) -> None:
    lid = _write_and_embed(fresh)
    fresh.archive(ME, "global", "deploy-token")
    fresh.restore(ME, "global", "deploy-token")
    state = _index_state(fresh, lid)
    assert state["fts_row"] == 1 and state["queued"] == 1  # full text at once, the vector on the next search
    assert keys(fresh.search(ME, MARKER, mode="fts")) == ["deploy-token"]
    assert "deploy-token" in keys(fresh.search(ME, "where is the deploy token kept", mode="vector", limit=3))
    _assert_indexed(_index_state(fresh, lid))


def test_rejected_content_cannot_return_under_another_key(fresh: Cairn) -> None:
    _write_and_embed(fresh)
    fresh.forget(ME, "global", "deploy-token", reason="secrets do not belong in lessons")
    with pytest.raises(CairnError) as ei:
        fresh.write(ME, "global", "another-key", SECRET)
    assert ei.value.code == "TOMBSTONED"
    for mode in MODES:
        assert not {"deploy-token", "another-key"} & set(keys(fresh.search(ME, SECRET, mode=mode, limit=100)))
