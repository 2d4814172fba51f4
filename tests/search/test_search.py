"""Hybrid search and recall on small fixed stores, with the real MiniLM model.

The read-only tests share one module-scoped store (``corpus``); tests that write get their own.
Every ranking claim is paired with a precondition that shows the claim is not vacuous: a paraphrase
query is first shown to share no indexed word with its lesson (the full-text arm misses it), an
exact-keyword query is first shown to lose in the vector arm alone, an abstaining recall is first
shown to have had candidates below the floor.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.core.principal import LOCAL_TENANT, READ, Principal
from cairn.core.ranking import distill, query_terms
from cairn.errors import CairnError
from cairn.search.embed import ENV_MODEL, HASH_MODEL_NAME
from cairn.service.api import Cairn
from cairn.service.search import RECALL_FLOOR, RECALL_MAX
from tests.search.util import HUMAN, ME, MODES, addrs, default_env, keys, load, open_service, recalled, sql

# ------------------------------------------------------------------------------------------- corpus

# Near-identical identifiers: the vector arm cannot tell them apart, the full-text arm can.
ZOMBIE = {
    "zombie-grace": (
        "Nightly export jobs run for hours on shared hosts, so before the first run set FROB_ZOMBIE_GRACE_MS "
        "in the worker config and restart the export pods; check the dashboard afterwards."
    ),
    "zombie-timeout": (
        "FROB_ZOMBIE_TIMEOUT_MS controls how long the broker waits before it evicts a consumer that stopped polling."
    ),
    "zombie-retries": "FROB_ZOMBIE_RETRIES caps how often an evicted consumer rejoins the group before it gives up.",
    "zombie-interval": "Raise FROB_ZOMBIE_INTERVAL_MS when consumers are evicted during long GC pauses.",
    "zombie-grace-period": (
        "Kafka consumers get a grace period before the broker marks them as zombies and rebalances the group."
    ),
}
# A cluster of lessons about one theme (test isolation), for near-duplicate pressure.
ISOLATION = {
    "reset-plugin-registry": (
        "Call PluginRegistry.clear() in a fixture teardown; otherwise plugins registered by one test leak"
        " into the next."
    ),
    "isolate-global-state": (
        "Tests that mutate module-level globals must restore them afterwards, or later tests see leaked state."
    ),
    "monkeypatch-env": (
        "Use monkeypatch.setenv instead of os.environ so environment changes are undone after each test."
    ),
    "fixture-scope-leak": (
        "A session-scoped fixture that returns a mutable object shares it across tests; copy it or narrow the scope."
    ),
    "singleton-reset": (
        "Singletons cache configuration at first use; reset the cached instance between tests that change settings."
    ),
}
MISC = {
    "pyyaml-import": (
        "ModuleNotFoundError for yaml means PyYAML is missing: pip install pyyaml (the import name "
        "differs from the package name)."
    ),
    "sqlite-wal": "SQLite needs WAL journal mode so readers keep working while a writer holds the lock.",
    "retry-throttle": (
        "The payments API throttles bursts; retry with exponential backoff and jitter instead of hammering it."
    ),
    "docker-platform": (
        "Docker images built on ARM laptops need --platform linux/amd64 to run on the x86 production hosts."
    ),
    "node-version": "The frontend build requires Node 20 or newer because of the global fetch API.",
    "ci-cache-key": "The CI cache key must include the lockfile hash, or stale dependencies get restored.",
    "squash-release": "Use squash merges on release branches so the changelog stays one entry per feature.",
    "oom-killed": (
        "Workers that die with exit code 137 ran out of memory; raise the container memory limit or "
        "reduce the batch size."
    ),
    "corporate-ca": "Corporate proxies intercept TLS; point REQUESTS_CA_BUNDLE at the company root certificate.",
    "timezone-utc": "Store timestamps in UTC and convert to local time only when displaying them.",
    "alembic-defaults": "Alembic autogenerate misses server defaults, so review every generated migration by hand.",
    "git-rebase-onto": "Use git rebase --onto to move a branch that was cut from the wrong base commit.",
    "dev-server-port": (
        "If the dev server cannot bind, another process is still listening on port 8000; kill it or pick another port."
    ),
    "flaky-sleep": "Replace fixed sleeps in integration tests with polling until the condition holds.",
    "presigned-upload": (
        "Large file uploads go straight to object storage through presigned URLs, never through the API server."
    ),
    "opencv-libgl": "Install the OpenGL system package in the container image before importing OpenCV.",
    "deep-json": "Deeply nested JSON blows the interpreter stack; parse it iteratively instead of recursively.",
    "unrelated-histories": (
        "Pass --allow-unrelated-histories when combining two repositories that share no common commit."
    ),
}
CORPUS = {**ZOMBIE, **ISOLATION, **MISC}

# (query, the lesson that answers it): each shares no indexed word with its lesson.
PARAPHRASES = [
    ("stop concurrent reads being blocked during database updates", "sqlite-wal"),
    ("process terminated because RAM was exhausted", "oom-killed"),
    ("container made on an apple silicon mac crashes on intel servers", "docker-platform"),
    ("which clock zone should dates be saved in", "timezone-utc"),
    ("sending big attachments to S3 without passing them via our backend", "presigned-upload"),
]
# (error text, the lesson that answers it): at most one shared word.
RELATED_ERRORS = [
    ("ImportError: libGL.so.1: cannot open shared object file: No such file or directory", "opencv-libgl"),
    (
        'Traceback (most recent call last):\n  File "/srv/app/loader.py", line 88, in walk\n'
        "RecursionError: maximum recursion depth exceeded while calling a Python object",
        "deep-json",
    ),
]
UNRELATED_ERRORS = [
    "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.",
    "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree",
    'Exception in thread "main" java.lang.NullPointerException\n\tat com.acme.Foo.bar(Foo.java:12)',
]


@pytest.fixture(scope="module")
def corpus(request: pytest.FixtureRequest, backend: str, tmp_path_factory: pytest.TempPathFactory) -> Cairn:
    with default_env():
        svc = open_service(request, backend, tmp_path_factory.mktemp("corpus"))
        load(svc, CORPUS)
        svc.drain_embeddings(ME)
        yield svc
        svc.store.dispose()


@pytest.fixture
def fresh(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Cairn:
    with default_env():
        svc = open_service(request, backend, tmp_path / "fresh")
        yield svc
        svc.store.dispose()


def _stems(words: list[str]) -> set[str]:
    return {w[:5] for w in words}


# ------------------------------------------------------------------------------------------- exact keyword


@pytest.mark.parametrize("query", ["FROB_ZOMBIE_GRACE_MS", "what is FROB_ZOMBIE_GRACE_MS for?"])
def test_exact_keyword_hit_survives_fusion(corpus: Cairn, query: str) -> None:
    # Precondition: on meaning alone the identifier's siblings look as close as (or closer than) it.
    vector = keys(corpus.search(ME, query, mode="vector", limit=5))
    assert vector[0] != "zombie-grace", vector
    assert {"zombie-timeout", "zombie-retries", "zombie-interval"} & set(vector[:3])
    assert keys(corpus.search(ME, query, mode="fts", limit=5))[0] == "zombie-grace"
    hybrid = corpus.search(ME, query, mode="hybrid", limit=5)["results"]
    assert hybrid[0]["key"] == "zombie-grace", [h["key"] for h in hybrid]
    assert hybrid[0]["fts_rank"] == 1 and hybrid[0]["similarity"] is not None


@pytest.mark.parametrize(
    "query",
    ["FROB_ZOMBIE_GRACE_MS consumer evicted", "FROB_ZOMBIE_GRACE_MS broker", "why is FROB_ZOMBIE_GRACE_MS needed"],
)
def test_exact_keyword_hit_survives_extra_words(corpus: Cairn, query: str) -> None:
    assert "zombie-grace" in keys(corpus.search(ME, query, mode="hybrid", limit=3))


def test_exact_keyword_sibling_identifiers_are_distinct(corpus: Cairn) -> None:
    for ident, key in [
        ("FROB_ZOMBIE_TIMEOUT_MS", "zombie-timeout"),
        ("FROB_ZOMBIE_RETRIES", "zombie-retries"),
        ("FROB_ZOMBIE_INTERVAL_MS", "zombie-interval"),
        ("PluginRegistry.clear", "reset-plugin-registry"),
    ]:
        assert keys(corpus.search(ME, ident, limit=3))[0] == key, ident


# ------------------------------------------------------------------------------------------- paraphrase


@pytest.mark.parametrize(("query", "target"), PARAPHRASES, ids=[t for _, t in PARAPHRASES])
def test_paraphrase_found_by_meaning(corpus: Cairn, query: str, target: str) -> None:
    # Precondition: not one indexed (stemmed) word in common, so the full-text arm cannot find it.
    assert target not in keys(corpus.search(ME, query, mode="fts", limit=100))
    assert keys(corpus.search(ME, query, mode="vector", limit=3))[0] == target


@pytest.mark.parametrize(("query", "target"), PARAPHRASES, ids=[t for _, t in PARAPHRASES])
def test_paraphrase_in_hybrid_top3(corpus: Cairn, query: str, target: str) -> None:
    assert target in keys(corpus.search(ME, query, mode="hybrid", limit=3))


def test_paraphrase_is_first_in_hybrid(corpus: Cairn) -> None:
    query, target = "process terminated because RAM was exhausted", "oom-killed"
    assert keys(corpus.search(ME, query, mode="hybrid", limit=1)) == [target]


def test_natural_question_with_shared_words(corpus: Cairn) -> None:
    found = corpus.search(ME, "how do I undo environment variable changes in a test", limit=3)
    assert keys(found)[0] == "monkeypatch-env"


# ------------------------------------------------------------------------------------------- recall


@pytest.mark.parametrize("error", UNRELATED_ERRORS, ids=["ssh", "npm", "java"])
def test_recall_abstains_on_unrelated_error(corpus: Cairn, error: str) -> None:
    # Precondition: there were candidates, so staying silent is the floor's decision, not an empty arm.
    below = corpus.recall(ME, error, floor=0.0, limit=20)
    assert below["lessons"], "recall saw no candidates at all"
    assert max(h["relevance"] for h in below["lessons"]) < RECALL_FLOOR
    result = corpus.recall(ME, error)
    assert result["lessons"] == []
    assert result["floor"] == RECALL_FLOOR


@pytest.mark.parametrize(("error", "target"), RELATED_ERRORS, ids=[t for _, t in RELATED_ERRORS])
def test_recall_ranks_lesson_first_for_low_overlap_error(corpus: Cairn, error: str, target: str) -> None:
    shared = _stems(distill(error)) & _stems(query_terms(CORPUS[target]))
    assert len(shared) <= 1, shared  # precondition: "low overlap" really is low
    result = corpus.recall(ME, error, floor=0.0)
    assert recalled(result)[:1] == [target], [(h["key"], h["relevance"]) for h in result["lessons"]]
    assert result["lessons"][0]["lesson"]["value"] == CORPUS[target]


def test_recall_prints_lesson_above_the_floor_for_low_overlap_error(corpus: Cairn) -> None:
    # The calibrated floor trades answers for silence (evals/README.md); this pair clears it.
    error, target = RELATED_ERRORS[0]
    result = corpus.recall(ME, error)
    assert recalled(result)[:1] == [target]
    assert result["lessons"][0]["relevance"] >= RECALL_FLOOR


def test_recall_distills_the_error(corpus: Cairn) -> None:
    result = corpus.recall(ME, RELATED_ERRORS[1][0])
    assert "recursionerror" in result["terms"] and "recursion" in result["terms"]
    assert not {"srv", "88", "traceback", "line"} & set(result["terms"])


def test_recall_at_most_three_ranked_by_relevance(corpus: Cairn) -> None:
    text = "tests leak state into each other: globals, env vars, registries and singletons are not reset"
    everything = corpus.recall(ME, text, floor=0.0, limit=20)["lessons"]
    assert len(everything) > RECALL_MAX
    result = corpus.recall(ME, text, floor=0.0)
    assert len(result["lessons"]) == RECALL_MAX
    rel = [h["relevance"] for h in result["lessons"]]
    assert rel == sorted(rel, reverse=True)
    assert rel == sorted((h["relevance"] for h in everything), reverse=True)[:RECALL_MAX]


def test_recall_of_noise_is_empty(corpus: Cairn) -> None:
    for text in ["", "   \n", "Error: 0x7f3a2b9c10 at 2024-05-01T12:34:56Z line 12"]:
        result = corpus.recall(ME, text)
        assert result["lessons"] == [], text


# ------------------------------------------------------------------------------------------- results


def test_result_shape_and_order(corpus: Cairn) -> None:
    result = corpus.search(ME, "consumer evicted by the broker", limit=4)
    assert result["mode"] == "hybrid" and len(result["results"]) == 4
    scores = [h["score"] for h in result["results"]]
    assert scores == sorted(scores, reverse=True)
    for h in result["results"]:
        assert {"scope", "key", "trust", "score", "snippet", "lesson"} <= set(h)
        assert h["lesson"]["status"] == "active" and h["lesson"]["key"] == h["key"]
        assert h["snippet"] and h["snippet"].replace("…", "") in CORPUS[h["key"]]


def test_limit_is_respected(corpus: Cairn) -> None:
    for mode in MODES:
        assert len(corpus.search(ME, "consumer", mode=mode, limit=2)["results"]) <= 2
    assert len(corpus.search(ME, "tests", limit=100)["results"]) <= len(CORPUS)


def test_query_syntax_is_never_interpreted(corpus: Cairn) -> None:
    for q in ['"unbalanced', "NEAR(a b)", "a OR", "col:value", "*", "-x", "sqlite AND", "'; DROP TABLE lessons; --"]:
        corpus.search(ME, q, mode="fts")
        corpus.search(ME, q)
    assert keys(corpus.search(ME, 'sqlite" OR "docker', mode="fts"))  # both words, quoted literally
    # In hybrid mode too the quotes and "OR" are text: the words are the terms, nothing else.
    literal = corpus.search(ME, 'sqlite" OR "docker', mode="hybrid")["results"]
    assert {h["key"] for h in literal if h["fts_rank"] is not None} == {"sqlite-wal", "docker-platform"}


# ------------------------------------------------------------------------------------------- freshness


def test_fresh_lesson_findable_by_text_at_once_and_by_meaning_next(fresh: Cairn) -> None:
    load(fresh, MISC)
    fresh.drain_embeddings(ME)
    fresh.write(ME, "global", "ulimit-files", "Raise the open file descriptor ulimit for the indexer daemon.")
    lid = sql(fresh, "SELECT id FROM lessons WHERE key = 'ulimit-files'")[0][0]
    # Not embedded yet: the write only queued it...
    assert sql(fresh, "SELECT count(*) FROM lesson_embeddings WHERE lesson_id = :i", i=lid) == [(0,)]
    assert sql(fresh, "SELECT count(*) FROM embed_queue WHERE lesson_id = :i", i=lid) == [(1,)]
    # ...yet full text finds it at once, and the full-text search did not need (or make) a vector.
    assert keys(fresh.search(ME, "ulimit", mode="fts"))[:1] == ["ulimit-files"]
    assert sql(fresh, "SELECT count(*) FROM embed_queue WHERE lesson_id = :i", i=lid) == [(1,)]
    # The next search that uses meaning embeds it first.
    query = "EMFILE too many handles"
    assert "ulimit-files" not in keys(fresh.search(ME, query, mode="fts", limit=100))
    assert keys(fresh.search(ME, query, mode="vector", limit=3))[0] == "ulimit-files"
    assert sql(fresh, "SELECT count(*) FROM embed_queue") == [(0,)]
    assert sql(fresh, "SELECT model, dim FROM lesson_embeddings WHERE lesson_id = :i", i=lid) == [
        ("all-MiniLM-L6-v2-int8-tokq", 384)
    ]


def test_edit_replaces_text_and_vector(fresh: Cairn) -> None:
    load(fresh, MISC)
    old_q, new_q = "who do I contact during a production outage", "how often should secrets be changed"
    fresh.write(ME, "global", "pager", "Escalate incidents to the on-call engineer only after following the runbook.")
    assert keys(fresh.search(ME, "runbook", mode="fts")) == ["pager"]
    assert keys(fresh.search(ME, old_q, mode="vector", limit=1)) == ["pager"]
    assert "pager" not in keys(fresh.search(ME, new_q, mode="vector", limit=1))
    fresh.write(ME, "global", "pager", "Rotate database credentials every ninety days via the vault CLI.")
    assert keys(fresh.search(ME, "runbook", mode="fts")) == []
    assert keys(fresh.search(ME, "vault", mode="fts")) == ["pager"]
    # The stored vector is the new text's, not the old one's.
    assert keys(fresh.search(ME, new_q, mode="vector", limit=1)) == ["pager"]
    assert "pager" not in keys(fresh.search(ME, old_q, mode="vector", limit=1))
    assert sql(
        fresh,
        "SELECT count(*) FROM lesson_embeddings e JOIN lessons l ON l.id = e.lesson_id "
        "WHERE l.key = 'pager' AND e.content_hash = l.content_hash",
    ) == [(1,)]


def test_warm_vector_arm_reads_no_vector_from_the_database(fresh: Cairn) -> None:
    """The ranking index holds float16 vectors: once warm, the vector arm ranks and measures cosines in
    memory, and the similarities it reports are the stored vectors' exact cosines (to float16 precision)."""
    import numpy as np
    from sqlalchemy import event

    from cairn.search.embed import get_embedder

    load(fresh, MISC | ISOLATION)
    query = "tests leak state into each other"
    fresh.search(ME, query)  # warm: builds the index (this read the vectors once)
    seen: list[str] = []

    def spy(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(fresh.store.engine, "before_cursor_execute", spy)
    try:
        hits = fresh.search(ME, query, mode="hybrid")["results"]
        recalled_now = fresh.recall(ME, "AssertionError: plugin 'audit' already registered", floor=-1.0)["lessons"]
    finally:
        event.remove(fresh.store.engine, "before_cursor_execute", spy)
    assert seen and hits and recalled_now  # the spy saw the searches' statements
    assert not [s for s in seen if "lesson_embeddings" in s]
    # Every hit (either arm's) carries the exact cosine of its stored float32 vector.
    qvec = get_embedder().embed([query])[0]
    stored = dict(sql(fresh, "SELECT l.key, e.vector FROM lesson_embeddings e JOIN lessons l ON l.id = e.lesson_id"))
    for h in hits:
        exact = float(np.frombuffer(stored[h["key"]], dtype="<f4") @ qvec)
        assert h["similarity"] == pytest.approx(exact, abs=2e-3), h["key"]


def test_search_does_not_wait_for_a_writer(fresh: Cairn) -> None:
    """WAL lets readers run while a writer holds the lock; a search with nothing to embed must not queue."""
    load(fresh, MISC)
    fresh.drain_embeddings(ME)
    fresh.search(ME, "warm up the model")
    started, release = threading.Event(), threading.Event()

    def writer() -> None:
        with fresh.store.connect(write=True):  # BEGIN IMMEDIATE: holds the write lock
            started.set()
            release.wait(8)

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert started.wait(10)
        begin = time.perf_counter()
        for mode in MODES:
            assert keys(fresh.search(ME, "readers blocked by a writer", mode=mode, limit=1)) == ["sqlite-wal"]
        fresh.recall(ME, "sqlite3.OperationalError: database is locked")
        elapsed = time.perf_counter() - begin
    finally:
        release.set()
        t.join()
    assert elapsed < 6.0, f"searches waited {elapsed:.1f}s for the writer (it holds the lock for 8 s)"


# ------------------------------------------------------------------------------------------- scopes & ladder

LADDER = [
    ("branch::acme/web::main", "run-tests", "On main, run the web tests with make test-web before pushing."),
    ("branch::acme/web::dev", "run-tests-dev", "On dev, run the web tests with the smoke profile only."),
    ("repo::acme/web", "run-tests", "Run the web tests with npm test; they need the mock server."),
    ("repo::acme/web", "web-e2e", "The web end-to-end tests need a seeded database."),
    ("repo::acme/api", "api-tests", "Run the api tests with pytest -n auto."),
    ("project::shop", "shop-tests", "Shop tests use the sandbox payment provider."),
    ("project::other", "other-tests", "Other project tests run nightly only."),
    ("global", "run-tests", "Run the tests before every push."),
    ("global", "flaky-tests", "Quarantine flaky tests instead of retrying the whole suite."),
]
CONTEXT = {"repo": "acme/web", "branch": "main", "project": "shop"}
LADDER_SCOPES = ["branch::acme/web::main", "repo::acme/web", "project::shop", "global"]
QUERY = "how to run the tests"


@pytest.fixture(scope="module")
def laddered(request: pytest.FixtureRequest, backend: str, tmp_path_factory: pytest.TempPathFactory) -> Cairn:
    with default_env():
        svc = open_service(request, backend, tmp_path_factory.mktemp("ladder"))
        load(svc, [{"scope": s, "key": k, "value": v} for s, k, v in LADDER])
        svc.drain_embeddings(ME)
        yield svc
        svc.store.dispose()


@pytest.mark.parametrize("mode", MODES)
def test_without_context_every_scope_is_searched(laddered: Cairn, mode: str) -> None:
    found = addrs(laddered.search(ME, QUERY, mode=mode, limit=100))
    assert set(found) == {(s, k) for s, k, _ in LADDER}


@pytest.mark.parametrize("mode", MODES)
def test_ladder_context_keeps_only_ladder_scopes_and_shadows(laddered: Cairn, mode: str) -> None:
    found = addrs(laddered.search(ME, QUERY, mode=mode, limit=100, **CONTEXT))
    assert {s for s, _ in found} <= set(LADDER_SCOPES)
    # run-tests exists on three rungs: only the narrowest (branch) is returned.
    assert [a for a in found if a[1] == "run-tests"] == [("branch::acme/web::main", "run-tests")]
    assert set(found) == {
        ("branch::acme/web::main", "run-tests"),
        ("repo::acme/web", "web-e2e"),
        ("project::shop", "shop-tests"),
        ("global", "flaky-tests"),
    }


def test_ladder_partial_contexts(laddered: Cairn) -> None:
    repo_only = addrs(laddered.search(ME, QUERY, repo="acme/web", limit=100))
    assert ("repo::acme/web", "run-tests") in repo_only  # no branch rung: the repo lesson is narrowest
    assert ("global", "run-tests") not in repo_only
    assert {s for s, _ in repo_only} <= {"repo::acme/web", "global"}
    project_only = addrs(laddered.search(ME, QUERY, project="other", limit=100))
    assert {s for s, _ in project_only} == {"project::other", "global"}
    # A branch without a repo names no rung: only global.
    assert {s for s, _ in addrs(laddered.search(ME, QUERY, branch="main", limit=100))} == {"global"}


def test_explicit_scopes_filter_exactly(laddered: Cairn) -> None:
    for mode in MODES:
        found = addrs(laddered.search(ME, QUERY, scopes=["repo::acme/api"], mode=mode))
        assert found == [("repo::acme/api", "api-tests")]
    both = addrs(laddered.search(ME, QUERY, scopes=["REPO::Acme/Web", "global"], limit=100))
    assert {s for s, _ in both} == {"repo::acme/web", "global"}
    assert laddered.search(ME, QUERY, scopes=["project::nobody"])["results"] == []


def test_shadowing_skips_inactive_narrower_lessons(fresh: Cairn) -> None:
    load(fresh, [{"scope": s, "key": k, "value": v} for s, k, v in LADDER])
    fresh.archive(ME, "branch::acme/web::main", "run-tests")
    found = addrs(fresh.search(ME, QUERY, limit=100, **CONTEXT))
    assert [a for a in found if a[1] == "run-tests"] == [("repo::acme/web", "run-tests")]


def test_shadowing_ignores_scopes_the_principal_cannot_see(laddered: Cairn) -> None:
    """A branch lesson hidden from a scope-limited token must not hide the repo lesson it can see."""
    limited = Principal(LOCAL_TENANT, "bot", scope_patterns=("repo::acme/*", "project::*", "global"))
    for mode in MODES:
        found = addrs(laddered.search(limited, QUERY, mode=mode, limit=100, **CONTEXT))
        assert [a for a in found if a[1] == "run-tests"] == [("repo::acme/web", "run-tests")], (mode, found)
        assert not any(s.startswith("branch::") for s, _ in found)


# ------------------------------------------------------------------------------------------- tag & trust


# The filter tests need hundreds of competing lessons, not meaning: the hashing test model embeds them
# in milliseconds, where MiniLM would take seconds.


@pytest.fixture
def hash_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MODEL, HASH_MODEL_NAME)


