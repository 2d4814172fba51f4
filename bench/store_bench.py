"""Benchmark the store: audited, versioned writes, the CLI per write, plain-record import, cold start.

    .venv/bin/python bench/store_bench.py [--quick] [--save-baseline]      (make bench-store)

Measures, each on a fresh store in a temporary directory:

(a) writes per second in process through the ``Cairn`` service, every one a full mutation (lesson
    row, version row, tags, indexes, hash-chained audit row, tombstone check, one transaction):
    distinct new lessons, edits that make new versions, and recurrences (same content again);
(b) writes per second through the CLI, one ``cairn write`` subprocess per write, as an agent's hook
    runs it;
(c) plain-record import rate: a realistic JSONL of 60,000 lessons (mixed scopes, tags and kinds,
    1-3 sentence values) timed through ``cairn import FILE``;
(d) CLI cold start: ``cairn read SCOPE KEY`` in a fresh process, against ``python -c pass``.

Every section has a time cap so the whole run stays under ~5 minutes on 2 cores; a capped section
reports what it finished (an import that hits its cap is killed and reports the lessons it had
committed, the rate, and the projected total). Prints a table with median and p95 where they
apply, writes bench/out/store.json, compares with the previous bench/out/store.json (delta %),
and with ``--save-baseline`` also writes the committed reference bench/baseline/store.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "store.json"
BASELINE = ROOT / "bench" / "baseline" / "store.json"

SENTENCES = [
    "ModuleNotFoundError: No module named 'yaml' means PyYAML is not installed.",
    "Install pyyaml; the import name differs from the package name.",
    "Use squash merge for release branches so the changelog stays readable.",
    "Run the database migrations before starting the test suite.",
    "The CI cache key must include the lockfile hash or stale wheels get reused.",
    "pytest -x stops at the first failure, which hides flaky tests further down.",
    "Never commit .env files; the pre-commit hook only checks staged files.",
    "The staging cluster uses a different region, so S3 URLs must be built from config.",
    "When the linter complains about import order, run ruff with --fix instead of editing by hand.",
    "Docker builds on ARM laptops need --platform linux/amd64 to match production.",
    "The API returns 429 under load; retry with exponential backoff and jitter.",
    "Timestamps in the audit log are UTC; convert only when rendering.",
    "SQLite needs WAL mode for concurrent readers while a writer is active.",
    "Feature flags are read once at startup, so a restart is required after changing them.",
    "The frontend build breaks if Node is older than 20 because of the fetch polyfill.",
    "Use git rebase --onto to move a branch that was cut from the wrong base.",
    "Integration tests need the fake SMTP server started on port 1025.",
    "Memory leaks in the worker came from an unbounded lru_cache on request objects.",
    "Set PYTHONHASHSEED in tests that compare ordering of sets.",
    "The payments service rejects amounts with more than two decimal places.",
    "Regenerate the OpenAPI client after changing any response schema.",
    "Alembic autogenerate misses server defaults, so review every migration by hand.",
    "The monorepo uses path filters in CI; touching shared/ runs every pipeline.",
    "Large file uploads must go through the presigned URL flow, not the API server.",
]
TAGS = ["ci", "tests", "deploy", "deps", "python", "node", "docker", "db", "api", "git", "style", "perf", "security"]
ORGS = ["acme", "globex", "initech", "umbrella"]
REPOS = ["widget", "gadget", "billing", "web", "infra", "mobile"]
AGENTS = ["claude-code", "codex", "cursor", None]
KINDS = ["lesson"] * 6 + ["fact", "preference", "reference"]


# -- corpus -----------------------------------------------------------------------------------
def make_records(n: int, seed: int = 11) -> list[dict[str, Any]]:
    """Realistic plain records; every value is distinct content (no recurrences hide the work)."""
    rng = random.Random(seed)
    scopes = ["global"] + [f"project::{r}" for r in REPOS]
    scopes += [f"repo::{o}/{r}" for o in ORGS for r in REPOS]
    scopes += [f"branch::{o}/{r}::main" for o in ORGS[:2] for r in REPOS[:3]]
    out = []
    for i in range(n):
        sentences = rng.sample(SENTENCES, rng.randint(1, 3))
        detail = f"Seen in job {i} ({rng.choice(REPOS)} pipeline, step {rng.randint(1, 40)})."
        rec: dict[str, Any] = {
            "scope": rng.choice(scopes),
            "key": f"{rng.choice(TAGS)}-{rng.choice(REPOS)}-{i}",
            "value": " ".join([*sentences, detail]),
            "tags": sorted(rng.sample(TAGS, rng.randint(0, 4))),
            "kind": rng.choice(KINDS),
        }
        agent = rng.choice(AGENTS)
        if agent:
            rec["source_agent"] = agent
        if i % 5 == 0:
            rec["trigger"] = f"failing CI run #{1000 + i}"
        out.append(rec)
    return out


# -- measuring helpers ------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[idx]


def timed_loop(fn: Callable[[int], None], n: int, cap_s: float) -> dict[str, Any]:
    """Run ``fn(i)`` up to ``n`` times or until ``cap_s`` seconds have passed."""
    lat: list[float] = []
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        lat.append(time.perf_counter() - t0)
        if time.perf_counter() - start > cap_s:
            break
    total, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {
        "ops": len(lat),
        "seconds": round(total, 3),
        "per_sec": round(len(lat) / total, 1) if total else None,
        # Process time: the rate one core gives, whatever else the machine runs (the wall rate also
        # waits for the disk and for other processes).
        "per_cpu_sec": round(len(lat) / cpu, 1) if cpu else None,
        "median_ms": round(statistics.median(lat) * 1000, 2),
        "p95_ms": round(pct(lat, 0.95) * 1000, 2),
        "capped": len(lat) < n,
    }


def cairn_cmd() -> list[str]:
    """The console script users run, when installed next to this interpreter."""
    script = Path(sys.executable).with_name("cairn")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cairn.cli.main"]


def cli_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "CAIRN_HOME": str(home)}
    for name in ("CAIRN_SESSION", "CAIRN_FAKE_NOW", "CAIRN_DEBUG"):
        env.pop(name, None)
    return env


def run_cli(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*cairn_cmd(), *args], input=stdin, capture_output=True, text=True, env=cli_env(home), timeout=300
    )
    if proc.returncode != 0:
        raise SystemExit(f"cairn {' '.join(args[:3])} failed ({proc.returncode}): {proc.stderr.strip()[:500]}")
    return proc


# -- (a) in process ---------------------------------------------------------------------------
def bench_service(tmp: Path, n: int, cap_s: float) -> dict[str, Any]:
    from cairn.runtime.local import local_principal
    from cairn.runtime.settings import Settings
    from cairn.service.api import Cairn
    from cairn.store.engine import Store, sqlite_url

    home = tmp / "service"
    home.mkdir()
    store = Store(sqlite_url(home))
    store.ensure_schema()
    svc = Cairn(store, Settings())
    me = local_principal()
    svc.ensure_tenant(me)
    records = make_records(n, seed=3)

    def create(i: int) -> None:
        r = records[i]
        svc.write(me, r["scope"], r["key"], r["value"], tags=r["tags"], kind=r["kind"])

    created = timed_loop(create, n, cap_s)
    # Edits: new content at existing addresses, each a new version of a lesson (cycling addresses).
    addresses = records[: max(1, min(created["ops"], 100))]

    def edit(i: int) -> None:
        r = addresses[i % len(addresses)]
        svc.write(me, r["scope"], r["key"], f"{r['value']} Revision {i}: confirmed on run {i * 7}.")

    edited = timed_loop(edit, n, cap_s)

    # Recurrences: the same content again at an address nobody edited (seen_count + 1, a version).
    pool = records[len(addresses) : created["ops"]] or records[: created["ops"]]

    def recur(i: int) -> None:
        r = pool[i % len(pool)]
        result = svc.write(me, r["scope"], r["key"], r["value"])
        if result["action"] not in ("recurred", "promoted"):
            raise SystemExit(f"expected a recurrence, got {result['action']}")

    recurred = timed_loop(recur, max(1, n // 4), cap_s / 3)
    verify = svc.audit_verify(me)
    store.dispose()
    if not verify["ok"]:
        raise SystemExit(f"audit chain broken after the in-process bench: {verify}")
    return {"create": created, "edit": edited, "recur": recurred, "audit_rows": verify["checked"]}


def bench_service_many(tmp: Path, n: int, batch: int = 500) -> dict[str, Any]:
    """``Cairn.write_many`` of ``n`` distinct new lessons, ``batch`` per call: the batch path for bulk
    writes (each lesson still by ``write``'s rules, with its own version and audit row)."""
    from cairn.runtime.local import local_principal
    from cairn.runtime.settings import Settings
    from cairn.service.api import Cairn
    from cairn.store.engine import Store, sqlite_url

    home = tmp / "service-many"
    home.mkdir()
    store = Store(sqlite_url(home))
    store.ensure_schema()
    svc = Cairn(store, Settings())
    me = local_principal()
    svc.ensure_tenant(me)
    items = [
        {"scope": r["scope"], "key": r["key"], "value": r["value"], "tags": r["tags"], "kind": r["kind"]}
        for r in make_records(n, seed=5)
    ]
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(0, n, batch):
        svc.write_many(me, items[i : i + batch])
    total, cpu = time.perf_counter() - start, time.process_time() - cpu
    verify = svc.audit_verify(me)
    store.dispose()
    if not verify["ok"] or verify["checked"] != n:
        raise SystemExit(f"write_many left {verify['checked']} audit rows for {n} lessons: {verify}")
    return {"ops": n, "seconds": round(total, 3), "per_sec": round(n / total, 1), "per_cpu_sec": round(n / cpu, 1)}


# -- (b) CLI per write ------------------------------------------------------------------------
def bench_cli_writes(tmp: Path, n: int, cap_s: float) -> dict[str, Any]:
    home = tmp / "cli"
    home.mkdir()
    run_cli(home, "list")  # create the store first: the schema is not what is being measured
    records = make_records(n, seed=5)

    def write(i: int) -> None:
        r = records[i]
        run_cli(home, "--json", "write", r["scope"], r["key"], "-", stdin=r["value"])

    return timed_loop(write, n, cap_s)


# -- (c) import -------------------------------------------------------------------------------
def lesson_count(db: Path) -> int:
    import pysqlite3.dbapi2 as sqlite3

    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            return conn.execute("SELECT count(*) FROM lessons").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return 0


def bench_import(tmp: Path, n: int, cap_s: float) -> dict[str, Any]:
    home = tmp / "import"
    home.mkdir()
    run_cli(home, "list")  # fresh store with its schema, as after `cairn` is first used
    file = tmp / f"plain-{n}.jsonl"
    t0 = time.perf_counter()
    records = make_records(n, seed=7)
    with file.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    gen_s = time.perf_counter() - t0
    size_mb = file.stat().st_size / 1e6

    start = time.perf_counter()
    proc = subprocess.Popen(
        [*cairn_cmd(), "--json", "import", "--no-embed", str(file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(home),
    )
    try:
        out, err = proc.communicate(timeout=cap_s)
        complete = True
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)  # safe: batches are transactions (see tests/cli/test_crash_safety.py)
        out, err = proc.communicate()
        complete = False
    seconds = time.perf_counter() - start
    if complete and proc.returncode != 0:
        raise SystemExit(f"cairn import failed ({proc.returncode}): {err.strip()[:500]} {out[:500]}")
    done = json.loads(out)["data"]["created"] if complete else lesson_count(home / "cairn.db")
    rate = done / seconds if seconds else 0.0
    result = {
        "records": n,
        "imported": done,
        "complete": complete,
        "seconds": round(seconds, 2),
        "per_sec": round(rate, 1),
        "projected_seconds": round(seconds if complete else (n / rate if rate else float("inf")), 1),
        "file_mb": round(size_mb, 1),
        "generate_seconds": round(gen_s, 2),
    }
    if complete:
        # The second run of the same file is a no-op (idempotence); time it too.
        t1 = time.perf_counter()
        again = json.loads(run_cli(home, "--json", "import", "--no-embed", str(file)).stdout)["data"]
        result["rerun_seconds"] = round(time.perf_counter() - t1, 2)
        result["rerun_created"] = again["created"]
    return result


# -- (d) cold start ---------------------------------------------------------------------------
def bench_cold_start(tmp: Path, runs: int) -> dict[str, Any]:
    home = tmp / "cold"
    home.mkdir()
    run_cli(home, "write", "repo::acme/widget", "build", "Run make build, not npm run build.")
    env = cli_env(home)

    def times(cmd: list[str]) -> list[float]:
        subprocess.run(cmd, capture_output=True, env=env, timeout=120)  # warm the page cache
        out = []
        for _ in range(runs):
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
            out.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                raise SystemExit(f"{cmd} failed: {proc.stderr.decode()[:500]}")
        return out

    base = times([sys.executable, "-c", "pass"])
    read = times([*cairn_cmd(), "read", "repo::acme/widget", "build"])
    return {
        "runs": runs,
        "read_median_ms": round(statistics.median(read) * 1000, 1),
        "read_p95_ms": round(pct(read, 0.95) * 1000, 1),
        "python_median_ms": round(statistics.median(base) * 1000, 1),
        "overhead_median_ms": round((statistics.median(read) - statistics.median(base)) * 1000, 1),
    }


# -- report -----------------------------------------------------------------------------------
# (label, path in the metrics dict, unit, higher is better)
HEADLINES = [
    ("service create", ("service", "create", "per_sec"), "writes/s", True),
    ("service create latency", ("service", "create", "median_ms"), "ms median", False),
    ("service create latency p95", ("service", "create", "p95_ms"), "ms p95", False),
    ("service edit (new version)", ("service", "edit", "per_sec"), "writes/s", True),
    ("service edit latency", ("service", "edit", "median_ms"), "ms median", False),
    ("service edit latency p95", ("service", "edit", "p95_ms"), "ms p95", False),
    ("service recurrence", ("service", "recur", "per_sec"), "writes/s", True),
    ("CLI write (process per write)", ("cli_write", "per_sec"), "writes/s", True),
    ("CLI write latency", ("cli_write", "median_ms"), "ms median", False),
    ("CLI write latency p95", ("cli_write", "p95_ms"), "ms p95", False),
    ("import plain records", ("import", "per_sec"), "records/s", True),
    ("import time (projected if capped)", ("import", "projected_seconds"), "s", False),
    ("import rerun (no-op)", ("import", "rerun_seconds"), "s", False),
    ("cold start: cairn read", ("cold_start", "read_median_ms"), "ms median", False),
    ("cold start: cairn read p95", ("cold_start", "read_p95_ms"), "ms p95", False),
    ("cold start: python -c pass", ("cold_start", "python_median_ms"), "ms median", False),
    ("cold start: overhead", ("cold_start", "overhead_median_ms"), "ms median", False),
]


def dig(d: dict[str, Any] | None, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def delta(now: Any, then: Any, higher_better: bool) -> str:
    if not isinstance(now, int | float) or not isinstance(then, int | float) or not then:
        return ""
    change = (now - then) / then * 100
    better = (change > 0) == higher_better
    mark = "" if abs(change) < 5 else (" better" if better else " WORSE")
    return f"{change:+.1f}%{mark}"


def report(result: dict[str, Any], previous: dict[str, Any] | None, baseline: dict[str, Any] | None) -> str:
    m = result["metrics"]
    imp = m["import"]
    lines = [
        f"store bench ({'quick' if result['quick'] else 'full'}) · {result['env']['cpus']} CPUs · "
        f"Python {result['env']['python']} · SQLite {result['env']['sqlite']} · {result['env']['commit']}",
        f"import: {imp['imported']:,} of {imp['records']:,} records in {imp['seconds']} s"
        + ("" if imp["complete"] else f" (CAPPED; projected {imp['projected_seconds']} s for all)"),
        "",
    ]
    cols = ["metric", "value", "unit", "vs previous", "vs baseline"]
    rows = []
    for label, path, unit, higher in HEADLINES:
        value = dig(m, path)
        if value is None:
            continue
        rows.append(
            [
                label,
                f"{value:,.1f}" if isinstance(value, float) else f"{value:,}",
                unit,
                delta(value, dig(previous and previous.get("metrics"), path), higher),
                delta(value, dig(baseline and baseline.get("metrics"), path), higher),
            ]
        )
    widths = [max(len(str(r[i])) for r in [cols, *rows]) for i in range(len(cols))]
    fmt = "  ".join(f"{{:{'>' if i == 1 else '<'}{w}}}" for i, w in enumerate(widths))
    lines.append(fmt.format(*cols))
    lines.append(fmt.format(*("-" * w for w in widths)))
    lines.extend(fmt.format(*r) for r in rows)
    for name, other in (("previous", previous), ("baseline", baseline)):
        if other is not None and other.get("quick") != result["quick"]:
            lines.append(f"note: the {name} run was {'quick' if other.get('quick') else 'full'}; deltas mix sizes")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    import pysqlite3.dbapi2 as sqlite3

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], capture_output=True, text=True, cwd=ROOT, timeout=10
        ).stdout.strip()
        commit = (commit or "unknown") + ("+dirty" if dirty else "")
    except OSError:
        commit = "unknown"
    return {
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "commit": commit,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smaller run (~1 minute): 5,000-record import")
    ap.add_argument("--save-baseline", action="store_true", help=f"also write {BASELINE.relative_to(ROOT)}")
    ap.add_argument("--import-records", type=int, help="records in the import test (default 60000, quick 5000)")
    ap.add_argument("--out", type=Path, default=OUT, help="where to write the JSON result")
    args = ap.parse_args(argv)

    q = args.quick
    sizes = {
        "service_n": 300 if q else 2000,
        "service_cap_s": 8 if q else 30,
        "cli_n": 8 if q else 30,
        "cli_cap_s": 20 if q else 45,
        "import_n": args.import_records or (5000 if q else 60000),
        "import_cap_s": 60 if q else 120,
        "cold_runs": 7 if q else 15,
    }
    previous = load(args.out)
    baseline = load(BASELINE)
    started = time.perf_counter()
    metrics: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cairn-bench-") as tmp_name:
        tmp = Path(tmp_name)
        n = sizes
        steps = [
            ("service", "in-process writes", lambda: bench_service(tmp, n["service_n"], n["service_cap_s"])),
            ("cli_write", "CLI writes", lambda: bench_cli_writes(tmp, n["cli_n"], n["cli_cap_s"])),
            ("import", f"import of {n['import_n']:,}", lambda: bench_import(tmp, n["import_n"], n["import_cap_s"])),
            ("cold_start", "cold start", lambda: bench_cold_start(tmp, n["cold_runs"])),
        ]
        for name, label, fn in steps:
            t0 = time.perf_counter()
            print(f"... {label}", file=sys.stderr, flush=True)
            metrics[name] = fn()
            print(f"    done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    result = {
        "bench": "store",
        "format": 1,
        "quick": q,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runtime_seconds": round(time.perf_counter() - started, 1),
        "sizes": sizes,
        "env": environment(),
        "metrics": metrics,
    }
    load_end = round(os.getloadavg()[0], 2)
    result["env"]["load_avg_1m_end"] = load_end
    print(report(result, previous, baseline))
    busiest = max(result["env"]["load_avg_1m"], load_end)
    if busiest > (result["env"]["cpus"] or 1) * 0.75:
        print(
            f"warning: the machine was busy (1-minute load {busiest} on {result['env']['cpus']} CPUs); "
            "figures are pessimistic and deltas noisy"
        )
    print(f"\ntotal {result['runtime_seconds']} s; wrote {args.out}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.save_baseline:
        BASELINE.parent.mkdir(parents=True, exist_ok=True)
        BASELINE.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"saved baseline {BASELINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
