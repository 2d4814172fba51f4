"""``cairn context`` says when it had to guess the repository (no origin), and the hooks never do.

A checkout without a remote is the local repository ``local/<directory>``: its branch keeps a rung, and
the person running ``cairn context`` reads one ``cairn: git:`` line on stderr saying so. A checkout with
an origin needs no note; a hook in the same checkout prints only what its host reads.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests import inprocess

ENV = {"CAIRN_EMBED_MODEL": "hash-test-64", "CAIRN_NO_DAEMON": "1"}


def _run(cwd: Path, home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env.update(ENV, CAIRN_HOME=str(home))
    return inprocess.run(args, env=env, inherit_env=False, cwd=cwd, input=stdin)


@pytest.mark.parametrize("remote", [None, "https://github.com/acme/widget.git"])
def test_context_notes_a_guessed_repository_and_hooks_stay_quiet(tmp_path: Path, remote: str | None) -> None:
    repo = tmp_path / "widget"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    if remote:
        subprocess.run(["git", "remote", "add", "origin", remote], cwd=repo, check=True)
    home = tmp_path / "home"
    owner = "acme" if remote else "local"
    wrote = _run(repo, home, "write", f"branch::{owner}/widget::main", "branch-rule", "Rebase main before merging.")
    assert wrote.returncode == 0, wrote.stderr

    proc = _run(repo, home, "--json", "context")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)["data"]
    assert data["ladder"][0] == f"branch::{owner}/widget::main" and "branch-rule" in data["text"]
    notes = [line for line in proc.stderr.splitlines() if line.startswith("cairn: git: ")]
    if remote:
        assert notes == []
    else:
        assert len(notes) == 1 and "no git remote" in notes[0] and "local/widget" in notes[0]
        # An explicit --repo is not a guess: no note.
        explicit = _run(repo, home, "context", "--repo", "acme/widget")
        assert "cairn: git:" not in explicit.stderr

    payload = {"session_id": f"s-{owner}", "cwd": str(repo), "hook_event_name": "SessionStart", "source": "startup"}
    hook = _run(repo, home, "hook", "session-start", "--host", "claude-code", stdin=json.dumps(payload))
    assert hook.returncode == 0 and hook.stderr == "", hook.stderr
    assert "branch-rule" in json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
