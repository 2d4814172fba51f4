"""Where a warm ``cairn serve``'s resident memory goes, and what its queries cost in daemon CPU.

    .venv/bin/python bench/serve_rss.py --store DIR [--runs 10] [--port 18716]

DIR is a CAIRN_HOME (e.g. a *copy* of ``bench/out/context-stores/60000``: the daemon opens it for
writing). Starts ``cairn serve --no-sweep`` on it (HTTP on a fixed port, as ``make bench`` runs it), waits
until it is idle, then runs ``context``, ``search``, ``recall`` and context after a write (``context_bench``'s loop)
``--runs`` times each through it and
prints the daemon's VmRSS / VmHWM after start and after the runs, ``smaps_rollup`` (anonymous vs file
pages), the largest mappings, and the daemon's CPU milliseconds per command (load-independent, unlike
wall time on a shared machine).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from context_bench import (  # noqa: E402
    BRANCH,
    FAILURES,
    PROJECT,
    REPO,
    after_write_loop,
    cli_env,
    cpu_seconds,
    socket_ready,
    stop_daemon,
    wait_idle,
)


def status_mb(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[name] = round(int(rest.split()[0]) / 1024, 1)
    return out


def top_mappings(pid: int, n: int = 8) -> list[tuple[float, str]]:
    """The ``n`` mappings (summed by name; anonymous heap as ``[anon]``) with the most resident pages."""
    sizes: dict[str, int] = {}
    name = ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and len(parts) >= 5 and not parts[0].endswith(":"):
            name = parts[5] if len(parts) > 5 else "[anon]"
        elif parts and parts[0] == "Rss:":
            sizes[name] = sizes.get(name, 0) + int(parts[1])
    return sorted(((round(kb / 1024, 1), k) for k, kb in sizes.items()), reverse=True)[:n]


def cmd(home: Path, op: str, i: int) -> list[str]:
    base = [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "--json", op]
    if op == "recall":
        return [*base, "--repo", REPO, "--branch", BRANCH, "--text", FAILURES[i % len(FAILURES)]]
    if op == "search":
        return [*base, "retry backoff on timeouts", "--limit", "10"]
    return [*base, "--repo", REPO, "--branch", BRANCH, "--project", PROJECT]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--port", type=int, default=18716)
    args = ap.parse_args()
    from cairn.daemon.protocol import socket_path

    home, env = args.store.resolve(), cli_env(cold=False)
    sock = Path(socket_path(home))
    daemon = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "serve", "--no-sweep", "--port", str(args.port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    try:
        while not socket_ready(sock):
            if daemon.poll() is not None:
                raise SystemExit(f"cairn serve exited with {daemon.returncode}")
            time.sleep(0.05)
        wait_idle(daemon.pid, 600)
        print("after start:", status_mb(daemon.pid))
        for op in ("context", "search", "recall"):
            for i in range(args.runs + 1):  # the first is a warm-up, not counted
                if i == 1:
                    before = cpu_seconds(daemon.pid)
                proc = subprocess.run(cmd(home, op, i), env=env, capture_output=True, text=True)
                if proc.returncode != 0:
                    print(f"  {op}: exit {proc.returncode} {proc.stdout[-300:]} {proc.stderr[-300:]}")
            ms = (cpu_seconds(daemon.pid) - before) * 1000 / args.runs
            print(f"{op}: daemon CPU {ms:.1f} ms per command, RSS {status_mb(daemon.pid)}")
        before = cpu_seconds(daemon.pid)
        after_write_loop([sys.executable, "-m", "cairn.cli.main"], home, env, args.runs)
        ms = (cpu_seconds(daemon.pid) - before) * 1000 / args.runs
        print(f"context after a write: daemon CPU {ms:.1f} ms per command, RSS {status_mb(daemon.pid)}")
        time.sleep(12)  # the daemon's background round (every 10 s) trims the heap after work
        print("idle after the runs:", status_mb(daemon.pid))
        rollup = Path(f"/proc/{daemon.pid}/smaps_rollup").read_text().splitlines()[1:]
        print("smaps_rollup:", "; ".join(" ".join(line.split()[:2]) for line in rollup[:8]))
        for mb, name in top_mappings(daemon.pid):
            print(f"  {mb:7.1f} MB  {name}")
    finally:
        stop_daemon(daemon)
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
