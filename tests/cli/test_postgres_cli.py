"""The CLI on Postgres: ``--db URL`` or ``CAIRN_DATABASE_URL``, ``cairn db upgrade``, and the daemon.

The service contract runs on both databases through ``store_url`` (tests/service, tests/store,
tests/search); these tests cover what only the surfaces do: choosing the database, reporting the
migration, keeping a password out of every message, and a daemon that answers only for the
database it serves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Cli, envelope
from tests.conftest import PgDatabases, run_cli
from tests.pg_server import PgServer


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    """A fresh migrated Postgres database (the session's throwaway server), as a libpq URL."""
    dbs: PgDatabases = request.getfixturevalue("pg_databases")
    name, url = dbs.new()
    request.addfinalizer(lambda: dbs.drop(name))
    return url.replace("postgresql+psycopg://", "postgresql://", 1)  # what a user types


def test_db_flag_puts_everything_in_postgres_and_nothing_in_the_home(cli: Cli, cairn_home: Path, pg_url: str) -> None:
    cli.ok("--db", pg_url, "write", "repo::acme/api", "retry-backoff", "Billing retries need jittered backoff.")
    assert cli.ok("--db", pg_url, "read", "repo::acme/api", "retry-backoff")["lesson"]["seen_count"] == 1
    hits = cli.ok("--db", pg_url, "search", "jittered backoff")["results"]
    assert [h["key"] for h in hits] == ["retry-backoff"]
    assert not (cairn_home / "cairn.db").exists()  # the SQLite store was never opened
    # Without --db the same home is its own (empty) SQLite store.
    assert cli.ok("list")["lessons"] == []


def test_the_environment_names_the_database_and_the_flag_wins(cli: Cli, pg_url: str, request) -> None:
    cli.ok("write", "global", "k", "Written through the environment.", env={"CAIRN_DATABASE_URL": pg_url})
    assert cli.ok("--db", pg_url, "read", "global", "k")["lesson"]["value"] == "Written through the environment."
    dbs: PgDatabases = request.getfixturevalue("pg_databases")
    other_name, other = dbs.new()
    request.addfinalizer(lambda: dbs.drop(other_name))
    listed = cli.ok("--db", other, "list", env={"CAIRN_DATABASE_URL": pg_url})
    assert listed["lessons"] == []


def test_context_and_recall_run_on_postgres(cli: Cli, pg_url: str) -> None:
    cli.ok("--db", pg_url, "write", "repo::acme/api", "retry-backoff", "Billing retries need jittered backoff.")
    data = cli.ok("--db", pg_url, "context", "--repo", "acme/api", "--branch", "feat/retry-backoff")
    assert data["served_by"] == "process" and data["eligible"] == 1
    assert "retry-backoff" in data["text"]
    recalled = cli.ok("--db", pg_url, "recall", "--text", "billing retries exhausted the backoff", "--repo", "acme/api")
    assert recalled["served_by"] == "process"


def test_db_upgrade_reports_the_revisions_on_postgres(cli: Cli, pg_server: PgServer) -> None:
    import uuid

    name = "cli_upgrade_" + uuid.uuid4().hex[:8]
    url = pg_server.create_database(name).replace("postgresql+psycopg://", "postgres://", 1)
    first = cli.ok("--db", url, "db", "upgrade")
    assert (first["dialect"], first["from"], first["to"]) == ("postgresql", None, first["head"])
    again = cli.ok("--db", url, "db", "upgrade")
    assert again["from"] == again["to"] == again["head"]
    text = cli("--db", url, "db", "upgrade").stdout
    assert "already at revision" in text and name in text


def test_a_fresh_postgres_is_not_migrated_by_a_request_and_status_shows_the_protection(
    cli: Cli, pg_server: PgServer
) -> None:
    import uuid

    url = pg_server.create_database("cli_fresh_" + uuid.uuid4().hex[:8])
    before = cli.ok("--db", url, "db", "status")
    assert before["revision"] is None and "security" not in before
    env = cli.json("--db", url, "write", "global", "k", "v")
    assert env["status"] == "error" and env["reason"]["code"] == "SETUP"
    assert "cairn db upgrade" in env["reason"]["message"]
    assert cli.ok("--db", url, "db", "status")["revision"] is None  # the refused write changed nothing
    cli.ok("--db", url, "db", "upgrade")
    sec = cli.ok("--db", url, "db", "status")["security"]
    assert sec["app_role"] == "cairn_app" and not sec["app_role_bypasses"]
    assert sec["unprotected"] == [] and sec["tables_forced"] == sec["tables"] > 15
    assert cli.ok("--db", url, "write", "global", "k", "v")["action"] == "created"


def test_db_upgrade_works_on_sqlite_too(cli: Cli, cairn_home: Path) -> None:
    data = cli.ok("db", "upgrade")
    assert (data["dialect"], data["from"]) == ("sqlite", None)
    assert (cairn_home / "cairn.db").exists()


def test_an_unreachable_database_is_a_setup_error_without_the_password(cli: Cli, tmp_path: Path) -> None:
    url = f"postgresql://alice:s3cret-pw@/cairn?host={tmp_path}&port=1"
    for args in (("list",), ("db", "upgrade"), ("context",)):
        proc = run_cli(cli.home, "--json", "--db", url, *args)
        env = envelope(proc)
        assert env["status"] == "error" and env["reason"]["code"] == "SETUP", env
        assert "s3cret-pw" not in proc.stdout + proc.stderr
        assert "cannot open the database" in env["reason"]["message"]


def test_a_url_of_another_kind_is_refused(cli: Cli) -> None:
    proc = run_cli(cli.home, "--json", "--db", "mysql://root:pw@localhost/x", "list")
    env = envelope(proc)
    assert env["reason"]["code"] == "SETUP" and "pw@" not in proc.stdout


def test_db_needs_a_value(cli: Cli) -> None:
    assert cli.refused("INVALID_INPUT", "list", "--db")["message"].endswith("--db URL")


def test_the_daemon_answers_only_for_the_database_it_serves(cli: Cli, cairn_home: Path, pg_url: str) -> None:
    from tests.daemon.test_daemon import start_daemon, stop_daemon

    cli.ok("--db", pg_url, "write", "repo::acme/api", "retry-backoff", "Billing retries need jittered backoff.")
    daemon = start_daemon(cairn_home, "--db", pg_url)
    try:
        args = ("context", "--repo", "acme/api", "--branch", "main")
        served = cli.ok("--db", pg_url, *args)
        assert served["served_by"] == "daemon" and served["eligible"] == 1
        # Same home, the home's SQLite store: not what the daemon holds open, so the work runs here.
        local = cli.ok(*args)
        assert local["served_by"] == "process" and local["eligible"] == 0
        # The environment names the database as well as the flag does.
        via_env = json.loads(run_cli(cairn_home, "--json", *args, env={"CAIRN_DATABASE_URL": pg_url}).stdout)["data"]
        assert via_env["served_by"] == "daemon"
    finally:
        code, _, err = stop_daemon(daemon)
    assert code == 0, err


def test_install_refuses_to_write_a_password_into_a_hook(cli: Cli, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude")}
    proc = run_cli(cli.home, "--json", "--db", "postgresql://alice:pw@db/cairn", "install", "claude-code", env=env)
    reason = envelope(proc)["reason"]
    assert reason["code"] == "INVALID_INPUT" and "password" in reason["message"]
    assert not (tmp_path / ".claude" / "settings.json").exists()


@pytest.fixture(autouse=True)
def _no_daemon_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAIRN_DATABASE_URL", raising=False)
    monkeypatch.delenv("CAIRN_NO_DAEMON", raising=False)
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")
