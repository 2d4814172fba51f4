"""Every command through the daemon, end to end, against the targets: ``make bench-daemon``.

One fresh ``cairn`` process per call, as an agent calls them, on a copy of a store (``--store PATH``:
a Cairn home or its ``cairn.db``, e.g. a 60,000-lesson store another bench built; without it a small
store is generated here). Each operation is timed with the daemon (``cairn serve --no-http``, what a
command starts on demand) and without it (``CAIRN_NO_DAEMON=1``), alternating, with the machine's
1-minute load average next to each figure (the machine is shared: medians, and read the load).
LoreKit's CLI (``../shared/peers/lorekit-cli``, run by node; the column is skipped when either is
absent) is timed alternately with them where it has the operation (write, search, list, the
SessionStart hook), in local mode on the same lessons: the store's active lessons written as a
LoreKit local store (``lorekit_bench.write_memory``), its hook and list run in a git checkout of
``acme/api`` on ``main``.
Prints a table against the targets, writes ``bench/out/daemon.json`` (compared with the previous
run) and ``bench/out/daemon.png``. Beside each wall-clock median: the CPU time of the calling process
(``getrusage`` of the child) and, with the daemon, the daemon's own CPU per call (``/proc``): on a
shared machine CPU time moves far less with the load than wall time. Cairn's sources are compiled
to bytecode first (an installed package has its ``.pyc``; an editable checkout under
``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module in every process).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
OUT = ROOT / "bench" / "out"
PY = sys.executable
TARGET_MS = {"write": 100, "read": 100, "list": 100, "search": 100, "recall": 150, "hook session-start": 100}
PAYLOAD = {"session_id": "SESSION", "hook_event_name": "SessionStart", "source": "startup"}


def load() -> float:
    return os.getloadavg()[0]


def run(home: Path, args: list[str], env: dict[str, str], stdin: str | None = None) -> float:
    return run_cpu(home, args, env, stdin)[0]


def run_cpu(home: Path, args: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[float, float]:
    """One process: wall milliseconds, and the CPU milliseconds it used (user + system)."""
    if stdin and "SESSION" in stdin:  # a new agent session per call, as a real session start is
        stdin = stdin.replace("SESSION", f"bench-{time.time_ns()}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    cmd = [PY, *args] if args[:1] == ["-c"] else [PY, "-m", "cairn.cli.main", *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, cwd=home, timeout=600)
    elapsed = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"cairn {' '.join(args)} failed: {proc.stderr.strip()[:300]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return elapsed, cpu


def process_cpu_ms(pid: int) -> float:
    """CPU milliseconds a running process has used so far (Linux ``/proc``; clock-tick resolution)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def compile_sources() -> None:
    """Bytecode for Cairn's sources, as an installed package has: without it every process of an
    editable checkout under ``PYTHONDONTWRITEBYTECODE`` compiles each module it imports."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([PY, "-m", "compileall", "-q", str(ROOT / "src")], env=env, check=True, capture_output=True)


def copy_store(src: Path | None, home: Path, size: int) -> None:
    home.mkdir(parents=True, exist_ok=True)
    if src is None:
        lines = "\n".join(
            json.dumps(
                {"scope": "project::bench", "key": f"k{i}", "value": f"bench lesson {i} about retries and caches"}
            )
            for i in range(size)
        )
        path = home / "seed.jsonl"
        path.write_text(lines + "\n")
        env = {**os.environ, "CAIRN_HOME": str(home), "CAIRN_NO_DAEMON": "1"}
        run(home, ["import", str(path)], env)
        return
    db = src / "cairn.db" if src.is_dir() else src
    import pysqlite3.dbapi2 as sqlite3  # the backup API: a consistent copy even while another process writes

    with sqlite3.connect(str(db)) as source, sqlite3.connect(str(home / "cairn.db")) as target:
        source.backup(target)


def lorekit_setup(db: Path, work: Path) -> tuple[list[str], dict[str, str], Path] | None:
    """LoreKit's CLI in local mode over the Cairn store's active lessons: (node command, environment,
    git checkout to run in), or None when the CLI or node is absent."""
    import lorekit_bench

    peer = lorekit_bench.peer_dir()
    if peer is None or shutil.which("node") is None:
        return None
    import pysqlite3.dbapi2 as sqlite3

    root = work / "lk-home" / ".lorekit"
    with sqlite3.connect(str(db)) as conn:
        rows = conn.execute(
            "SELECT scope, key, value, tags, created_at, updated_at, seen_count FROM lessons "
            "WHERE archived_at IS NULL AND superseded_by IS NULL AND trust != 'rejected'"
        ).fetchall()
    for scope, key, value, tags, created, updated, seen in rows:
        d = lorekit_bench.scope_dir(root, scope)
        if d is not None:
            meta = {
                "scope": scope, "key": key, "tags": json.loads(tags or "[]"), "seen_count": seen,
                "created": str(created).replace(" ", "T") + "Z", "updated": str(updated).replace(" ", "T") + "Z",
            }  # fmt: skip
            lorekit_bench.write_memory(d, meta, value)
    (work / "lk-checkout").mkdir()
    for cmd in (
        ["init", "-q"],
        ["remote", "add", "origin", "https://github.com/acme/api.git"],
        ["checkout", "-q", "-b", "main"],
    ):
        subprocess.run(["git", "-C", str(work / "lk-checkout"), *cmd], check=True)
    env = {
        **os.environ, "HOME": str(work / "lk-home"), "LOREKIT_HOME": str(root), "LOREKIT_MODE": "local",
        "LOREKIT_DENY": "remote", "LOREKIT_TELEMETRY": "0", "DO_NOT_TRACK": "1",
    }  # fmt: skip
    return ["node", str(peer / "bin" / "lorekit.mjs")], env, work / "lk-checkout"


def lorekit_run(cmd: list[str], env: dict[str, str], cwd: Path, stdin: str | None) -> tuple[float, float]:
    """One LoreKit CLI process: wall and CPU milliseconds, as ``run_cpu`` measures Cairn's."""
    if stdin and "SESSION" in stdin:
        stdin = stdin.replace("SESSION", f"bench-{time.time_ns()}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    elapsed = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"lorekit {' '.join(cmd[2:])} failed: {proc.stderr.strip()[:300]}")
    return elapsed, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def measure(
    store: Path | None, size: int, runs: int, cold_runs: int, with_lorekit: bool, only: list[str] | None
) -> dict[str, object]:
    """Every operation (or ``only`` these) with and without the daemon, and LoreKit's where it has it:
    ``{"lessons", "python_c_pass_ms", "rows": [{"op", "daemon_p50_ms", "no_daemon_p50_ms", ...}]}``."""
    work = Path(tempfile.mkdtemp(prefix="cairn-daemon-bench-"))
    home = work / "home"
    compile_sources()
    copy_store(store, home, size)
    base = {**os.environ, "CAIRN_HOME": str(home), "CAIRN_SERVE_AUTO_START": "0"}
    base.pop("CAIRN_NO_DAEMON", None)
    base.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    lessons = json.loads(
        subprocess.run(
            [PY, "-m", "cairn.cli.main", "--json", "status"],
            capture_output=True,
            text=True,
            env={**base, "CAIRN_NO_DAEMON": "1"},
            cwd=home,
            check=True,
        ).stdout  # fmt: skip
    )["data"]["active_lessons"]
    first = json.loads(
        subprocess.run(
            [PY, "-m", "cairn.cli.main", "--json", "list", "--limit", "1"],
            capture_output=True,
            text=True,
            env={**base, "CAIRN_NO_DAEMON": "1"},
            cwd=home,
            check=True,
        ).stdout  # fmt: skip
    )["data"]["lessons"][0]
    counter = iter(range(10**9))
    ops: dict[str, tuple[list[str], str | None]] = {
        "write": (["write", "project::bench", "KEY", "-"], "a lesson written by the daemon bench"),
        "read": (["read", first["scope"], first["key"]], None),
        "list": (["list", "--limit", "20"], None),
        "search": (["search", "retries and caches", "--limit", "5"], None),
        "search --mode fts": (["search", "retries", "--mode", "fts", "--limit", "5"], None),
        "recall": (["recall", "--text", "TimeoutError: upstream timed out after 3 retries"], None),
        "context": (["context", "--repo", "acme/api", "--branch", "main"], None),
        "hook session-start": (["hook", "session-start", "--host", "claude-code"], json.dumps(PAYLOAD)),
    }
    if only:
        wanted = only
        unknown = [o for o in wanted if o not in ops]
        if unknown:
            raise SystemExit(f"unknown operation(s) {unknown}; choose from {list(ops)}")
        ops = {o: ops[o] for o in wanted}
    lorekit = lorekit_setup(home / "cairn.db", work) if with_lorekit else None
    lk_ops: dict[str, list[str]] = {
        "write": ["write", "--scope", "project::bench", "--key", "KEY", "a lesson written by the daemon bench"],
        "search": ["search", "retries"],  # a literal substring over key and value: its one search
        "list": ["list"],  # every applicable scope, no page
        "hook session-start": ["hook", "--adapter", "claude", "--event", "SessionStart", "--dir", "CHECKOUT"],
    }
    daemon = subprocess.Popen(
        [PY, "-m", "cairn.cli.main", "serve", "--no-http", "--no-sweep"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=base, cwd=home,
    )  # fmt: skip
    rows: list[dict[str, object]] = []
    baseline = [run(home, ["-c", "pass"], base) for _ in range(5)]  # the interpreter's own start
    try:
        deadline = time.time() + 600
        while not (home / "cairn.sock").exists():
            if time.time() > deadline or daemon.poll() is not None:
                raise SystemExit("the daemon did not start")
            time.sleep(0.2)
        for _name, (argv_, stdin) in ops.items():  # warm: the first call after start loads index/model
            run(home, [a if a != "KEY" else f"w{next(counter)}" for a in argv_], base, stdin)
        for name, (argv_, stdin) in ops.items():
            warm, cold, loads, peer = [], [], [], []
            warm_cpu, cold_cpu, daemon_cpu, peer_cpu = [], [], [], []
            for i in range(max(runs, cold_runs)):
                call = [a if a != "KEY" else f"w{next(counter)}" for a in argv_]
                loads.append(load())
                if i < runs:
                    served = process_cpu_ms(daemon.pid)
                    wall, cpu = run_cpu(home, call, base, stdin)
                    daemon_cpu.append(process_cpu_ms(daemon.pid) - served)
                    warm.append(wall)
                    warm_cpu.append(cpu)
                if i < cold_runs:
                    call = [a if a != "KEY" else f"w{next(counter)}" for a in argv_]
                    wall, cpu = run_cpu(home, call, {**base, "CAIRN_NO_DAEMON": "1"}, stdin)
                    cold.append(wall)
                    cold_cpu.append(cpu)
                if lorekit is not None and name in lk_ops and i < cold_runs:
                    node, lk_env, checkout = lorekit
                    lk_call = [
                        f"lk{next(counter)}" if a == "KEY" else str(checkout) if a == "CHECKOUT" else a
                        for a in lk_ops[name]
                    ]
                    lk_stdin = None
                    if name == "hook session-start":  # the same payload, from the checkout
                        lk_stdin = json.dumps({**PAYLOAD, "cwd": str(checkout)})
                    wall, cpu = lorekit_run([*node, *lk_call], lk_env, checkout, lk_stdin)
                    peer.append(wall)
                    peer_cpu.append(cpu)
            rows.append(
                {
                    "op": name,
                    "daemon_p50_ms": round(statistics.median(warm), 1),
                    # CPU of the calling process, and the daemon's own per call (a mean: /proc counts ticks)
                    "daemon_client_cpu_ms": round(statistics.median(warm_cpu), 1),
                    "daemon_cpu_ms": round(statistics.fmean(daemon_cpu), 1),
                    "no_daemon_p50_ms": round(statistics.median(cold), 1),
                    "no_daemon_cpu_ms": round(statistics.median(cold_cpu), 1),
                    "target_ms": TARGET_MS.get(name),
                    "lorekit_p50_ms": round(statistics.median(peer), 1) if peer else None,
                    "lorekit_cpu_ms": round(statistics.median(peer_cpu), 1) if peer_cpu else None,
                    "load": round(statistics.median(loads), 2),
                }
            )
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    return {
        "lessons": lessons,
        "python_c_pass_ms": round(statistics.median(baseline), 1),
        "runs": runs,
        "cold_runs": cold_runs,
        "rows": rows,
        "at": time.time(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, help="a Cairn home (or cairn.db) to copy; default: generate --size")
    ap.add_argument("--size", type=int, default=2000, help="lessons generated when no --store is given")
    ap.add_argument("--runs", type=int, default=9, help="calls per operation and mode")
    ap.add_argument("--cold-runs", type=int, default=3, help="calls per operation without the daemon")
    ap.add_argument("--no-lorekit", action="store_true", help="do not time LoreKit's CLI beside Cairn")
    ap.add_argument("--ops", help="comma-separated operations (default: all), e.g. 'context,hook session-start'")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    only = [o.strip() for o in args.ops.split(",")] if args.ops else None
    result = measure(args.store, args.size, args.runs, args.cold_runs, not args.no_lorekit, only)
    lessons, python_ms, rows = result["lessons"], result["python_c_pass_ms"], result["rows"]
    previous = OUT / "daemon.json"
    before = {r["op"]: r for r in json.loads(previous.read_text())["rows"]} if previous.exists() else {}
    print(f"\nEvery command through the daemon, end to end, {lessons:,} lessons (medians; load = 1-min average)\n")
    print(f"(python -c pass: {python_ms} ms at load {load():.2f})\n")
    print(
        "| operation | daemon p50 | CPU: client + daemon | no daemon p50 | CPU | LoreKit p50 | CPU | target | met "
        f"| load | vs previous |\n|{'---|' * 11}"
    )
    for r in rows:
        target = r["target_ms"]
        met = "" if target is None else ("yes" if r["daemon_p50_ms"] <= target else "NO")  # type: ignore[operator]
        prev = before.get(r["op"])  # type: ignore[arg-type]
        delta = f"{(r['daemon_p50_ms'] / prev['daemon_p50_ms'] - 1) * 100:+.0f}%" if prev else ""  # type: ignore[operator]
        print(
            f"| {r['op']} | {r['daemon_p50_ms']} ms | {r['daemon_client_cpu_ms']} + {r['daemon_cpu_ms']} ms | "
            f"{r['no_daemon_p50_ms']} ms | {r['no_daemon_cpu_ms']} ms | "
            f"{'' if r['lorekit_p50_ms'] is None else str(r['lorekit_p50_ms']) + ' ms'} | "
            f"{'' if r['lorekit_cpu_ms'] is None else str(r['lorekit_cpu_ms']) + ' ms'} | "
            f"{'' if target is None else f'≤ {target} ms'} | {met} | {r['load']} | {delta} |"
        )
    previous.write_text(json.dumps(result, indent=2))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4))
        names = [str(r["op"]) for r in rows]
        xs = range(len(rows))
        ax.bar([x - 0.27 for x in xs], [r["daemon_p50_ms"] for r in rows], 0.27, label="daemon")  # type: ignore[misc]
        ax.bar(list(xs), [r["no_daemon_p50_ms"] for r in rows], 0.27, label="no daemon")  # type: ignore[misc]
        if any(r["lorekit_p50_ms"] for r in rows):
            ax.bar([x + 0.27 for x in xs], [r["lorekit_p50_ms"] or 0 for r in rows], 0.27, label="LoreKit CLI")  # type: ignore[misc]
        ax.axhline(100, color="red", linestyle="--", linewidth=1, label="target 100 ms")
        ax.set_xticks(list(xs), names, rotation=30, ha="right")
        ax.set_ylabel("ms, p50 end to end")
        ax.set_yscale("log")
        ax.set_title(f"cairn commands at {lessons:,} lessons")
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / "daemon.png", dpi=100)
    except ImportError:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
