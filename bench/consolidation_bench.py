"""Consolidation at 60,000 lessons: plan time, apply time and peak memory, in one command.

    nice -n 10 .venv/bin/python bench/consolidation_bench.py              # 60,000 lessons
    .venv/bin/python bench/consolidation_bench.py --size 6000             # a quick look

The store is the context bench's (``bench/context_gen.py``, cached in ``bench/out/context-stores/``):
one tenant, 43 scopes, ~10% near-duplicates (an earlier lesson with a word changed, under another key,
in its scope 60% of the time), 40% candidates, seen counts skewed low, ``updated_at`` over a year, and
the same base text recurring across scopes and branches — so every action kind has material. Each run
copies it (SQLite's backup API) into ``bench/out/consolidation-work/`` and measures, each phase in its
own process so that its peak resident memory is its own:

1. **plan** — ``consolidate_plan``: read every active lesson with its vector, the neighbour search
   and the similarity rules per scope, and the run's ledger written (one row per action);
2. **apply** — ``consolidate_apply`` of that run: one transaction per action under the source-revision
   and deletion-epoch guards, every change a new audited version;
3. **re-plan** — a second ``consolidate_plan`` on the consolidated store (what a scheduled run finds
   the next day: far fewer actions, and its time is the steady-state cost).

Memory: the peak resident set of each phase's process (``resource.getrusage``) and its resident set
just before the phase started (the store opened, the service built), so the difference is what the
phase itself held. Prints a table beside the previous run and writes ``bench/out/consolidation.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import runs  # noqa: E402
from context_gen import GENERATOR_VERSION, build_store, say, store_home  # noqa: E402
from store_bench import delta  # noqa: E402

OUT = ROOT / "bench" / "out"
WORK = OUT / "consolidation-work"
PHASES = ("plan", "apply", "replan")


def _rss_mb() -> float:
    """The process's resident set now (Linux ``/proc``; 0 where it is not available)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


def _peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # kB on Linux


def phase(name: str, home: Path, run_id: int | None) -> dict[str, Any]:
    """One phase in this process; returns its figures (printed as JSON by ``--phase``)."""
    from cairn.runtime.local import local_principal
    from cairn.service.api import Cairn
    from cairn.store.engine import Store, sqlite_url

    t0 = time.perf_counter()
    svc = Cairn(Store(sqlite_url(home)))
    svc.store.ensure_schema()  # a copied store may be a migration behind: upgrade before timing
    p = local_principal()
    open_s = time.perf_counter() - t0
    rss_before = _rss_mb()
    t1 = time.perf_counter()
    if name == "apply":
        if run_id is None:
            raise SystemExit("apply needs the run id of a plan")
        out = svc.consolidate_apply(p, run_id)
    else:
        out = svc.consolidate_plan(p)
    seconds = time.perf_counter() - t1
    actions = out["actions"]
    svc.store.dispose()
    return {
        "phase": name,
        "seconds": round(seconds, 2),
        "open_seconds": round(open_s, 2),
        "rss_before_mb": rss_before,
        "peak_rss_mb": _peak_mb(),
        "run": out["run"]["id"],
        "actions": len(actions),
        "by_kind": dict(Counter(a["kind"] for a in actions)),
        "by_status": dict(Counter(a["status"] for a in actions)),
        "lessons_named": sum(len(a["lessons"]) for a in actions),
        "largest_merge": max((len(a["lessons"]) for a in actions if a["kind"] == "merge"), default=0),
    }


def run_phase(name: str, home: Path, run_id: int | None, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--phase", name, "--home", str(home)]
    if run_id is not None:
        cmd += ["--run", str(run_id)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    say(f"{name}: starting")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    say(f"{name}: {result['seconds']} s, {result['actions']} actions, peak {result['peak_rss_mb']} MB")
    return result


def base_store(size: int) -> dict[str, Any]:
    """The context bench's store of ``size`` lessons: a complete one of this generator version is used
    even if its schema is older (the copy upgrades itself when opened, as a user's store does), so a
    new migration does not cost a rebuild; otherwise ``build_store`` builds it."""
    meta_file = store_home(size) / "meta.json"
    if meta_file.is_file():
        meta = json.loads(meta_file.read_text())
        if meta.get("complete") and meta.get("generator_version") == GENERATOR_VERSION:
            return {**meta, "cached": True}
    return build_store(size)


def copy_store(src: Path, dst: Path) -> None:
    """A consistent copy of the cached store (the backup API, not a file copy of a live WAL store)."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    source = sqlite3.connect(f"file:{src / 'cairn.db'}?mode=ro", uri=True)
    target = sqlite3.connect(dst / "cairn.db")
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def report(result: dict[str, Any], previous: dict[str, Any] | None) -> str:
    prev = (previous or {}).get("phases", {})
    lines = [
        f"consolidation bench · {result['lessons']:,} lessons ({result['active']:,} active) · "
        f"load {result['loadavg'][0]} -> {result['loadavg'][1]} · {result['commit']}",
        "",
        f"{'phase':8} {'seconds':>9} {'vs previous':>14} {'peak MB':>9} {'vs previous':>14} "
        f"{'held MB':>8} {'actions':>8}  by kind / status",
    ]
    for name in PHASES:
        ph = result["phases"][name]
        was = prev.get(name, {})
        held = round(ph["peak_rss_mb"] - ph["rss_before_mb"], 1)
        detail = ph["by_status"] if name == "apply" else ph["by_kind"]
        lines.append(
            f"{name:8} {ph['seconds']:>9} {delta(ph['seconds'], was.get('seconds'), False):>14} "
            f"{ph['peak_rss_mb']:>9} {delta(ph['peak_rss_mb'], was.get('peak_rss_mb'), False):>14} "
            f"{held:>8} {ph['actions']:>8}  {', '.join(f'{k} {v}' for k, v in sorted(detail.items()))}"
        )
    plan = result["phases"]["plan"]
    lines += [
        "",
        f"plan: {plan['lessons_named']:,} lessons named; largest merge {plan['largest_merge']} lessons; "
        f"apply: {result['per_action_ms']} ms per action",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=60_000, help="lessons in the store (a context bench size)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds any one phase may take")
    ap.add_argument("--out", type=Path, default=OUT / "consolidation.json")
    ap.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)  # one phase, in a child process
    ap.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--run", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phase:
        print(json.dumps(phase(args.phase, args.home, args.run)))
        return 0

    load0 = os.getloadavg()[0]
    meta = base_store(args.size)
    say(f"store {args.size:,}: {'cached' if meta.get('cached') else 'built'}, copying into {WORK}")
    copy_store(store_home(args.size), WORK)
    phases: dict[str, Any] = {}
    phases["plan"] = run_phase("plan", WORK, None, args.timeout)
    phases["apply"] = run_phase("apply", WORK, phases["plan"]["run"], args.timeout)
    phases["replan"] = run_phase("replan", WORK, None, args.timeout)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    applied = phases["apply"]["actions"] or 1
    result = {
        "lessons": args.size,
        "active": meta.get("active"),
        "store_generator_version": meta.get("generator_version"),
        "phases": phases,
        "per_action_ms": round(phases["apply"]["seconds"] * 1000 / applied, 1),
        "commit": commit.stdout.strip(),
        "loadavg": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
    }
    runs.keep(args.out, result, report, say)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
