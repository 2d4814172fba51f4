"""The README's shell blocks, run in order as a new user would: a fresh ``CAIRN_HOME``, a fresh ``$HOME``,
``.venv/bin`` on ``PATH``, one bash session (so an ``export`` carries on), every command as written.

What is not run, and why, is explicit and nowhere else: a ```` ```bash ```` block preceded by
``<!-- readme-test: skip (reason) -->`` (it needs a server this machine does not have), and the two
long-running commands ``make run`` and ``make test`` (the tour's server, and this suite itself).
``cairn serve`` (with or without ``&``) runs in the background, as the README's ``&`` says, and the test
waits until it answers, then stops it at the end of its block. Every other command must exit 0.

The test reads the README at run time and knows no command in it, so editing the README keeps it honest.
The embedding model is the small deterministic one (``CAIRN_EMBED_MODEL=hash-test-64``), as in every
other CLI test: the commands' behaviour does not depend on which model ranks.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\b.*?-->")
LONG_RUNNING = ("make run", "make test")  # the demo's server, and the suite this test is part of
SERVE = re.compile(r"^cairn\s+serve\b")


@dataclass
class Block:
    line: int  # the fence's line number in the README, for messages
    commands: list[str]
    skipped: bool


def blocks(text: str) -> list[Block]:
    """Every ```bash block in order: its commands (continuation lines joined, comments and blanks dropped)."""
    out: list[Block] = []
    lines = text.splitlines()
    i = 0
    last_text = ""
    while i < len(lines):
        line = lines[i]
        if line.strip() == "```bash":
            start = i + 1
            body: list[str] = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            out.append(Block(start, _commands(body), bool(SKIP.search(last_text))))
        elif line.strip():
            last_text = line
        i += 1
    return out


def _commands(body: list[str]) -> list[str]:
    commands: list[str] = []
    pending = ""
    for raw in body:
        line = pending + (raw.lstrip() if pending else raw)
        if line.rstrip().endswith("\\"):  # bash drops backslash-newline; the words stay apart
            pending = line.rstrip()[:-1].rstrip() + " "
            continue
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            commands.append(line.strip())
    return commands


def test_the_parser_sees_blocks_markers_and_continuations() -> None:
    sample = (
        "<!-- readme-test: skip (needs a server) -->\n```bash\nexport A=1\n```\n\ntext\n"
        "```bash\n# a comment\ncairn write a \\\n  b c\n\nmake run   # long\n```\n```text\nnot bash\n```\n"
    )
    found = blocks(sample)
    assert [(b.skipped, b.commands) for b in found] == [
        (True, ["export A=1"]),
        (False, ["cairn write a b c", "make run   # long"]),
    ]


def _script(found: list[Block], rc_file: Path, logs: Path, home: Path) -> tuple[str, dict[int, str]]:
    """One bash script for every block; each command's exit status is appended to ``rc_file``."""
    from cairn.daemon.protocol import socket_path

    parts = [
        f"__socket={shlex.quote(socket_path(home))}",
        "__wait_serve() {  # until the daemon answers on its socket (and HTTP, unless --no-http), or it died",
        "  local until=$((SECONDS + 120))",
        '  while [ $SECONDS -lt $until ] && kill -0 "$__serve_pid" 2>/dev/null; do',
        '    [ -S "$__socket" ] && break',
        "    sleep 0.1",
        "  done",
        '  while [ "$1" = http ] && [ $SECONDS -lt $until ] && kill -0 "$__serve_pid" 2>/dev/null; do',
        "    curl -s -o /dev/null http://127.0.0.1:8321/v1/health && break",
        "    sleep 0.1",
        "  done",
        "}",
        "__stop_serve() {",
        '  if [ -n "${__serve_pid:-}" ]; then kill -TERM "$__serve_pid"; wait "$__serve_pid"; unset __serve_pid; fi',
        "}",
    ]
    expected: dict[int, str] = {}
    n = 0
    for block in found:
        if block.skipped:
            continue
        for command in block.commands:
            if command.startswith(LONG_RUNNING):
                continue
            n += 1
            expected[n] = command
            log = shlex.quote(str(logs / f"{n}.log"))
            if SERVE.match(command):
                bare = command.split("#", 1)[0].strip().removesuffix("&").strip()
                parts.append(f"{{ {bare} & }} > {log} 2>&1")
                parts.append("__serve_pid=$!")
                parts.append(f"__wait_serve {'socket' if '--no-http' in bare else 'http'}")
                parts.append(f'kill -0 "$__serve_pid"; echo "{n} $?" >> {shlex.quote(str(rc_file))}')
            else:
                parts.append(f"{{ {command}\n}} > {log} 2>&1 < /dev/null")
                parts.append(f'echo "{n} $?" >> {shlex.quote(str(rc_file))}')
        parts.append("__stop_serve")
    return "\n".join(parts) + "\n", expected


def test_the_readme_commands_run_in_order_on_a_fresh_home(tmp_path: Path) -> None:
    found = blocks(README.read_text(encoding="utf-8"))
    assert found and any(not b.skipped for b in found), "no runnable ```bash block in the README"
    work, home, user = tmp_path / "work", tmp_path / "cairn-home", tmp_path / "user-home"
    work.mkdir()
    user.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    rc_file = tmp_path / "rc"
    script, expected = _script(found, rc_file, logs, home)
    assert expected, "every README command was skipped"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "CLAUDE_", "CODEX_"))}
    env.update(
        PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
        CAIRN_HOME=str(home),
        HOME=str(user),
        CAIRN_EMBED_MODEL="hash-test-64",
        # No daemon started on demand: it would outlive the test (the blocks' own `cairn serve` is stopped).
        CAIRN_SERVE_AUTO_START="0",
    )
    proc = subprocess.run(
        ["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL
    )
    ran = dict(line.split(" ", 1) for line in rc_file.read_text().splitlines()) if rc_file.exists() else {}
    failures = []
    for n, command in expected.items():
        rc = ran.get(str(n))
        if rc != "0":
            out = (logs / f"{n}.log").read_text(errors="replace")[-1500:] if (logs / f"{n}.log").exists() else ""
            failures.append(f"{command!r} exited {rc if rc is not None else '(never ran)'}:\n{out}")
    assert not failures, "\n\n".join(failures) + f"\n(bash: {proc.returncode} {proc.stderr[-800:]})"


@pytest.mark.parametrize(
    "target", sorted({m for m in re.findall(r"\]\(([^)#]+)", README.read_text()) if "://" not in m})
)
def test_every_readme_link_stays_in_the_repository(target: str) -> None:
    """Relative links resolve to a file of the repository; nothing points outside it."""
    path = (ROOT / target).resolve()
    assert path.is_relative_to(ROOT) and path.exists(), target
