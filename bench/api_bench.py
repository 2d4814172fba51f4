"""Load the HTTP API and the MCP endpoint of `cairn serve` on loopback, at 60,000 lessons.

    .venv/bin/python bench/api_bench.py                         # 60,000 lessons, ~5 min
    .venv/bin/python bench/api_bench.py --seconds 10 --concurrency 4 --store 6000   # ad hoc

The server is the real one, in its own process: `cairn --home TMP serve --http --no-sweep` on a copy of
the context bench's cached store (`bench/out/context-stores/N`, built by `make bench`; real lesson mix,
pooled real-model vectors), migrated to the current schema on open. The load generator is a second
process (this one): a closed loop of ``--concurrency`` workers on one asyncio event loop, each sending
its next request as soon as the previous answer arrives, for ``--seconds`` per operation, with one
bearer token (the store's own account). Requests per second are completed requests over the wall
time; p50 / p95 are per request, measured in the generator (so they include the client's share).

Operations (in this order; writes last, see OPS), HTTP (`httpx2`, keep-alive):
* **read**: `GET /v1/lesson` of random existing addresses;
* **write**: `POST /v1/lessons`, distinct new lessons (every one audited, indexed, queued for embedding);
* **search**: `POST /v1/search`, hybrid, over the search bench's 50 queries (the real model embeds each);
* **context**: `POST /v1/context` for random repos of the store, with a branch.

MCP (the SDK's own client over streamable HTTP, one session per worker): `read`, `write`, `search`,
`context` tool calls, the same arguments.

Both run on the same 2-core machine as the server, which therefore shares its CPU with the generator:
figures are a floor. Prints a table, writes `bench/out/api.json` and compares with the previous run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT / "bench"))

import runs  # noqa: E402
import search_bench  # noqa: E402
from store_bench import delta  # noqa: E402

# Writes last: every write queues its lesson for embedding, and a search embeds its tenant's queue
# first (docs/KNOWN_ISSUES.md), so searching after a burst of writes would measure the backlog.
OPS = ("read", "search", "context", "write")


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def summary(lat: list[float], seconds: float, errors: int) -> dict[str, Any]:
    ms = sorted(x * 1000 for x in lat)
    if not ms:
        return {"requests": 0, "errors": errors, "rps": 0.0}
    return {
        "requests": len(ms),
        "errors": errors,
        "rps": round(len(ms) / seconds, 1),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.95))], 1),
    }


def prepare(size: int, work: Path) -> tuple[Path, list[tuple[str, str]], list[str]]:
    src = ROOT / "bench" / "out" / "context-stores" / str(size) / "cairn.db"
    if not src.is_file():
        raise SystemExit(f"no cached store of {size} lessons at {src}: run `make bench` (context) first")
    home = work / "home"
    home.mkdir(mode=0o700)
    shutil.copyfile(src, home / "cairn.db")
    con = sqlite3.connect(home / "cairn.db")
    rows = con.execute(
        "SELECT scope, key FROM lessons WHERE archived_at IS NULL AND trust != 'rejected' "
        "AND superseded_by IS NULL AND (expires_at IS NULL OR expires_at > datetime('now', '+1 day')) "
        "ORDER BY random() LIMIT 2000"
    ).fetchall()
    repos = sorted(
        {r[0].split("::")[1] for r in con.execute("SELECT DISTINCT scope FROM lessons WHERE scope LIKE 'repo::%'")}
    )
    con.close()
    return home, [(s, k) for s, k in rows], repos


def cli(home: Path, *args: str, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "--json", *args],
        capture_output=True, text=True, env=env, cwd=home, check=False,
    )  # fmt: skip
    envelope = json.loads(proc.stdout)
    if envelope["status"] != "ok":
        raise SystemExit(f"cairn {' '.join(args)}: {envelope['reason']}")
    return envelope["data"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(home: Path, port: int, env: dict[str, str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "serve", "--http", "--port", str(port),
         "--no-sweep"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=home,
    )  # fmt: skip
    import urllib.request

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("server did not come up in 300 s")


class Work:
    """Arguments for each operation, drawn at random (seeded) from the store."""

    def __init__(self, addresses: list[tuple[str, str]], repos: list[str], seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.addresses = addresses
        self.repos = repos
        self.queries = [q for q, _ in search_bench.queries()]
        self.n = 0

    def args(self, op: str) -> dict[str, Any]:
        self.n += 1
        if op == "read":
            scope, key = self.rng.choice(self.addresses)
            return {"scope": scope, "key": key}
        if op == "write":
            return {"scope": "repo::bench/api", "key": f"bench-{os.getpid()}-{self.n}",
                    "value": f"Load test lesson {self.n}: retry the flaky step once, then report it."}  # fmt: skip
        if op == "search":
            return {"query": self.rng.choice(self.queries), "limit": 10}
        return {"repo": self.rng.choice(self.repos), "branch": "main"}


async def http_load(base: str, token: str, op: str, work: Work, seconds: float, concurrency: int) -> dict[str, Any]:
    import httpx2

    lat: list[float] = []
    errors = 0
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=120) as client:

        async def one() -> None:
            nonlocal errors
            a = work.args(op)
            t = time.perf_counter()
            if op == "read":
                r = await client.get("/v1/lesson", params=a)
            elif op == "write":
                r = await client.post("/v1/lessons", json=a)
            elif op == "search":
                r = await client.post("/v1/search", json=a)
            else:
                r = await client.post("/v1/context", json=a)
            if r.status_code == 200:
                lat.append(time.perf_counter() - t)
            else:
                errors += 1

        stop = time.perf_counter() + seconds
        started = time.perf_counter()

        async def worker() -> None:
            while time.perf_counter() < stop:
                await one()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return summary(lat, wall, errors)


async def mcp_load(base: str, token: str, op: str, work: Work, seconds: float, concurrency: int) -> dict[str, Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    lat: list[float] = []
    errors = 0
    tool = {"read": "read", "write": "write", "search": "search", "context": "context"}[op]
    stop = time.perf_counter() + seconds
    started = time.perf_counter()

    async def worker() -> None:
        nonlocal errors
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60, read=300)) as h,
            Client(streamable_http_client(base + "/mcp/", http_client=h)) as c,
        ):
            while time.perf_counter() < stop:
                a = work.args(op)
                if op == "search":
                    a = {"query": a["query"], "limit": 10}
                t = time.perf_counter()
                r = await c.call_tool(tool, a)
                if r.is_error:
                    errors += 1
                else:
                    lat.append(time.perf_counter() - t)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return summary(lat, time.perf_counter() - started, errors)


def report(result: dict[str, Any], previous: dict[str, Any] | None) -> str:
    lines = [
        f"api bench · {result['lessons']:,} lessons · concurrency {result['concurrency']} · "
        f"{result['seconds']} s per operation · load {result['load'][0]} -> {result['load'][1]} · {result['commit']}",
        "",
        f"{'surface':8} {'operation':9} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'errors':>7}  {'req/s vs prev':>14}",
    ]
    for surface in ("http", "mcp"):
        for op in OPS:
            r = result[surface].get(op)
            if not r:
                continue
            prev = (previous or {}).get(surface, {}).get(op, {}).get("rps")
            lines.append(
                f"{surface:8} {op:9} {r['rps']:>8} {r.get('p50_ms', '-'):>8} {r.get('p95_ms', '-'):>8} "
                f"{r['errors']:>7}  {delta(r['rps'], prev, higher_better=True):>14}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", type=int, default=60000, help="cached context-bench store size to serve")
    ap.add_argument("--seconds", type=float, default=20.0, help="duration of each operation's run")
    ap.add_argument("--concurrency", type=int, default=8, help="closed-loop workers")
    ap.add_argument("--out", type=Path, default=OUT / "api.json")
    ap.add_argument("--no-mcp", action="store_true")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    work_dir = Path(tempfile.mkdtemp(prefix="cairn-api-bench-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["CAIRN_HOME"] = str(work_dir / "home")
    server = None
    try:
        say(f"copying the {args.store:,}-lesson store")
        home, addresses, repos = prepare(args.store, work_dir)
        token = cli(home, "token", "create", "--perm", "write", "--name", "bench", env=env)["token"]
        port = free_port()
        say("starting cairn serve --http (migrates the copy, warms the index and the model)")
        server = start_server(home, port, env)
        base = f"http://127.0.0.1:{port}"
        work = Work(addresses, repos)
        result: dict[str, Any] = {
            "lessons": args.store, "concurrency": args.concurrency, "seconds": args.seconds,
            "at": datetime.now(UTC).isoformat(), "http": {}, "mcp": {},
        }  # fmt: skip
        # Warm every path once (model, ranking index) so the timed runs measure the steady state.
        asyncio.run(http_load(base, token, "context", work, 3, 1))
        asyncio.run(http_load(base, token, "search", work, 3, 1))
        # Reads on both surfaces first, then writes (see OPS: a write burst leaves an embedding backlog).
        plan = [(surface, op) for op in OPS[:-1] for surface in ("http", "mcp")] + [("http", "write"), ("mcp", "write")]
        for surface, op in plan:
            if surface == "mcp" and args.no_mcp:
                continue
            say(f"{surface} {op}: {args.seconds:.0f} s at concurrency {args.concurrency}")
            load = http_load if surface == "http" else mcp_load
            result[surface][op] = asyncio.run(load(base, token, op, work, args.seconds, args.concurrency))
            say(f"  {result[surface][op]}")
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
        result["commit"] = commit.stdout.strip()
        result["load"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
        result["cpus"] = os.cpu_count()
        runs.keep(args.out, result, report, say)
    finally:
        runs.stop(server)
        shutil.rmtree(work_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
