"""``cairn search``, ``cairn recall`` and ``cairn reindex`` through the real entry point (subprocesses)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cairn.search.embed import ENV_MODEL
from cairn.service.search import RECALL_FLOOR
from tests.cli.conftest import Cli

LESSONS = [
    ("global", "sqlite-wal", "SQLite needs WAL journal mode so readers keep working while a writer holds the lock."),
    ("global", "pyyaml-import", "ModuleNotFoundError for yaml means PyYAML is missing: pip install pyyaml."),
    ("global", "squash-release", "Use squash merges on release branches so the changelog stays readable."),
    ("global", "timezone-utc", "Store timestamps in UTC and convert to local time only when displaying them."),
    ("repo::acme/web", "web-tests", "Run the web tests with npm test; they need the mock server on port 4010."),
    ("repo::acme/api", "api-tests", "Run the api tests with pytest -n auto; they need a local Postgres."),
]
RELATED = (
    "Traceback (most recent call last):\n"
    '  File "/home/dev/app/db.py", line 41, in connect\n'
    "sqlite3.OperationalError: database is locked\n"
)
UNRELATED = "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.\n"
CLEAN_ENV = {ENV_MODEL: "", "CAIRN_FAKE_NOW": ""}


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """One store for the module: every command here only reads it (reindex rebuilds the same content)."""
    for name in CLEAN_ENV:
        assert not os.environ.get(name), f"{name} is set in the test environment"
    home: Path = tmp_path_factory.mktemp("cli-search")
    c = Cli(home)
    records = "\n".join(json.dumps({"scope": s, "key": k, "value": v}) for s, k, v in LESSONS)
    data = c.ok("import", "-", stdin=records)
    assert data["created"] == len(LESSONS)
    return c


def test_search_human_output(cli: Cli) -> None:
    proc = cli("search", "readers blocked while writing to the database")
    assert proc.returncode == 0
    first = proc.stdout.splitlines()[0]
    assert "(global) sqlite-wal" in first and "score" in first
    assert "WAL journal mode" in proc.stdout  # the snippet


def test_search_json_envelope(cli: Cli) -> None:
    data = cli.ok("search", "yaml module missing", "--limit", "2")
    assert data["mode"] == "hybrid" and data["query"] == "yaml module missing"
    assert len(data["results"]) == 2
    top = data["results"][0]
    assert top["key"] == "pyyaml-import"
    assert {"scope", "key", "trust", "score", "snippet", "lesson"} <= set(top)
    assert top["trust"] == "candidate" and top["lesson"]["value"].startswith("ModuleNotFoundError")


def test_search_modes_scopes_and_ladder(cli: Cli) -> None:
    assert [h["key"] for h in cli.ok("search", "squash", "--mode", "fts")["results"]] == ["squash-release"]
    scoped = cli.ok("search", "run the tests", "--scope", "repo::acme/api")["results"]
    assert [h["key"] for h in scoped] == ["api-tests"]
    laddered = cli.ok("search", "run the tests", "--repo", "acme/web", "--limit", "100")["results"]
    assert {h["scope"] for h in laddered} <= {"repo::acme/web", "global"}
    assert "web-tests" in [h["key"] for h in laddered] and "api-tests" not in [h["key"] for h in laddered]


def test_search_with_no_match_says_so(cli: Cli) -> None:
    proc = cli("search", "zzqxv", "--mode", "fts")
    assert proc.returncode == 0 and proc.stdout.strip() == "no matches"
    assert cli.ok("search", "zzqxv", "--mode", "fts")["results"] == []


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["search", ""], "INVALID_INPUT"),
        (["search", "x", "--limit", "0"], "INVALID_INPUT"),
        (["search", "x", "--mode", "semantic"], "INVALID_INPUT"),
        (["search", "x", "--scope", "repo:acme/web"], "INVALID_SCOPE"),
        (["search", "x", "--trust", "rejected"], "INVALID_INPUT"),
    ],
)
def test_search_refusals(cli: Cli, args: list[str], code: str) -> None:
    assert cli.refused(code, *args)["message"]


def test_search_refusal_without_json(cli: Cli) -> None:
    proc = cli("search", "x", "--limit", "0")
    assert proc.returncode == 1 and proc.stdout == "" and proc.stderr.startswith("cairn: INVALID_INPUT: ")


def test_recall_unrelated_error_prints_nothing(cli: Cli) -> None:
    proc = cli("recall", stdin=UNRELATED)
    assert proc.returncode == 0
    assert proc.stdout == "" and proc.stderr == ""


def test_recall_related_error_prints_the_lesson(cli: Cli) -> None:
    proc = cli("recall", stdin=RELATED)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("Cairn recalls")
    assert any("(global) sqlite-wal [unverified]: SQLite needs WAL journal mode" in ln for ln in lines[1:])
    assert len(lines) <= 4  # a header and at most three lessons


def test_recall_json(cli: Cli) -> None:
    data = cli.ok("recall", stdin=RELATED)
    assert data["floor"] == RECALL_FLOOR
    assert [h["key"] for h in data["lessons"]][:1] == ["sqlite-wal"]
    assert all(h["relevance"] >= RECALL_FLOOR for h in data["lessons"]) and len(data["lessons"]) <= 3
    assert "sqlite3.operationalerror" in data["terms"] and "41" not in data["terms"]
    silent = cli.ok("recall", stdin=UNRELATED)
    assert silent["lessons"] == [] and silent["terms"]


def test_recall_text_option_and_context(cli: Cli) -> None:
    assert [h["key"] for h in cli.ok("recall", "--text", RELATED)["lessons"]][:1] == ["sqlite-wal"]
    # Outside the ladder: a repo lesson never comes back for another repo's context.
    data = cli.ok("recall", "--text", "npm test fails: mock server not running on port 4010", "--repo", "acme/api")
    assert "web-tests" not in [h["key"] for h in data["lessons"]]
    data = cli.ok("recall", "--text", "npm test fails: mock server not running on port 4010", "--repo", "acme/web")
    assert [h["key"] for h in data["lessons"]][:1] == ["web-tests"]


def test_reindex(cli: Cli) -> None:
    data = cli.ok("reindex")
    assert data["indexed"] == len(LESSONS) and data["embedded"] == len(LESSONS)
    assert data["model"] == "all-MiniLM-L6-v2-int8-tokq" and data["dim"] == 384
    proc = cli("reindex")
    assert proc.returncode == 0 and proc.stdout.startswith(f"reindexed {len(LESSONS)} lesson(s)")
    assert [h["key"] for h in cli.ok("search", "squash", "--mode", "fts")["results"]] == ["squash-release"]


def test_commands_that_need_no_model_do_not_load_it(cli: Cli) -> None:
    """With an unloadable model configured, only the commands that embed fail (exit 2, SETUP)."""
    broken = {ENV_MODEL: "no-such-model"}
    assert cli.ok("read", "global", "squash-release", env=broken)
    assert cli.ok("list", env=broken)
    assert cli.ok("search", "squash", "--mode", "fts", env=broken)["results"]
    env = cli.json("search", "squash", env=broken)
    assert env["status"] == "error" and env["reason"]["code"] == "SETUP"
