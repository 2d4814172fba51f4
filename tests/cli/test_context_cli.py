"""``cairn context`` through the real entry point (subprocesses), in and out of a real git checkout, and the
settings layers it reads (``$CAIRN_HOME/config.toml`` → ``.cairn.toml`` → ``$CAIRN_CONTEXT_MAX_CHARS`` →
``--max-chars``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cairn.core.context import FENCE_CLOSE, FENCE_OPEN
from tests import inprocess
from tests.cli.conftest import assert_clean_stderr, envelope

B, R, P, G = "branch::acme/api::feat/x", "repo::acme/api", "project::api", "global"
HEADER = re.compile(r"^Cairn: (\d+) of (\d+) lessons loaded · (\S+) — ")
SEED = [
    (G, "g-one", "Keep commits small and focused", []),
    (G, "g-two", "Write the test before the fix", []),
    (G, "ci-0", "CI run zero failed on the flaky job", ["loop::ci"]),
    (G, "ci-1", "CI run one failed on the flaky job again", ["loop::ci"]),
    (R, "r-one", "The api needs Postgres 16 for its tests", []),
    (R, "shared", "marker-shadowed repo version", []),
    (B, "shared", "The branch version of the shared lesson", []),
    (B, "b-one", "This branch renames the retry module", []),
    (P, "p-one", "The api project deploys on Tuesdays", []),
    ("repo::acme/web", "w-one", "marker-outside web repo", []),
    ("branch::acme/api::main", "m-one", "marker-outside main branch", []),
    ("project::web", "pw-one", "marker-outside web project", []),
]
# Eligible in the acme/api feat/x ladder, computed from SEED (+ one human loop lesson written separately):
# branch: shared, b-one; repo: r-one (its "shared" is shadowed); project: p-one; global: 4 + human-ci.
EXPECTED = {B: 2, R: 1, P: 1, G: 5}


def cli_env(home: Path, user_home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "GIT_"))}
    env.update(
        CAIRN_HOME=str(home),
        CAIRN_EMBED_MODEL="hash-test-64",
        CAIRN_NO_DAEMON="1",
        CAIRN_ACTOR="agent-a",
        HOME=str(user_home),
        GIT_CONFIG_NOSYSTEM="1",
    )
    env.update(extra or {})
    return env


def cairn(home: Path, *args: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None):
    user_home = home.parent / "user-home"
    user_home.mkdir(exist_ok=True)
    proc = inprocess.run(args, env=cli_env(home, user_home, env), inherit_env=False, cwd=cwd, input=stdin)
    assert_clean_stderr(proc)
    return proc


def ok(home: Path, *args: str, cwd: Path, **kw: Any) -> dict[str, Any]:
    env = envelope(cairn(home, "--json", *args, cwd=cwd, **kw))
    assert env["status"] == "ok", env
    return env["data"]


def git_repo(path: Path, remote: str | None = "git@github.com:Acme/Api.git", branch: str = "feat/x") -> Path:
    path.mkdir(parents=True)
    env = {**os.environ, "HOME": str(path.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True, env=env)
    if remote:
        subprocess.run(["git", "remote", "add", "origin", remote], cwd=path, check=True, env=env)
    subprocess.run(["git", "checkout", "-q", "-b", branch], cwd=path, check=True, env=env)
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A seeded Cairn home, a git checkout of Acme/Api on feat/x, and a directory outside any repository."""
    root = tmp_path_factory.mktemp("context-cli")
    home = root / "home"
    outside = root / "not-a-repo"
    outside.mkdir()
    repo = git_repo(root / "Api")
    records = "\n".join(json.dumps({"scope": s, "key": k, "value": v, "tags": t}) for s, k, v, t in SEED)
    assert ok(home, "import", "-", cwd=outside, stdin=records)["created"] == len(SEED)
    ok(
        home,
        "--by-human",
        "write",
        G,
        "human-ci",
        "A person's note about the CI cache",
        "--tag",
        "loop::ci",
        cwd=outside,
    )
    return {"home": home, "repo": repo, "outside": outside}