@pytest.fixture(scope="module")
def tagged(request: pytest.FixtureRequest, backend: str, tmp_path_factory: pytest.TempPathFactory) -> Cairn:
    with default_env() as mp:
        mp.setenv(ENV_MODEL, HASH_MODEL_NAME)
        svc = open_service(request, backend, tmp_path_factory.mktemp("tagged"))
        recs: list[dict[str, Any]] = [
            {"scope": "global", "key": f"deploy-step-{i}", "value": f"Deploy step {i}: deploy the deploy service."}
            for i in range(240)
        ]
        recs += [
            {
                "scope": "global",
                "key": "deploy-flags",
                "value": "Before a deploy, check the feature flags.",
                "tags": ["flags", "ci"],
            },
            {
                "scope": "global",
                "key": "ci-deploy-cache",
                "value": "The deploy pipeline caches wheels.",
                "tags": ["CI"],
            },
        ]
        load(svc, recs)
        svc.write(HUMAN, "global", "deploy-window", "Deploy on weekdays before 3pm; a reviewer approved this window.")
        svc.drain_embeddings(ME)
    # The environment is restored here: tests that use this store ask for ``hash_model`` themselves.
    yield svc
    svc.store.dispose()


@pytest.mark.parametrize("mode", MODES)
def test_tag_filter(tagged: Cairn, hash_model: None, mode: str) -> None:
    found = tagged.search(ME, "deploy pipeline", tag="CI", mode=mode, limit=10)
    assert sorted(keys(found)) == ["ci-deploy-cache", "deploy-flags"]
    assert all("ci" in h["lesson"]["tags"] for h in found["results"])
    assert tagged.search(ME, "deploy", tag="no-such-tag", mode=mode)["results"] == []


