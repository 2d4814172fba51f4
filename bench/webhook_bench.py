"""GitHub deliveries into `cairn serve`: accepted per second end to end, latency, and time to findable.

    .venv/bin/python bench/webhook_bench.py                    # 20 s of 8 senders, 10 findability samples
    .venv/bin/python bench/webhook_bench.py --seconds 5 --samples 3 --hash-model   # quick, no real model

The server is the real one in its own process (`cairn --home TMP serve --http --no-sweep`, fresh
SQLite store, or `--db URL` for Postgres), with one registered repository. The senders are threads
of this process, each on its own keep-alive connection, each sending its next delivery as soon as
the previous answer arrives: a `pull_request_review_comment` `created` delivery in the shape GitHub
sends (about 6 KB with the pull request and repository objects), a distinct finding each time, signed
with HMAC-SHA256. Every one is verified, deduplicated, gated, filtered and written as a new candidate
lesson (lesson row, version, tags, full-text index, embedding queue, provenance, hash-chained audit
row), one transaction each; "accepted" counts answers 200 with outcome "created".

Findable: a delivery with a unique term, then `cairn --json search TERM` (through the running
daemon, as a person types it) until the lesson is the hit; the time from sending the delivery to
the answer that finds it, p50 / p95 over ``--samples``.

Both run on the same machine, so the senders' CPU is the server's too: figures are a floor. Prints a
table, writes `bench/out/webhook.json` and compares with the previous run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

import runs  # noqa: E402
from api_bench import free_port, say, start_server  # noqa: E402
from store_bench import delta  # noqa: E402

from cairn.webhooks.github import signature_header  # noqa: E402

REPO = "acme/bench"
WORDS = ("retry", "upload", "cursor", "timeout", "config", "cache", "socket", "parser", "handler", "token")


def payload(n: int, body: str) -> dict[str, Any]:
    """A pull_request_review_comment 'created' delivery, in GitHub's shape (trimmed of unused URLs)."""
    user = {"login": f"reviewer{n % 5}", "id": 1000 + n % 5, "type": "User", "site_admin": False}
    return {
        "action": "created",
        "comment": {
            "id": 10_000_000 + n, "node_id": "PRRC_kwDO", "path": f"src/{WORDS[n % 10]}.py", "line": 10 + n % 90,
            "original_line": 10 + n % 90, "side": "RIGHT", "diff_hunk": "@@ -16,33 +16,40 @@ " + "x" * 400,
            "commit_id": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "user": user, "body": body,
            "author_association": "MEMBER", "html_url": f"https://github.com/{REPO}/pull/{n % 50 + 1}#discussion_r{n}",
            "created_at": "2026-12-01T10:00:00Z", "updated_at": "2026-12-01T10:00:00Z",
        },
        "pull_request": {
            "number": n % 50 + 1, "state": "open", "title": "Retry the upload", "user": user,
            "body": "This PR retries uploads. " * 40, "html_url": f"https://github.com/{REPO}/pull/{n % 50 + 1}",
            "head": {"ref": "retry", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
            "base": {"ref": "main", "sha": "9049f1265b7d61be4a8904a9a27120d2064dab3b"},
        },
        "repository": {"id": 1, "name": "bench", "full_name": REPO, "private": False,
                       "owner": {"login": "acme", "type": "Organization"}, "html_url": f"https://github.com/{REPO}"},
        "sender": user,
    }  # fmt: skip


def finding(n: int, tag: str) -> str:
    a, b, c = WORDS[n % 10], WORDS[(n // 10) % 10], WORDS[(n // 100) % 10]
    return f"Finding {tag}{n}: check the {a} before the {b} call, or the {c} path leaks on error."


def send(conn: http.client.HTTPConnection, port: int, secret: str, n: int, body: str) -> tuple[int, dict[str, Any]]:
    raw = json.dumps(payload(n, body)).encode()
    headers = {
        "Content-Type": "application/json",
        "Host": f"127.0.0.1:{port}",
        "X-GitHub-Event": "pull_request_review_comment",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": signature_header(secret, raw),
    }
    conn.request("POST", f"/v1/webhooks/github?repo={REPO}", body=raw, headers=headers)
    reply = conn.getresponse()
    return reply.status, json.loads(reply.read() or b"{}")


def load(port: int, secret: str, seconds: float, senders: int) -> dict[str, Any]:
    """``senders`` closed-loop threads for ``seconds``: accepted deliveries per second and latency."""
    latencies: list[float] = []
    errors: list[str] = []
    counter = iter(range(10**9))
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.monotonic() < stop:
            with lock:
                n = next(counter)
            t0 = time.perf_counter()
            try:
                status, answer = send(conn, port, secret, n, finding(n, "load"))
            except (OSError, http.client.HTTPException) as exc:
                errors.append(type(exc).__name__)
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                continue
            took = time.perf_counter() - t0
            with lock:
                if status == 200 and answer.get("outcome") == "created":
                    latencies.append(took)
                else:
                    errors.append(f"{status} {answer.get('outcome') or answer.get('code')}")
        conn.close()

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    ms = sorted(x * 1000 for x in latencies)
    return {
        "accepted": len(ms),
        "errors": len(errors),
        "error_kinds": sorted(set(errors))[:5],
        "per_second": round(len(ms) / wall, 1),
        "p50_ms": round(statistics.median(ms), 1) if ms else None,
        "p95_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.95))], 1) if ms else None,
    }


def findable(home: Path, port: int, secret: str, samples: int, env: dict[str, str]) -> dict[str, Any]:
    """Send one delivery with a unique term, then `cairn search TERM` until it is the hit."""
    times: list[float] = []
    searches: list[int] = []
    # The load left every lesson it wrote queued for embedding, and a search embeds its tenant's queue
    # first: that first search is timed on its own, so the samples measure a steady state.
    t0 = time.perf_counter()
    search(home, "drain the queue", env)
    backlog_ms = round((time.perf_counter() - t0) * 1000, 1)
    for i in range(samples):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)  # searches outlast keep-alive
        term = f"zq{uuid.uuid4().hex[:10]}"
        n = 900_000_000 + i
        t0 = time.perf_counter()
        status, answer = send(conn, port, secret, n, f"Never call {term} twice: the second call leaks a handle.")
        conn.close()
        if status != 200 or answer.get("outcome") != "created":
            raise SystemExit(f"delivery refused: {status} {answer}")
        tries = 0
        while True:
            tries += 1
            hits = search(home, term, env)
            if any(answer["key"] == h["key"] for h in hits):
                break
            if tries > 50:
                raise SystemExit(f"not findable after 50 searches: {hits}")
        times.append(time.perf_counter() - t0)
        searches.append(tries)
    ms = sorted(x * 1000 for x in times)
    return {
        "samples": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.95))], 1),
        "searches_needed_max": max(searches),
        "first_search_after_load_ms": backlog_ms,
    }