def test_context_text_in_a_git_checkout(world: dict[str, Path]) -> None:
    """Plain ``cairn context`` in a checkout: the ladder comes from git, the header counts exactly, the lessons
    are fenced one per line, candidates are marked, shadowed and foreign lessons are absent."""
    proc = cairn(world["home"], "context", cwd=world["repo"])
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.rstrip("\n")
    lines = text.split("\n")
    header = HEADER.match(lines[0])
    assert header, lines[0]
    body = lines[lines.index(FENCE_OPEN) + 1 : lines.index(FENCE_CLOSE)]
    assert (int(header.group(1)), int(header.group(2)), header.group(3)) == (len(body), sum(EXPECTED.values()), B)
    assert "marker-" not in text
    shown = {line.split(" — ")[0] for line in body}
    assert f"- ({B}) shared" in shown and f"- ({R}) shared" not in shown
    assert sum(line.startswith(f"- ({G}) ci-") for line in body) == 1  # the loop::ci bucket, capped at one
    assert f"- ({G}) human-ci" in shown  # a person's lesson is never capped
    candidate = next(line for line in body if line.startswith(f"- ({R}) r-one — "))
    assert candidate.endswith("[unverified]")
    assert not next(line for line in body if line.startswith(f"- ({G}) human-ci — ")).endswith("[unverified]")
    assert lines[-1] == f"More: {G} 1 — `cairn search QUERY` to drill in."


def test_context_json_in_a_git_checkout(world: dict[str, Path]) -> None:
    """``--json``: one envelope; the ladder is branch::acme/api::feat/x, repo::acme/api, project::api, global;
    per-scope counts are exact; lessons carry scope, key, trust, tags, score and factors."""
    data = ok(world["home"], "context", cwd=world["repo"])
    assert data["ladder"] == [B, R, P, G]
    assert {s["scope"]: s["eligible"] for s in data["scopes"]} == EXPECTED
    assert data["eligible"] == sum(EXPECTED.values())
    assert data["loaded"] == len(data["lessons"]) == sum(EXPECTED.values()) - 1
    assert data["scopes"][-1] == {"scope": G, "eligible": 5, "loaded": 4, "left_out": 1}
    assert data["terms"] == []  # "feat/x": no topic word of two letters or more
    assert (data["budget"], data["chars"]) == (3000, len(data["text"]))
    for lesson in data["lessons"]:
        assert {"scope", "key", "trust", "tags", "score", "factors"} <= set(lesson)
    assert "marker-" not in json.dumps(data)


def test_context_outside_a_repository_is_global_only(world: dict[str, Path]) -> None:
    """Outside any git checkout the ladder is just ``global``, counted exactly."""
    data = ok(world["home"], "context", cwd=world["outside"])
    assert data["ladder"] == [G]
    assert data["eligible"] == 5 and {s["scope"] for s in data["scopes"]} == {G}
    assert all(lesson["scope"] == G for lesson in data["lessons"])


def test_context_flags_override_the_checkout(world: dict[str, Path]) -> None:
    """``--branch`` replaces the detected branch (and its terms), ``--loop-cap 0`` drops the agent loop
    lessons but keeps the person's, ``--max-chars`` sets the budget and the block fits it."""
    data = ok(
        world["home"],
        "context",
        "--branch",
        "feat/retry-backoff",
        "--loop-cap",
        "0",
        "--max-chars",
        "700",
        "--task",
        "postgres",
        cwd=world["repo"],
    )
    assert data["ladder"] == ["branch::acme/api::feat/retry-backoff", R, P, G]
    assert data["terms"] == ["retry", "backoff", "postgres"]
    assert (data["budget"], data["loop_cap"]) == (700, 0)
    assert len(data["text"]) <= 700
    keys = [lesson["key"] for lesson in data["lessons"]]
    assert not any(k.startswith("ci-") for k in keys)
    # Another branch rung now: feat/x's two lessons are out, and the repo's "shared" is no longer shadowed.
    assert {s["scope"]: s["eligible"] for s in data["scopes"]} == {data["ladder"][0]: 0, R: 2, P: 1, G: 5}
    assert keys[0] == "r-one"  # the task's word lifts the Postgres lesson


def test_an_explicit_other_repo_does_not_borrow_the_checkouts_branch(world: dict[str, Path]) -> None:
    """``--repo acme/web`` inside the Acme/Api checkout: feat/x and project api belong to another repository,
    so the ladder is repo::acme/web and global only, and acme/api's lessons are neither shown nor counted."""
    data = ok(world["home"], "context", "--repo", "acme/web", cwd=world["repo"])
    assert data["ladder"] == ["repo::acme/web", G]
    assert {s["scope"]: s["eligible"] for s in data["scopes"]} == {"repo::acme/web": 1, G: 5}
    assert not any(lesson["scope"] in (B, R, P) for lesson in data["lessons"])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--max-chars", "abc"], "--max-chars must be a whole number"),
        (["--max-chars", "199"], "between 200 and 20000"),
        (["--max-chars", "20001"], "between 200 and 20000"),
        (["--loop-cap", "-1"], "between 0 and 100"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--max-chars"], "expected one argument"),
    ],
)
def test_bad_flags_give_one_invalid_input_envelope(world: dict[str, Path], args: list[str], needle: str) -> None:
    """A malformed flag is refused before any work: one JSON envelope, INVALID_INPUT, exit 1."""
    env = envelope(cairn(world["home"], "--json", "context", *args, cwd=world["outside"]))
    assert env["status"] == "refused" and env["reason"]["code"] == "INVALID_INPUT"
    assert needle in env["reason"]["message"]