@pytest.mark.parametrize("mode", MODES)
def test_tag_filter_finds_a_tagged_lesson_ranked_below_hundreds_of_others(
    tagged: Cairn, hash_model: None, mode: str
) -> None:
    query = "deploy service"
    # Precondition: unfiltered, the tagged lesson is nowhere near the top.
    assert "deploy-flags" not in keys(tagged.search(ME, query, mode=mode, limit=100))
    assert keys(tagged.search(ME, query, tag="flags", mode=mode)) == ["deploy-flags"]


@pytest.mark.parametrize("mode", MODES)
def test_trust_filter(tagged: Cairn, hash_model: None, mode: str) -> None:
    query = "deploy weekdays window"
    verified = tagged.search(ME, query, trust="verified", mode=mode)
    assert keys(verified) == ["deploy-window"]
    candidates = tagged.search(ME, query, trust="candidate", mode=mode, limit=100)
    assert len(candidates["results"]) > 10 and "deploy-window" not in keys(candidates)
    assert {h["trust"] for h in candidates["results"]} == {"candidate"}
    # Unfiltered, the verified lesson competes with the candidates.
    assert "deploy-window" in keys(tagged.search(ME, query, mode=mode, limit=100))


# ------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"query": ""}, "INVALID_INPUT"),
        ({"query": "   \n\t"}, "INVALID_INPUT"),
        ({"query": "x" * 4001}, "INVALID_INPUT"),
        ({"limit": 0}, "INVALID_INPUT"),
        ({"limit": -3}, "INVALID_INPUT"),
        ({"limit": 101}, "INVALID_INPUT"),
        ({"mode": "semantic"}, "INVALID_INPUT"),
        ({"mode": "HYBRID"}, "INVALID_INPUT"),
        ({"trust": "rejected"}, "INVALID_INPUT"),
        ({"tag": "not a tag!"}, "INVALID_INPUT"),
        ({"scopes": ["repo:acme/web"]}, "INVALID_SCOPE"),
        ({"scopes": ["global", "team::x"]}, "INVALID_SCOPE"),
        ({"repo": "acme"}, "INVALID_SCOPE"),
        ({"repo": "acme/web", "branch": "bad..branch"}, "INVALID_SCOPE"),
    ],
)
def test_search_refuses_bad_input(corpus: Cairn, kwargs: dict[str, Any], code: str) -> None:
    args = {"query": "sqlite"} | kwargs
    query = args.pop("query")
    with pytest.raises(CairnError) as ei:
        corpus.search(ME, query, **args)
    assert ei.value.code == code


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"mode": "semantic"}, "INVALID_INPUT"),
        ({"limit": 0}, "INVALID_INPUT"),
        ({"limit": 21}, "INVALID_INPUT"),
        ({"scopes": ["nope"]}, "INVALID_SCOPE"),
    ],
)
def test_recall_refuses_bad_input(corpus: Cairn, kwargs: dict[str, Any], code: str) -> None:
    with pytest.raises(CairnError) as ei:
        corpus.recall(ME, "sqlite3.OperationalError: database is locked", **kwargs)
    assert ei.value.code == code


def test_search_and_recall_need_read_permission(corpus: Cairn) -> None:
    blind = Principal(LOCAL_TENANT, "nobody", permissions=frozenset({"write"}))
    assert READ not in blind.permissions
    for call in (lambda: corpus.search(blind, "sqlite"), lambda: corpus.recall(blind, "database is locked")):
        with pytest.raises(CairnError) as ei:
            call()
        assert ei.value.code == "FORBIDDEN"


def test_result_json_serializable(corpus: Cairn) -> None:
    json.dumps(corpus.search(ME, "sqlite"))
    text = json.dumps(corpus.recall(ME, RELATED_ERRORS[0][0]))
    assert re.search(r'"relevance": [0-9.]+', text)
