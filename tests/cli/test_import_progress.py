"""`cairn import`'s progress on a terminal: the writing and the embedding as two bars on stderr ("searchable
by meaning: N of M"), never on stdout or in ``--json``; the summary says the store is searchable by meaning.

The command runs as a real subprocess whose stderr is a pseudo-terminal and whose stdout is a pipe (a person
watching while the result is captured); ``hash-test-64`` stands in for the model.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

ANSI = re.compile(rb"\x1b\[[0-9;?]*[a-zA-Z]")
N = 1200


def run_on_terminal(home: Path, *args: str) -> tuple[int, str, str]:
    """Run ``cairn ARGS`` with stderr on a pseudo-terminal; returns (exit, stdout, what the terminal showed)."""
    env = {
        **os.environ,
        "CAIRN_HOME": str(home),
        "CAIRN_NO_DAEMON": "1",
        "CAIRN_EMBED_MODEL": "hash-test-64",
        "COLUMNS": "120",
    }
    main, side = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=side,
        env=env,
    )
    os.close(side)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the terminal's other side closed: the process is done
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    stdout = proc.stdout.read().decode() if proc.stdout else ""
    proc.wait(60)
    return proc.returncode, stdout, ANSI.sub(b"", shown).decode(errors="replace").replace("\r", "\n")


def records(path: Path) -> Path:
    path.write_text(
        "".join(
            json.dumps({"scope": "global", "key": f"lesson-{i}", "value": f"Lesson {i}: retry the flaky deploy step."})
            + "\n"
            for i in range(N)
        ),
        encoding="utf-8",
    )
    return path


def test_import_shows_the_writing_and_then_searchable_by_meaning_on_the_terminal(tmp_path: Path) -> None:
    file = records(tmp_path / "in.jsonl")
    code, stdout, terminal = run_on_terminal(tmp_path / "home", "import", str(file))
    assert code == 0, terminal
    assert f"writing lessons: {N:,} of {N:,}" in terminal
    assert f"searchable by meaning: {N:,} of {N:,}" in terminal
    assert "searchable by meaning: 0 of" not in stdout and " of " not in stdout  # the bars never reach stdout
    assert f"{N} embedded: searchable by meaning" in stdout


def test_json_import_shows_no_bar_and_says_nothing_waits(tmp_path: Path) -> None:
    file = records(tmp_path / "in.jsonl")
    code, stdout, terminal = run_on_terminal(tmp_path / "home", "--json", "import", str(file))
    assert code == 0, terminal
    assert "writing lessons" not in terminal and "searchable by meaning" not in terminal
    data = json.loads(stdout)["data"]
    assert (data["created"], data["embedded"], data["pending_embeddings"]) == (N, N, 0)