def test_an_empty_ladder_message_also_fits_the_budget(tmp_path: Path) -> None:
    """With nothing eligible the CLI prints a one-line notice instead of a block; that notice is printed as
    the block and must fit the budget too, however long the repository and branch names are."""
    home = tmp_path / "home"
    long_repo = "o" * 60 + "/" + "r" * 60
    proc = cairn(
        home, "context", "--repo", long_repo, "--branch", "b" * 80, "--project", "p" * 60, "--max-chars", "200",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.rstrip("\n")) <= 200, proc.stdout


# -- settings layers ------------------------------------------------------------------------------------------------


@pytest.fixture
def configured(tmp_path: Path) -> dict[str, Path]:
    """A home whose config.toml says 1500 and a checkout whose .cairn.toml says 900."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[context]\nmax_chars = 1500\n")
    repo = git_repo(tmp_path / "Api")
    (repo / ".cairn.toml").write_text("[context]\nmax_chars = 900\n")
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    return {"home": home, "repo": repo, "sub": sub, "outside": tmp_path}


def test_repo_file_overrides_home_and_env_and_flag_override_both(configured: dict[str, Path]) -> None:
    """``.cairn.toml`` (found from a subdirectory) beats ``config.toml``; ``$CAIRN_CONTEXT_MAX_CHARS`` beats
    both; ``--max-chars`` beats everything; outside the checkout the home file applies."""
    home = configured["home"]
    assert ok(home, "context", cwd=configured["sub"])["budget"] == 900
    assert ok(home, "context", cwd=configured["outside"])["budget"] == 1500
    env = {"CAIRN_CONTEXT_MAX_CHARS": "1200"}
    assert ok(home, "context", cwd=configured["repo"], env=env)["budget"] == 1200
    assert ok(home, "context", "--max-chars", "700", cwd=configured["repo"], env=env)["budget"] == 700


def test_config_show_names_every_value_and_its_source(configured: dict[str, Path]) -> None:
    """``cairn config show --json`` lists every key with its value and where it came from."""
    home, repo = configured["home"], configured["repo"]
    data = ok(home, "config", "show", cwd=repo, env={"CAIRN_CONTEXT_LOOP_CAP": "2"})
    rows = {row["key"]: row for row in data["settings"]}
    assert rows["context.max_chars"]["value"] == 900
    assert Path(rows["context.max_chars"]["source"]).resolve() == (repo / ".cairn.toml").resolve()
    assert (rows["context.loop_cap"]["value"], rows["context.loop_cap"]["source"]) == (2, "$CAIRN_CONTEXT_LOOP_CAP")
    assert (rows["context.half_life_days"]["value"], rows["context.half_life_days"]["source"]) == (14.0, "default")
    assert {"context.weights.recency", "context.candidate_factor", "trust.promotion_threshold"} <= set(rows)
    assert Path(data["files"]["repo"]).resolve() == (repo / ".cairn.toml").resolve()


def test_an_unknown_key_is_refused_with_the_nearest_known_one(configured: dict[str, Path]) -> None:
    """A typo (``max_char``) is not silently ignored: exit 2 and "did you mean context.max_chars"."""
    (configured["repo"] / ".cairn.toml").write_text("[context]\nmax_char = 900\n")
    for args in (("context",), ("config", "show")):
        env = envelope(cairn(configured["home"], "--json", *args, cwd=configured["repo"]))
        assert env["status"] == "error" and env["reason"]["code"] == "SETUP"
        assert "did you mean context.max_chars" in env["reason"]["message"]
        assert ".cairn.toml" in env["reason"]["message"]


def test_an_out_of_range_value_is_refused_naming_the_file(configured: dict[str, Path]) -> None:
    """``max_chars = 50`` in a repo file: exit 2, the range and the file's path in the message."""
    (configured["repo"] / ".cairn.toml").write_text("[context]\nmax_chars = 50\n")
    proc = cairn(configured["home"], "--json", "context", cwd=configured["repo"])
    env = envelope(proc)
    assert proc.returncode == 2 and env["reason"]["code"] == "SETUP"
    message = env["reason"]["message"]
    assert "between 200 and 20000" in message
    assert str((configured["repo"] / ".cairn.toml").resolve()) in message or str(configured["repo"]) in message