def search(home: Path, query: str, env: dict[str, str]) -> list[dict[str, Any]]:
    """`cairn --json search QUERY` as a person runs it (forwarded to the running daemon)."""
    proc = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "--json", "search", query, "--limit", "3"],
        capture_output=True, text=True, env=env, cwd=home, check=False, timeout=600,
    )  # fmt: skip
    if not proc.stdout:
        raise SystemExit(f"cairn search failed: {proc.stderr[:300]}")
    return json.loads(proc.stdout).get("data", {}).get("results", []) or []


def report(result: dict[str, Any], previous: dict[str, Any] | None) -> str:
    prev = previous or {}
    ld, fd = result["load"], result["findable"]
    pl, pf = prev.get("load", {}), prev.get("findable", {})

    def vs(now: Any, then: Any) -> str:
        return delta(now, then, higher_better=False)

    return "\n".join(
        [
            f"webhook bench · {result['database']} · {result['senders']} senders · {result['seconds']} s · "
            f"model {result['model']} · load {result['loadavg'][0]} -> {result['loadavg'][1]} · {result['commit']}",
            "",
            f"{'measure':34} {'value':>10}  {'vs previous':>14}",
            f"{'deliveries accepted per second':34} {ld['per_second']:>10}  "
            f"{delta(ld['per_second'], pl.get('per_second'), higher_better=True):>14}",
            f"{'delivery latency p50 (ms)':34} {ld['p50_ms']:>10}  {vs(ld['p50_ms'], pl.get('p50_ms')):>14}",
            f"{'delivery latency p95 (ms)':34} {ld['p95_ms']:>10}  {vs(ld['p95_ms'], pl.get('p95_ms')):>14}",
            f"{'accepted / errors':34} {str(ld['accepted']) + ' / ' + str(ld['errors']):>10}",
            f"{'delivery -> findable p50 (ms)':34} {fd['p50_ms']:>10}  {vs(fd['p50_ms'], pf.get('p50_ms')):>14}",
            f"{'delivery -> findable p95 (ms)':34} {fd['p95_ms']:>10}  {vs(fd['p95_ms'], pf.get('p95_ms')):>14}",
            f"{'searches needed (max)':34} {fd['searches_needed_max']:>10}",
            f"{'first search after the load (ms)':34} {fd['first_search_after_load_ms']:>10}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="duration of the load")
    ap.add_argument("--senders", type=int, default=8, help="concurrent closed-loop senders")
    ap.add_argument("--samples", type=int, default=10, help="delivery -> findable samples")
    ap.add_argument("--db", help="a Postgres URL (default: a fresh SQLite store)")
    ap.add_argument("--postgres", action="store_true", help="a throwaway Postgres (tests/pg_server.py) instead")
    ap.add_argument("--hash-model", action="store_true", help="the test embedding model instead of the real one")
    ap.add_argument("--out", type=Path, default=OUT / "webhook.json")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="cairn-webhook-bench-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    home = work / "home"
    home.mkdir(mode=0o700)
    env["CAIRN_HOME"] = str(home)
    if args.db:
        env["CAIRN_DATABASE_URL"] = args.db
    if args.hash_model:
        env["CAIRN_EMBED_MODEL"] = "hash-test-64"
    server = None
    pg = None
    try:
        if args.postgres:
            sys.path.insert(0, str(ROOT))
            from cairn.store.engine import Store
            from tests.pg_server import start_throwaway_postgres

            pg = start_throwaway_postgres(work / "pg")
            args.db = pg.create_database("cairn_webhook_bench")
            Store(args.db).upgrade()  # the owner migrates, as `cairn db upgrade` does
            env["CAIRN_DATABASE_URL"] = args.db
        proc = subprocess.run(
            [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "--json", "webhook", "add", REPO],
            capture_output=True, text=True, env={**env, "CAIRN_NO_DAEMON": "1"}, cwd=home, check=False,
        )  # fmt: skip
        secret = json.loads(proc.stdout)["data"]["secret"]
        port = free_port()
        say("starting cairn serve --http (warms the index and the model)")
        server = start_server(home, port, env)
        say(f"load: {args.senders} senders for {args.seconds:.0f} s")
        loaded = load(port, secret, args.seconds, args.senders)
        say(f"  {loaded}")
        say(f"findable: {args.samples} samples")
        found = findable(home, port, secret, args.samples, env)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
        result = {
            "at": datetime.now(UTC).isoformat(),
            "database": "postgres" if args.db else "sqlite",
            "model": "hash-test-64" if args.hash_model else "default",
            "senders": args.senders,
            "seconds": args.seconds,
            "load": loaded,
            "findable": found,
            "commit": commit.stdout.strip(),
            "loadavg": [round(load0, 2), round(os.getloadavg()[0], 2)],
            "cpus": os.cpu_count(),
        }
        runs.keep(args.out, result, report, say)
    finally:
        runs.stop(server)
        if pg is not None:
            pg.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
