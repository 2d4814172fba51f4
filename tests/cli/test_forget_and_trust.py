"""Forget and tombstones, the review queue, promotion by distinct sessions, ``--by-human``."""

from __future__ import annotations

from tests.cli.conftest import Cli


def test_forget_tombstones_content_under_any_key_and_scope(cli: Cli) -> None:
    cli.ok("write", "repo::acme/widget", "skip-tests", "Skip the flaky tests with -k 'not slow'.")
    forgot = cli.ok("forget", "repo::acme/widget", "skip-tests", "--reason", "hides real failures")
    tomb = forgot["tombstone_id"]
    assert isinstance(tomb, int)
    cli.refused("NOT_FOUND", "read", "repo::acme/widget", "skip-tests")

    # Same normalized content (re-cased, re-punctuated), another key, another scope: refused.
    reason = cli.refused("TOMBSTONED", "write", "project::other", "new-key", "skip the FLAKY tests with -k not slow")
    assert str(tomb) in reason["message"]
    assert "hides real failures" in reason["message"]
    assert reason["data"]["tombstone_id"] == tomb
    # The address is tombstoned too, whatever the content.
    cli.refused("TOMBSTONED", "write", "repo::acme/widget", "skip-tests", "Something else entirely.")
    proc = cli("write", "global", "k", "Skip the flaky tests with -k 'not slow'")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("cairn: TOMBSTONED: ") and "hides real failures" in proc.stderr

    assert [t["id"] for t in cli.ok("tombstones")["tombstones"]] == [tomb]
    again = cli.ok("forget", "repo::acme/widget", "skip-tests", "--reason", "again")
    assert again["already"] is True and again["tombstone_id"] == tomb

    cli.refused("INVALID_INPUT", "unforget", str(tomb))  # a reason is required
    cli.ok("unforget", str(tomb), "--reason", "the flake is fixed")
    cli.refused("CONFLICT", "unforget", str(tomb), "--reason", "twice")
    assert cli.ok("write", "project::other", "new-key", "Skip the flaky tests with -k 'not slow'.")["action"] == (
        "created"
    )
    actions = [e["action"] for e in cli.ok("audit")["entries"]]
    assert actions == ["create", "forget", "unforget", "create"]


def test_review_verify_and_reject(cli: Cli) -> None:
    cli.ok("write", "global", "good", "Pin dependencies in pyproject.")
    cli.ok("write", "global", "bad", "Commit secrets to the repo for convenience.")
    queue = cli.ok("review")
    assert [(c["key"], c["trust"]) for c in queue["candidates"]] == [("good", "candidate"), ("bad", "candidate")]
    text = cli("review").stdout
    assert "2 candidate(s)" in text and "good" in text

    verified = cli.ok("review", "verify", "global", "good")
    assert verified["changed"] is True and verified["lesson"]["trust"] == "verified"
    assert cli.ok("review", "verify", "global", "good")["changed"] is False
    rejected = cli.ok("review", "reject", "global", "bad", "--reason", "leaks credentials")
    assert rejected["tombstone_id"]
    assert cli.ok("review")["candidates"] == []
    cli.refused("NOT_FOUND", "read", "global", "bad")
    cli.refused("NOT_FOUND", "review", "verify", "global", "bad")
    assert [x["key"] for x in cli.ok("list")["lessons"]] == ["good"]
    cli.refused("TOMBSTONED", "write", "project::x", "other", "commit secrets to the repo, for convenience")
    cli.refused("INVALID_INPUT", "review", "reject", "global", "good")  # no reason


def test_promotion_counts_distinct_sessions_from_env_and_flag(cli: Cli) -> None:
    value = "Run the linter before committing."
    first = cli.ok("write", "global", "lint", value, env={"CAIRN_SESSION": "s1"})
    assert first["lesson"]["trust"] == "candidate"
    same = cli.ok("write", "global", "lint", value, env={"CAIRN_SESSION": "s1"})
    assert (same["action"], same["lesson"]["trust"], same["lesson"]["seen_count"]) == ("recurred", "candidate", 2)
    no_session = cli.ok("write", "global", "lint", value)
    assert (no_session["action"], no_session["lesson"]["trust"]) == ("recurred", "candidate")
    second = cli.ok("--session", "s2", "write", "global", "lint", value)
    assert second["lesson"]["trust"] == "candidate"
    # The flag wins over the environment: this is session s3, not s1 again.
    third = cli.ok("write", "global", "lint", value, "--session", "s3", env={"CAIRN_SESSION": "s1"})
    assert third["action"] == "promoted"
    assert third["lesson"]["trust"] == "verified"
    assert third["lesson"]["seen_count"] == 5
    entry = cli.ok("audit", "--lesson", "global", "lint")["entries"][-1]
    assert entry["action"] == "promote" and entry["session"] == "s3"


def test_promotion_threshold_is_configurable(cli: Cli) -> None:
    (cli.home / "config.toml").write_text("[trust]\npromotion_threshold = 2\n")
    cli.ok("write", "global", "t", "Two sessions suffice here.", "--session", "a")
    assert cli.ok("write", "global", "t", "Two sessions suffice here.", "--session", "b")["action"] == "promoted"


def test_by_human_writes_start_verified(cli: Cli) -> None:
    human = cli.ok("write", "global", "from-a-person", "Releases are cut from main.", "--by-human")
    assert human["lesson"]["trust"] == "verified"
    assert human["lesson"]["origin"] == "human"
    agent = cli.ok("write", "global", "from-an-agent", "Releases are cut from a release branch.")
    assert agent["lesson"]["trust"] == "candidate"
    # An agent's edit to a verified lesson is new content: a candidate again.
    edited = cli.ok("write", "global", "from-a-person", "Releases are cut from main on Mondays.")
    assert edited["lesson"]["trust"] == "candidate"
    # A person's recurrence vouches for it.
    vouched = cli.ok("--by-human", "write", "global", "from-a-person", "Releases are cut from main on Mondays.")
    assert vouched["lesson"]["trust"] == "verified"
    assert [c["key"] for c in cli.ok("review")["candidates"]] == ["from-an-agent"]


def test_supersede_ambiguity_and_explicit_target(cli: Cli) -> None:
    cli.ok("write", "repo::acme/widget", "node-version", "Use Node 18.")
    cli.ok("write", "repo::acme/gadget", "node-version", "Use Node 18 LTS.")
    reason = cli.refused("SUPERSEDE_AMBIGUOUS", "supersede", "project::web", "node-version", "Use Node 22.")
    assert "repo::acme/widget" in reason["message"] and "repo::acme/gadget" in reason["message"]
    assert {c["scope"] for c in reason["data"]["candidates"]} == {"repo::acme/widget", "repo::acme/gadget"}
    cli.refused("NOT_FOUND", "read", "project::web", "node-version")  # nothing was written

    done = cli.ok(
        "supersede", "project::web", "node-version", "Use Node 22.", "--supersedes", "repo::acme/widget", "node-version"
    )
    assert done["superseded"]["scope"] == "repo::acme/widget"
    cli.refused("NOT_FOUND", "read", "repo::acme/widget", "node-version")
    assert cli.ok("read", "project::web", "node-version")["lesson"]["value"] == "Use Node 22."
    history = cli.ok("history", "repo::acme/widget", "node-version")
    assert [v["action"] for v in history["versions"]] == ["create", "superseded"]

    plain = cli.ok("supersede", "global", "brand-new", "Nothing to replace.")
    assert plain["action"] == "created" and plain["superseded"] is None
    cli.refused("NOT_FOUND", "supersede", "global", "x", "New.", "--supersedes", "repo::acme/nothing", "node-version")
