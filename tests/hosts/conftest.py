"""Fixtures for host hooks and installers: every test runs the real ``cairn`` entry point (in the test's
process, ``tests/inprocess.py``; as a process of its own with ``process=True``), with a temporary Cairn
home, a temporary ``$HOME`` (so no real host config is ever touched) and the tiny deterministic
embedding model, so no real model loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import inprocess

VENV_BIN = Path(sys.executable).parent

# Lessons whose wording the failure texts below repeat: the hash test model only knows shared words, so a
# failure text is built from a lesson's own words to clear recall's relevance floor deterministically.
LESSONS = {
    "frobnicate-lock": "frobnicate widget lock timeout means the quux daemon holds the frob lock",
    "zorp-cache": "zorp cache corruption needs a blorp purge before the glim rebuild",
    # Unrelated lessons: recall's relevance counts a lesson's margin over the next candidates.
    "sqlite-wal": "SQLite needs WAL journal mode so readers keep working while a writer holds the lock.",
    "squash-release": "Use squash merges on release branches so the changelog stays readable.",
}
FROB_FAILURE = (
    "Exit code 1\nError: frobnicate lock. frobnicate widget lock timeout means the quux daemon holds the frob lock"
)
ZORP_FAILURE = "Exit code 2\nzorp cache. zorp cache corruption needs a blorp purge before the glim rebuild"


class Runner:
    """``run(*args, stdin=...)``: the ``cairn`` entry point with an isolated home and ``$HOME``.

    In process by default; ``process=True`` runs ``python -m cairn.cli.main``, for what only a process
    shows (a hook abandoning its worker at the time budget ends the process).
    """

    def __init__(self, home: Path, user_home: Path) -> None:
        self.home = home
        self.user_home = user_home

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "CLAUDE_", "CODEX_", "CURSOR_"))}
        env.update(
            {
                "CAIRN_HOME": str(self.home),
                "CAIRN_EMBED_MODEL": "hash-test-64",
                "CAIRN_HOOK_TIMEOUT": "60",  # a slow CI box must not turn a cold in-process load into silence
                "CAIRN_SERVE_AUTO_START": "0",  # a test that wants a daemon starts it; none outlives the test
                "HOME": str(self.user_home),
            }
        )
        env.update(extra or {})
        return env

    def __call__(
        self,
        *args: str,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        process: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        if process:
            proc = subprocess.run(
                [sys.executable, "-m", "cairn.cli.main", *args],
                input=stdin,
                capture_output=True,
                text=True,
                env=self.env(env),
                cwd=str(cwd or self.user_home),
                timeout=120,
            )
        else:
            proc = inprocess.run(args, env=self.env(env), inherit_env=False, cwd=cwd or self.user_home, input=stdin)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    def hook(self, event: str, payload: dict[str, Any] | str, host: str = "claude-code", **kw: Any):
        stdin = payload if isinstance(payload, str) else json.dumps(payload)
        return self("hook", event, "--host", host, stdin=stdin, **kw)

    def envelope(self, *args: str, **kw: Any) -> dict[str, Any]:
        proc = self("--json", *args, **kw)
        lines = proc.stdout.splitlines()
        assert len(lines) == 1, (proc.stdout, proc.stderr)
        env = json.loads(lines[0])
        assert set(env) == {"status", "verb", "data", "reason"}
        return {**env, "returncode": proc.returncode}


def make_runner(tmp: Path) -> Runner:
    home = tmp / "cairn-home"
    user_home = tmp / "user-home"
    home.mkdir(parents=True)
    user_home.mkdir(parents=True)
    return Runner(home, user_home)


@pytest.fixture
def runner(tmp_path: Path) -> Runner:
    """An empty store and an empty ``$HOME``."""
    return make_runner(tmp_path)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """One store per module holding :data:`LESSONS`, seeded through ``cairn write`` (tests use distinct
    host session ids, so their hook state never collides)."""
    r = make_runner(tmp_path_factory.mktemp("hosts"))
    for key, value in LESSONS.items():
        proc = r("write", "global", key, value)
        assert proc.returncode == 0, proc.stderr
    return r
