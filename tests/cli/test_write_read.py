"""Writing and reading through the CLI: stdin values, scope refusals, versions, history and diff."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Cli, envelope
from tests.conftest import run_cli


def test_value_from_stdin_when_omitted_or_dash(cli: Cli) -> None:
    created = cli.ok("write", "global", "from-stdin", stdin="Pipe the value in.\n")
    assert created["action"] == "created"
    assert created["lesson"]["value"].strip() == "Pipe the value in."
    dashed = cli.ok("write", "global", "from-dash", "-", stdin="A dash means stdin too.")
    assert dashed["lesson"]["value"] == "A dash means stdin too."
    assert cli.ok("read", "global", "from-dash")["lesson"]["value"] == "A dash means stdin too."


def test_corrected_scope_in_the_refusal(cli: Cli) -> None:
    reason = cli.refused("INVALID_SCOPE", "write", "repo:acme/widget", "k", "value")
    assert "repo::acme/widget" in reason["message"]
    proc = cli("write", "repo:acme/widget", "k", "value")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "INVALID_SCOPE" in proc.stderr and "repo::acme/widget" in proc.stderr


def test_versions_recurrence_history_and_diff(cli: Cli) -> None:
    a = cli.ok("write", "repo::acme/widget", "Test Command", "Run pytest -q before pushing.", "--tag", "ci")
    assert (a["action"], a["lesson"]["key"], a["lesson"]["version"]) == ("created", "test-command", 1)
    # Same normalized content (case, whitespace, punctuation folded) at the same address: a recurrence.
    again = cli.ok("write", "repo::acme/widget", "test-command", "run  PYTEST -q before pushing")
    assert again["action"] == "recurred"
    assert again["lesson"]["seen_count"] == 2
    assert again["lesson"]["value"] == "Run pytest -q before pushing."  # no copy, no overwrite
    edit = cli.ok("write", "repo::acme/widget", "test-command", "Run make test before pushing.")
    assert (edit["action"], edit["lesson"]["version"]) == ("updated", 3)

    history = cli.ok("history", "repo::acme/widget", "test-command")
    values = [v["value"] for v in history["versions"]]
    assert values == ["Run pytest -q before pushing.", "Run pytest -q before pushing.", "Run make test before pushing."]
    assert [v["version"] for v in history["versions"]] == [1, 2, 3]
    assert all(v["actor"] and v["recorded_at"] for v in history["versions"])

    diff = cli.ok("diff", "repo::acme/widget", "test-command", "1", "3")
    assert "-Run pytest -q before pushing." in diff["value_diff"]
    assert "+Run make test before pushing." in diff["value_diff"]
    assert diff["fields"]["seen_count"] == {"from": 1, "to": 2}

    text = cli("history", "repo::acme/widget", "test-command").stdout
    assert "v1" in text and "v3" in text and "Run make test before pushing." in text
    text = cli("diff", "repo::acme/widget", "test-command", "1", "3").stdout
    assert "v1 -> v3" in text and "+Run make test before pushing." in text
    cli.refused("NOT_FOUND", "diff", "repo::acme/widget", "test-command", "1", "9")

    listed = cli.ok("list", "repo::acme/widget", "--tag", "ci")
    assert [item["key"] for item in listed["lessons"]] == ["test-command"]
    assert cli.ok("list", "global")["lessons"] == []  # other scopes are not mixed in


def test_read_as_of_record_time(cli: Cli) -> None:
    env1 = {"CAIRN_FAKE_NOW": "2025-01-10T12:00:00Z"}
    env2 = {"CAIRN_FAKE_NOW": "2025-02-10T12:00:00Z"}
    cli.ok("write", "global", "node", "Use Node 18.", env=env1)
    cli.ok("write", "global", "node", "Use Node 20.", env=env2)
    past = cli.ok("read", "global", "node", "--as-of", "2025-01-20", env=env2)
    assert past["lesson"]["value"] == "Use Node 18."
    assert cli.ok("read", "global", "node", env=env2)["lesson"]["value"] == "Use Node 20."
    cli.refused("NOT_FOUND", "read", "global", "node", "--as-of", "2024-12-31", env=env2)


def test_home_flag_and_env(tmp_path: Path) -> None:
    """``--home DIR`` wins over ``$CAIRN_HOME`` and creates the store there."""
    env_home, flag_home = tmp_path / "env-home", tmp_path / "flag" / "home"
    env_home.mkdir()
    proc = run_cli(env_home, "--json", "write", "global", "where", "In the flag home.", "--home", str(flag_home))
    assert envelope(proc)["status"] == "ok"
    assert (flag_home / "cairn.db").is_file()
    assert not (env_home / "cairn.db").exists()
    proc = run_cli(env_home, "--json", f"--home={flag_home}", "read", "global", "where")
    assert envelope(proc)["data"]["lesson"]["value"] == "In the flag home."
    proc = run_cli(env_home, "--json", "read", "global", "where")
    assert envelope(proc)["reason"]["code"] == "NOT_FOUND"


def test_archive_restore_and_feedback(cli: Cli) -> None:
    cli.ok("write", "project::shop", "deploy", "Deploys go out on Tuesdays.")
    assert cli.ok("archive", "project::shop", "deploy")["changed"] is True
    assert cli.refused("NOT_FOUND", "read", "project::shop", "deploy")
    assert cli.ok("list", "project::shop")["lessons"] == []
    assert [x["key"] for x in cli.ok("list", "project::shop", "--archived")["lessons"]] == ["deploy"]
    assert cli.ok("restore", "project::shop", "deploy")["changed"] is True
    fb = cli.ok("feedback", "project::shop", "deploy", "not-helped")
    assert fb["lesson"]["not_helped_count"] == 1
    history = cli.ok("history", "project::shop", "deploy")
    assert [v["action"] for v in history["versions"]] == ["create", "archive", "restore", "feedback"]
    cli.refused("INVALID_INPUT", "feedback", "project::shop", "deploy", "meh")


def test_links_and_neighborhood(cli: Cli) -> None:
    cli.ok("write", "global", "a", "Lesson A about caching.")
    cli.ok("write", "global", "b", "Lesson B about cache invalidation.")
    cli.ok("write", "global", "c", "Lesson C about TTLs.")
    assert cli.ok("link", "global", "a", "global", "b", "--rel", "related")["changed"] is True
    assert cli.ok("link", "global", "a", "global", "b", "--rel", "related")["changed"] is False
    cli.ok("link", "global", "b", "global", "c", "--rel", "derived_from")
    cli.refused("INVALID_INPUT", "link", "global", "a", "global", "c", "--rel", "friends")
    one = cli.ok("neighborhood", "global", "a", "--depth", "1")
    assert [n["key"] for n in one["nodes"]] == ["b"]
    two = cli.ok("neighborhood", "global", "a", "--depth", "2")
    assert {n["key"] for n in two["nodes"]} == {"b", "c"}
