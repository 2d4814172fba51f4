"""The retrieval rules, one small fixed store each claim, with the real MiniLM model and the shipped ranker.

Each ranking claim comes with a precondition showing it is not vacuous: the code lesson is not
simply the only lesson about the topic (a lexical sibling exists and an arm alone can be fooled), the
low-overlap error shares at most one word with its lesson, the unrelated error had candidates.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.core.ranking import STRONG_WEIGHT, distill, query_terms, weighted_terms
from cairn.service.api import Cairn
from cairn.service.search import RECALL_FLOOR
from tests.search.util import ME, default_env, keys, load, open_service, recalled

LESSONS = {
    # Error codes: each sits beside a sibling about the same subject without the code.
    "econnrefused-db-not-started": (
        "ECONNREFUSED on the database port means Postgres is not up yet: start the db service first and "
        "wait until pg_isready answers before running the app."
    ),
    "connection-reset-by-proxy": (
        "Connections to the package mirror are reset by the corporate proxy in the middle of downloads; set "
        "HTTPS_PROXY for the install and retry the connection."
    ),
    "eaddrinuse-stale-server": (
        "EADDRINUSE at startup: a previous dev server still holds the address; find it with lsof and stop it."
    ),
    "port-forward-kubectl": (
        "To reach a service in the cluster from your laptop, kubectl port-forward the service to a local address."
    ),
    "integrityerror-upsert": (
        "An IntegrityError from a unique constraint on insert means the row is there already: write an upsert "
        "(INSERT ... ON CONFLICT DO NOTHING) instead of checking first."
    ),
    "unique-index-naming": "Name unique indexes uq_<table>_<columns> so migrations can drop them by name.",
    # Lexical trap: the same words ("too many open"), another subject.
    "ulimit-open-files": (
        "Workers that crash with EMFILE have exhausted their file descriptors: raise ulimit -n for the service "
        "(LimitNOFILE in the unit file)."
    ),
    "too-many-open-prs": (
        "Too many open pull requests slow every review down: keep at most five open per person and close the "
        "stale ones every Friday."
    ),
    "npm-global-prefix": (
        "EACCES permission denied on npm install -g: set a user-owned prefix with npm config set prefix "
        "instead of using sudo."
    ),
    # Low overlap: the error and its lesson share at most one word.
    "opencv-libgl": "Install the OpenGL system package in the container image before importing OpenCV.",
    "deep-json": "Deeply nested JSON blows the interpreter stack; parse it iteratively instead of recursively.",
    # Filler, so that nothing wins by being the only lesson on a subject.
    "sqlite-wal": "SQLite needs WAL journal mode so readers keep working while a writer holds the lock.",
    "node-version": "The frontend build requires Node 20 or newer because of the global fetch API.",
    "ci-cache-key": "The CI cache key must include the lockfile hash, or stale dependencies get restored.",
    "timezone-utc": "Store timestamps in UTC and convert to local time only when displaying them.",
    "git-rebase-onto": "Use git rebase --onto to move a branch that was cut from the wrong base commit.",
    "flaky-sleep": "Replace fixed sleeps in integration tests with polling until the condition holds.",
    "alembic-defaults": "Alembic autogenerate misses server defaults, so review every generated migration by hand.",
}


@pytest.fixture(scope="module")
def store(request: pytest.FixtureRequest, backend: str, tmp_path_factory: pytest.TempPathFactory) -> Cairn:
    with default_env():
        svc = open_service(request, backend, tmp_path_factory.mktemp("rules"))
        load(svc, LESSONS)
        svc.drain_embeddings(ME)
        yield svc
        svc.store.dispose()


def _shared(error: str, lesson: str) -> set[str]:
    """Words (5-letter stems) the error's distilled terms share with the lesson's words."""
    return {t[:5] for t in distill(error)} & {t[:5] for t in query_terms(lesson)}


# ------------------------------------------------------------------------------------------ terms (pure)


def test_identifiers_kept_whole_and_split() -> None:
    terms = dict(weighted_terms("sqlalchemy.exc.IntegrityError: getUserById failed in user_repo.fetch_all", error=True))
    assert "sqlalchemy.exc.integrityerror" in terms  # the dotted name as written (a phrase)
    assert {"sqlalchemy", "integrityerror", "integrity"} <= set(terms)  # dotted and camelCase parts
    assert {"getuserbyid", "user", "id"} <= set(terms)
    assert {"user_repo.fetch_all", "user_repo", "repo", "fetch_all", "fetch"} <= set(terms)  # snake_case parts


def test_error_codes_and_exception_names_are_strong() -> None:
    terms = dict(weighted_terms("Error: connect ECONNREFUSED; IntegrityError; CrashLoopBackOff; TS2345", error=True))
    for strong in ("econnrefused", "integrityerror", "crashloopbackoff", "ts2345"):
        assert terms[strong] == STRONG_WEIGHT, (strong, terms)
    assert terms["connect"] == 1.0
    # Case carries the signal: a lower-case word that happens to start with E is an ordinary word.
    assert dict(weighted_terms("eventually consistent", error=True))["eventually"] == 1.0


def test_noise_is_dropped() -> None:
    text = (
        "2024-05-01T12:34:56Z ERROR [pid 4521] Traceback (most recent call last):\n"
        '  File "/srv/app/handlers/billing.py", line 88, in charge\n'
        "  commit 3f2a9c1d8e7b6a5f at 0x7f3a2b9c10 see https://example.com/errors/E1234\n"
        "RecursionError: maximum recursion depth exceeded"
    )
    terms = [t for t, _ in weighted_terms(text, error=True)]
    assert "billing" in terms and "recursionerror" in terms and "recursion" in terms
    for gone in ("srv", "app", "handlers", "88", "4521", "3f2a9c1d8e7b6a5f", "0x7f3a2b9c10", "example", "2024"):
        assert gone not in terms, (gone, terms)
    assert not {"error", "traceback", "line", "file"} & set(terms)  # what every error says
    # A question keeps "error" (an ordinary, common word there); only error texts drop the boilerplate.
    assert "error" in [t for t, _ in weighted_terms("which error does a full disk give?", error=False)]


# ------------------------------------------------------------------------------------------ ranking


@pytest.mark.parametrize(
    ("error", "target", "sibling"),
    [
        (
            "Error: connect ECONNREFUSED 127.0.0.1:5432\n    at TCPConnectWrap.afterConnect",
            "econnrefused-db-not-started",
            "connection-reset-by-proxy",
        ),
        ("Error: listen EADDRINUSE: address already in use :::3000", "eaddrinuse-stale-server", "port-forward-kubectl"),
        (
            "sqlalchemy.exc.IntegrityError: (psycopg2.errors.UniqueViolation) duplicate key value violates unique "
            'constraint "users_email_key"',
            "integrityerror-upsert",
            "unique-index-naming",
        ),
    ],
    ids=["ECONNREFUSED", "EADDRINUSE", "IntegrityError"],
)
def test_exact_error_code_wins(store: Cairn, error: str, target: str, sibling: str) -> None:
    # Precondition: the sibling is a real competitor — the vector arm puts it in its top three too.
    assert sibling in keys(store.search(ME, error, mode="vector", limit=3)) or sibling in recalled(
        store.recall(ME, error, floor=0.0, limit=5, mode="vector")
    )
    result = store.recall(ME, error)
    assert recalled(result)[:1] == [target], [(h["key"], h["relevance"]) for h in result["lessons"]]
    # The code matched lexically too (first by BM25 on SQLite; Postgres' ts_rank has no IDF, so the
    # repeated "connect" of the sibling can outrank it there: docs/KNOWN_ISSUES.md).
    assert store.recall(ME, error, floor=0.0, limit=5)["lessons"][0]["fts_rank"] is not None


@pytest.mark.parametrize(
    ("error", "target"),
    [
        ("ImportError: libGL.so.1: cannot open shared object file: No such file or directory", "opencv-libgl"),
        (
            'Traceback (most recent call last):\n  File "/srv/app/loader.py", line 88, in walk\n'
            "RecursionError: maximum recursion depth exceeded while calling a Python object",
            "deep-json",
        ),
    ],
    ids=["libGL", "recursion"],
)
def test_low_overlap_error_finds_its_lesson(store: Cairn, error: str, target: str) -> None:
    assert len(_shared(error, LESSONS[target])) <= 1, _shared(error, LESSONS[target])
    result = store.recall(ME, error)
    assert recalled(result)[:1] == [target], [(h["key"], h["relevance"]) for h in result["lessons"]]
    assert result["lessons"][0]["relevance"] >= RECALL_FLOOR


@pytest.mark.parametrize(
    "error",
    [
        'Exception in thread "main" java.lang.NullPointerException\n\tat com.acme.Foo.bar(Foo.java:12)',
        "error[E0599]: no method named `frobnicate` found for struct `Widget` in the current scope",
        "panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.main()",
    ],
    ids=["java-npe", "rust-E0599", "go-index"],
)
def test_unrelated_error_gets_nothing(store: Cairn, error: str) -> None:
    candidates = store.recall(ME, error, floor=0.0, limit=20)["lessons"]
    assert candidates, "recall saw no candidates at all: silence would prove nothing"
    assert max(h["relevance"] for h in candidates) < RECALL_FLOOR
    result = store.recall(ME, error)
    assert result["lessons"] == [] and result["text"] == ""


def test_lexical_trap_loses_to_the_real_answer(store: Cairn) -> None:
    error = "OSError: [Errno 24] Too many open files: '/var/lib/app/cache/segment-0042.db'"
    # Precondition: by words alone the trap wins ("too many open" against "files").
    assert keys(store.search(ME, error, mode="fts", limit=1)) == ["too-many-open-prs"]
    result = store.recall(ME, error, floor=0.0)
    assert recalled(result)[0] == "ulimit-open-files", [(h["key"], h["relevance"]) for h in result["lessons"]]
    assert result["lessons"][0]["relevance"] > 2 * result["lessons"][1]["relevance"]


def test_question_needs_only_some_of_its_words(store: Cairn) -> None:
    # Not one lesson holds every word of the question; the OR arm still finds the one that holds the rare ones.
    found = store.search(ME, "why does my insert hit an IntegrityError on the unique email column?", limit=3)
    assert found["results"][0]["key"] == "integrityerror-upsert"
    assert found["results"][0]["fts_rank"] == 1


def test_rules_hold_on_a_fresh_store_too(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> None:
    """The vector arm reads the ranking index: a lesson written after the first search is found next time."""
    with default_env():
        svc = open_service(request, backend, tmp_path / "fresh")
        load(svc, {k: LESSONS[k] for k in ("sqlite-wal", "timezone-utc", "node-version")})
        assert keys(svc.search(ME, "readers blocked by a writer", mode="vector", limit=1)) == ["sqlite-wal"]
        svc.write(ME, "global", "deep-json", LESSONS["deep-json"])
        query = "maximum recursion depth exceeded parsing a nested document"
        assert keys(svc.search(ME, query, mode="vector", limit=1)) == ["deep-json"]
        svc.store.dispose()
