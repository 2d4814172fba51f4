"""Running the real ``memory-gateway`` command as an agent calls it: in the test's process through the
``cairn`` entry point (``tests/inprocess.py``), or as a process of its own (``process=True``, and always
when a crash point is set: the gateway then dies like a killed process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.compat.memory_gateway.wal import CRASH_ENV
from tests import inprocess

COMMAND = [sys.executable, "-m", "cairn.compat.memory_gateway"]


@dataclass
class Result:
    rc: int
    env: dict[str, Any] | None
    out: str
    err: str

    @property
    def status(self) -> str | None:
        return self.env["status"] if self.env else None

    @property
    def code(self) -> str | None:
        return self.env["reason"]["code"] if self.env and self.env["reason"] else None

    @property
    def data(self) -> Any:
        return self.env["data"] if self.env else None


def base_env(audit: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "MEMORY_GATEWAY_"))}
    env["MEMORY_GATEWAY_DIR"] = str(audit)
    env["CAIRN_EMBED_MODEL"] = "hash-test-64"  # the tiny deterministic embedder: no model load per call
    env["MEMORY_GATEWAY_WAIT"] = "3"
    env["CAIRN_SERVE_AUTO_START"] = "0"  # no command may leave a daemon behind the test
    return env


def run(
    corpus: Path, *args: str, body: str | None = None, env: dict[str, str], timeout: float = 60, process: bool = False
) -> Result:
    if process or env.get(CRASH_ENV):
        proc = subprocess.run(
            [*COMMAND, "--corpus", str(corpus), *args],
            input=(body or "").encode(),
            capture_output=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        out, err = proc.stdout.decode(), proc.stderr.decode()
    else:
        done = inprocess.run(
            ["memory-gateway", "--corpus", str(corpus), *args], env=env, inherit_env=False, input=body or ""
        )
        proc, out, err = done, done.stdout, done.stderr
    parsed = json.loads(out) if out.strip() else None
    if out.strip():
        assert out.count("\n") == 1, f"exactly one envelope line expected: {out!r}"
    return Result(proc.returncode, parsed, out, err)


def live_files(corpus: Path) -> list[str]:
    """Topic files and archive files (relative), excluding the gateway's own state."""
    out = []
    for p in corpus.rglob("*"):
        rel = p.relative_to(corpus)
        if rel.parts[0] == ".gateway" or not p.is_file():
            continue
        out.append(str(rel))
    return sorted(out)


def disagreements(corpus: Path) -> list[str]:
    """Where the corpus files and the Cairn store beside them disagree (empty when they agree).

    Every live topic file has an active lesson holding its body, every active lesson has its live
    file, no write-ahead intent is left open, and MEMORY.md lists exactly the live topics.
    """
    import cairn.library
    from cairn.compat.memory_gateway.corpus import Corpus
    from cairn.compat.memory_gateway.wal import Wal

    problems = []
    c = Corpus(str(corpus))
    files = {}
    for slug in c.all_live():
        topic = c.load(slug)
        assert topic is not None
        files[slug] = topic.body.rstrip()
    state = corpus / ".gateway"
    m = cairn.library.open(home=state, db=f"sqlite:///{state / 'cairn.db'}", token="")
    try:
        lessons = m.list(None, limit=500)["lessons"]
    finally:
        m.close()
    held = {}
    for lesson in lessons:
        type_, stem = lesson["key"].split("::")
        held[f"{type_}/{stem}"] = lesson["value"]
    for slug, body in files.items():
        if slug not in held:
            problems.append(f"{slug}: live file, no active lesson")
        elif held[slug] != body:
            problems.append(f"{slug}: file body {body!r} != store {held[slug]!r}")
    problems += [f"{slug}: active lesson, no live file" for slug in held if slug not in files]
    pending, damaged = Wal(state / "wal.jsonl").pending()
    if pending or damaged:
        problems.append(f"write-ahead log: {len(pending)} open intent(s), damaged={damaged}")
    index = (corpus / "MEMORY.md").read_text() if (corpus / "MEMORY.md").exists() else ""
    listed = sorted(line.split("](", 1)[1].split(".md)", 1)[0] for line in index.splitlines() if "](" in line)
    if listed != sorted(files):
        problems.append(f"MEMORY.md lists {listed}, live files are {sorted(files)}")
    return problems
