"""Sync between a laptop and a server: time and bytes, to an empty laptop and incrementally.

    nice -n 10 .venv/bin/python bench/sync_bench.py                 # 60,000 lessons (~10 min here)
    nice -n 10 .venv/bin/python bench/sync_bench.py --lessons 5000  # ad hoc

The server is the real one, in its own process (`cairn serve --http --no-sweep --no-warm` on a SQLite
home), holding ``--lessons`` lessons imported through `cairn import` (plain records, so each one
lands through the write path with its version and audit row; about 50 repositories, values of
80-400 characters). The laptop is an empty home; each sync is the real `cairn --url URL sync --json`
as a process of its own (so its time includes the interpreter's start and the imports), timed
wall-clock; bytes are the HTTP bodies both ways as the client counted them. Then:

* **full**: the first sync of the empty laptop (pulls every event);
* **noop**: a second sync with nothing to move;
* **incremental pull**: 100 lessons changed on the server (a new version each, over the HTTP API);
* **incremental push**: 100 lessons changed on the laptop (a new version each).

Embeddings are the test model's (``hash-test-64``): a sync queues lessons for embedding and never
embeds them itself. Prints a table, writes `bench/out/sync.json` and compares with the previous run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT / "bench"))

import runs  # noqa: E402
from api_bench import free_port, start_server  # noqa: E402

CHANGED = 100
WORDS = (
    "cache retry timeout deploy migration index lockfile branch token gateway schema queue worker "
    "backoff jitter replica shard vacuum checkpoint rollback canary build image digest secret rotate"
).split()


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def records(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 60)))
        value = f"Lesson {i}: {words}."
        lines.append(json.dumps({"scope": f"repo::bench/r{i % 50}", "key": f"lesson-{i}", "value": value}))
    return lines


def cli(home: Path, *args: str, env: dict[str, str]) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "--json", *args],
        capture_output=True, text=True, env=env, cwd=home, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    try:
        envelope = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(f"cairn {' '.join(args)}: {proc.stdout[-500:]} {proc.stderr[-2000:]}") from None
    if envelope["status"] != "ok":
        raise SystemExit(f"cairn {' '.join(args)}: {envelope['reason']}")
    return envelope["data"], seconds


def post(base: str, token: str, path: str, body: dict[str, Any]) -> None:
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 - loopback
        resp.read()


def write_locally(home: Path, changes: list[tuple[int, str]]) -> None:
    """A new version of each lesson, written on the laptop's store in this process (as `cairn write` does)."""
    from cairn.runtime.local import local_principal
    from cairn.service.api import Cairn
    from cairn.store.engine import Store, sqlite_url

    os.environ["CAIRN_EMBED_MODEL"] = "hash-test-64"
    store = Store(sqlite_url(home))
    try:
        svc, me = Cairn(store), local_principal()
        for i, value in changes:
            svc.write(me, f"repo::bench/r{i % 50}", f"lesson-{i}", value)
    finally:
        store.dispose()


def figures(data: dict[str, Any], seconds: float) -> dict[str, Any]:
    return {
        "seconds": round(seconds, 2),
        "pulled": data["pulled"]["applied"],
        "pushed": data["pushed"]["applied"],
        "batches": data["pulled"]["batches"] + data["pushed"]["batches"],
        "bytes_in": data["bytes"]["received"],
        "bytes_out": data["bytes"]["sent"],
    }


def report(result: dict[str, Any], previous: dict[str, Any] | None) -> str:
    rows = [f"sync at {result['lessons']:,} lessons (load {result['load'][0]}-{result['load'][1]})", ""]
    rows.append(f"{'case':<18} {'seconds':>8} {'pulled':>7} {'pushed':>7} {'MiB in':>8} {'MiB out':>8}  previous s")
    for case, f in result["cases"].items():
        before = (previous or {}).get("cases", {}).get(case, {}).get("seconds")
        rows.append(
            f"{case:<18} {f['seconds']:>8.2f} {f['pulled']:>7} {f['pushed']:>7} "
            f"{f['bytes_in'] / 2**20:>8.2f} {f['bytes_out'] / 2**20:>8.2f}  {before if before is not None else '-'}"
        )
    rows.append(f"\nserver import of {result['lessons']:,} lessons: {result['import_seconds']:.1f} s (setup)")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lessons", type=int, default=60_000)
    ap.add_argument("--out", type=Path, default=OUT / "sync.json")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="cairn-sync-bench-"))
    env = {**os.environ, "CAIRN_EMBED_MODEL": "hash-test-64", "CAIRN_NO_DAEMON": "1", "CAIRN_SERVE_AUTO_START": "0"}
    env.pop("CAIRN_TOKEN", None)
    server = None
    try:
        server_home, laptop = work / "server", work / "laptop"
        server_home.mkdir(mode=0o700)
        laptop.mkdir(mode=0o700)
        token = cli(server_home, "user", "create", "bench", env=env)[0]["token"]
        source = work / "lessons.jsonl"
        source.write_text("\n".join(records(args.lessons)) + "\n", encoding="utf-8")
        say(f"importing {args.lessons:,} lessons into the server's store")
        _, import_seconds = cli(server_home, "import", str(source), "--no-embed", env={**env, "CAIRN_TOKEN": token})
        port = free_port()
        say("starting cairn serve --http")
        server = start_server(server_home, port, env)
        base = f"http://127.0.0.1:{port}"
        sync_env = {**env, "CAIRN_TOKEN": token}
        cases: dict[str, Any] = {}
        say("full sync into the empty laptop")
        data, seconds = cli(laptop, "--url", base, "sync", env=sync_env)
        cases["full"] = figures(data, seconds)
        say(f"  {cases['full']}")
        data, seconds = cli(laptop, "--url", base, "sync", env=sync_env)
        cases["noop"] = figures(data, seconds)
        rng = random.Random(5)
        for i in rng.sample(range(args.lessons), CHANGED):
            body = {
                "scope": f"repo::bench/r{i % 50}",
                "key": f"lesson-{i}",
                "value": f"Lesson {i}, changed on the server.",
            }
            post(base, token, "/v1/lessons", body)
        say(f"incremental: {CHANGED} lessons changed on the server")
        data, seconds = cli(laptop, "--url", base, "sync", env=sync_env)
        cases["incremental_pull"] = figures(data, seconds)
        write_locally(
            laptop, [(i, f"Lesson {i}, changed on the laptop.") for i in rng.sample(range(args.lessons), CHANGED)]
        )
        say(f"incremental: {CHANGED} lessons changed on the laptop")
        data, seconds = cli(laptop, "--url", base, "sync", env=sync_env)
        cases["incremental_push"] = figures(data, seconds)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
        result = {
            "lessons": args.lessons,
            "at": datetime.now(UTC).isoformat(),
            "commit": commit.stdout.strip(),
            "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
            "cpus": os.cpu_count(),
            "import_seconds": round(import_seconds, 1),
            "laptop_db_bytes": (laptop / "cairn.db").stat().st_size,
            "cases": cases,
        }
        runs.keep(args.out, result, report, say)
    finally:
        runs.stop(server)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
