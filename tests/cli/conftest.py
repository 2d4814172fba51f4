"""CLI fixtures: every test here runs the real ``cairn`` entry point, in the test's process
(``tests/conftest.py:run_cli``) unless it needs a process of its own (``run_cli_process``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

ENVELOPE_KEYS = {"status", "verb", "data", "reason"}


def assert_clean_stderr(proc: subprocess.CompletedProcess[str]) -> None:
    """No traceback and no raw lock error ever reaches a user."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "database is locked" not in proc.stderr.lower(), proc.stderr


def envelope(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON envelope a ``--json`` invocation prints: exactly one line, exactly four keys."""
    assert_clean_stderr(proc)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected one envelope line, got {len(lines)}: {proc.stdout!r} / {proc.stderr!r}"
    env = json.loads(lines[0])
    assert set(env) == ENVELOPE_KEYS, env
    assert env["status"] in ("ok", "refused", "error")
    if env["status"] == "ok":
        assert env["reason"] is None
        assert proc.returncode == 0
    else:
        assert env["data"] is None
        assert set(env["reason"]) >= {"code", "message"}
        assert proc.returncode == (1 if env["status"] == "refused" else 2)
    return env


class Cli:
    """``cli("write", ...)`` runs the CLI; ``cli.ok(...)``/``cli.refused(...)`` run it with ``--json``."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def __call__(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None):
        proc = run_cli(self.home, *args, stdin=stdin, env=env)
        assert_clean_stderr(proc)
        return proc

    def json(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
        return envelope(run_cli(self.home, "--json", *args, stdin=stdin, env=env))

    def ok(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> Any:
        env_ = self.json(*args, stdin=stdin, env=env)
        assert env_["status"] == "ok", env_
        return env_["data"]

    def refused(
        self, code: str, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> dict[str, Any]:
        env_ = self.json(*args, stdin=stdin, env=env)
        assert env_["status"] == "refused", env_
        assert env_["reason"]["code"] == code, env_
        return env_["reason"]


@pytest.fixture
def cli(cairn_home: Path) -> Cli:
    return Cli(cairn_home)


@pytest.fixture
def make_cli(tmp_path: Path):
    """A second (third...) independent home, e.g. for import into a fresh store."""

    def make(name: str) -> Cli:
        home = tmp_path / name
        home.mkdir()
        return Cli(home)

    return make
