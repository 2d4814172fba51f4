"""Cold commands, two source trees alternated call by call: CPU and wall medians.

A before/after comparison on a loaded machine: each pair runs the same command once with the
``--before`` sources (put first on ``PYTHONPATH``) and once with the installed ones, the order
swapped every round, on one copy of a store, without the daemon. Both trees should be compiled to
bytecode first (``python -m compileall -q DIR``), as an installed package is.

    git archive <commit> src | tar -x -C /tmp/before && .venv/bin/python -m compileall -q /tmp/before/src src
    .venv/bin/python bench/cold_ab.py --store COPY_OF_A_HOME --before /tmp/before/src --pairs 8
    .venv/bin/python bench/cold_ab.py --store COPY_OF_A_HOME --before /tmp/before/src --ops write,read,list

``{n}`` in an operation's arguments is a number new to every call (a write makes a new lesson each time).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

OPS = {
    "hook session-start": (["hook", "session-start", "--host", "claude-code"], True),
    "context": (["context", "--repo", "acme/api", "--branch", "main"], False),
    "write": (["write", "repo::acme/api", "cold-ab-{n}", "Cold A/B lesson {n}: retry the flaky step once"], False),
    "read": (["read", "repo::acme/api", "cold-ab-0"], False),
    "list": (["list", "--limit", "20"], False),
    "search --mode fts": (["search", "retries", "--mode", "fts"], False),
    "search": (["search", "retries"], False),
    "recall": (
        ["--json", "recall", "--text", "TimeoutError: upstream timed out after retries", "--repo", "acme/api"],
        False,
    ),
}
DEFAULT_OPS = "hook session-start,context"


def one(env: dict[str, str], home: str, argv: list[str], hook: bool) -> tuple[float, float]:
    """Wall and CPU milliseconds of one cold command (user + system of the child)."""
    stdin = None
    if hook:  # a new agent session per call, as a real session start is
        payload = {"session_id": f"ab-{time.time_ns()}", "hook_event_name": "SessionStart", "source": "startup"}
        stdin = json.dumps(payload)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    argv = [arg.replace("{n}", str(time.time_ns())) for arg in argv]
    proc = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", *argv], input=stdin, capture_output=True, text=True, env=env, cwd=home
    )
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise SystemExit(f"cairn {' '.join(argv)}: no answer ({proc.stderr.strip()[:300]})")
    return wall, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="a Cairn home to run in (a copy: hook state is written)")
    ap.add_argument("--before", required=True, help="the sources to compare with (a src directory)")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--ops", default=DEFAULT_OPS, help=f"comma-separated, of: {', '.join(OPS)}")
    args = ap.parse_args()
    ops = [op.strip() for op in args.ops.split(",")]
    unknown = [op for op in ops if op not in OPS]
    if unknown:
        ap.error(f"unknown --ops {unknown}; known: {', '.join(OPS)}")
    base = {**os.environ, "CAIRN_HOME": args.store, "CAIRN_NO_DAEMON": "1", "CAIRN_SERVE_AUTO_START": "0"}
    for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH"):
        base.pop(name, None)
    trees = [("before", {**base, "PYTHONPATH": args.before}), ("after", base)]
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    loads = []
    if "read" in ops:  # the lesson it reads
        one(base, args.store, ["write", "repo::acme/api", "cold-ab-0", "Cold A/B lesson 0: read back"], False)
    for i in range(args.pairs):
        for op in ops:
            argv, hook = OPS[op]
            for tree, env in trees if i % 2 == 0 else trees[::-1]:
                got.setdefault((op, tree), []).append(one(env, args.store, argv, hook))
        loads.append(os.getloadavg()[0])
    print(f"{args.pairs} pairs, load {min(loads):.1f}-{max(loads):.1f}; medians, wall / CPU ms")
    for op in ops:
        cells = []
        for tree, _ in trees:
            runs = got[(op, tree)]
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            cells.append(f"{tree} {wall:.0f} / {cpu:.0f}")
        print(f"{op}: " + ", ".join(cells))


if __name__ == "__main__":
    main()
