"""The memory gateway's cost: added latency over a direct call to a local provider, with and without
injection, at 60,000 lessons; streaming time to first byte and total; requests/s with 16 concurrent
streaming clients.

    .venv/bin/python bench/gateway_bench.py                      # 60,000 lessons, 200 requests a row
    .venv/bin/python bench/gateway_bench.py --size 6000 --runs 50

* **Store**: the context benchmark's store (``bench/context_gen.py``, cached; built with its bulk
  loader, so the first run spends a few minutes there), copied to a scratch ``CAIRN_HOME``.
* **Provider**: a fake OpenAI upstream in its own process (this file with ``--fake PORT``): a fixed
  JSON answer, or 20 SSE chunks written as fast as the socket takes them. It does no work, so every
  millisecond above the direct row is the gateway's.
* **Gateway**: the real ``cairn gateway`` subprocess in front of it, on loopback, ledger on.
  *with injection*: a token of the ``local`` account and ``X-Cairn-Repo acme/api``,
  ``X-Cairn-Branch feat/retry-backoff``, ``X-Cairn-Project api`` (the ladder holds ~38% of the
  store; the block is ``context.max_chars`` 3,000). *without*: a token limited to an empty
  repository, so the gateway resolves the token, ranks (nothing), records the turn, and forwards the
  body unchanged. Each request's user message is new, so each one records a new conversation.
* **Rows**: sequential requests (``--runs`` each, after 10 warm-up) — p50/p95 of the whole request;
  streamed: time to the first body byte and to the end; then ``--concurrent`` clients (threads)
  streaming ``--runs`` requests in all: requests per second, direct and through the gateway.

Writes bench/out/gateway.json and prints the table with the change against the previous run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
OUT = ROOT / "bench" / "out" / "gateway.json"
CAIRN = str(Path(sys.executable).parent / "cairn")
LADDER = {"X-Cairn-Repo": "acme/api", "X-Cairn-Branch": "feat/retry-backoff", "X-Cairn-Project": "api"}
CHUNKS = 20


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ms(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    return {
        "p50_ms": round(statistics.median(s) * 1000, 2),
        "p95_ms": round(s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))] * 1000, 2),
        "n": len(s),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the fake provider (its own process) ---------------------------------------------------------------
def fake(port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    def chunk(i: int) -> bytes:
        delta = {"content": f"word{i} "}
        body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}  # fmt: skip
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        if body.get("stream"):

            async def events() -> Any:
                for i in range(CHUNKS):
                    yield chunk(i)
                yield b"data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        message = {"role": "assistant", "content": "ok"}
        answer = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                  "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip
        return JSONResponse(answer)

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# -- measuring -----------------------------------------------------------------------------------------
class Caller:
    """One HTTP client per thread (keep-alive, like an SDK's)."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.counter = 0
        self.lock = threading.Lock()

    def client(self) -> Any:
        import httpx2

        if not hasattr(self.local, "c"):
            self.local.c = httpx2.Client(timeout=60, trust_env=False)
        return self.local.c

    def body(self, stream: bool) -> bytes:
        with self.lock:
            self.counter += 1
            n = self.counter
        messages = [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": f"Request {n}: the retry test in acme/api is flaky, why?"},
        ]
        return json.dumps({"model": "m", "messages": messages, "stream": stream}).encode()

    def once(self, url: str, headers: dict[str, str], stream: bool) -> tuple[float, float]:
        """(time to first body byte, total) of one request."""
        h = {"content-type": "application/json", **headers}
        t0 = time.perf_counter()
        first = None
        with self.client().stream("POST", url, content=self.body(stream), headers=h) as r:
            for _ in r.iter_raw():
                if first is None:
                    first = time.perf_counter()
            assert r.status_code == 200, r.status_code
        end = time.perf_counter()
        return (first or end) - t0, end - t0


def sequential(caller: Caller, url: str, headers: dict[str, str], stream: bool, runs: int) -> dict[str, Any]:
    for _ in range(10):
        caller.once(url, headers, stream)
    firsts, totals = [], []
    for _ in range(runs):
        f, t = caller.once(url, headers, stream)
        firsts.append(f)
        totals.append(t)
    out = {"total": ms(totals)}
    if stream:
        out["ttfb"] = ms(firsts)
    return out


def concurrent(caller: Caller, url: str, headers: dict[str, str], clients: int, runs: int) -> dict[str, Any]:
    for _ in range(clients):
        caller.once(url, headers, True)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(lambda _: caller.once(url, headers, True), range(runs)))
    wall = time.perf_counter() - t0
    return {"rps": round(runs / wall, 1), "total": ms([t for _, t in results]), "clients": clients}


def wait_up(url: str) -> None:
    import httpx2

    for _ in range(600):
        try:
            httpx2.get(url, timeout=1, trust_env=False)
            return
        except Exception:  # noqa: BLE001 - not listening yet
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up")


def run(size: int, runs: int, clients: int) -> dict[str, Any]:
    import context_gen

    say(f"store of {size:,} lessons (bench/context_gen.py, bulk loader; cached after the first build)")
    meta = context_gen.build_store(size, loader="bulk" if size > 6000 else None)
    work = Path(tempfile.mkdtemp(prefix="gateway-bench-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        home = work / "home"
        home.mkdir()
        shutil.copyfile(context_gen.store_home(size) / "cairn.db", home / "cairn.db")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        env.update(CAIRN_HOME=str(home), CAIRN_SERVE_AUTO_START="0", CAIRN_NO_DAEMON="1")

        def token(*extra: str) -> str:
            made = subprocess.run([CAIRN, "--json", "token", "create", "--perm", "read", *extra], env=env,
                                  capture_output=True, text=True, check=True)  # fmt: skip
            return json.loads(made.stdout)["data"]["token"]

        subprocess.run([CAIRN, "db", "upgrade"], env=env, capture_output=True, check=True)
        full, empty = token(), token("--scope-pattern", "repo::bench/empty")
        fport, gport = free_port(), free_port()
        procs.append(subprocess.Popen([sys.executable, __file__, "--fake", str(fport)], stderr=subprocess.DEVNULL))
        upstream = f"http://127.0.0.1:{fport}"
        wait_up(upstream + "/")
        log = (work / "gateway.log").open("w")
        procs.append(
            subprocess.Popen(
                [CAIRN, "gateway", "--upstream", upstream, "--port", str(gport)], env=env, stderr=log, stdout=log
            )
        )
        base = f"http://127.0.0.1:{gport}"
        wait_up(base + "/v1/health")
        direct, through = upstream + "/v1/chat/completions", base + "/v1/chat/completions"
        with_inj = {"authorization": f"Bearer {full}", **LADDER}
        without = {"authorization": f"Bearer {empty}"}
        caller = Caller()
        out: dict[str, Any] = {"lessons": meta.get("lessons", size), "runs": runs}
        rows = {
            "direct": (direct, {}),
            "gateway, no injection": (through, without),
            "gateway, injection": (through, with_inj),
        }
        for stream in (False, True):
            kind = "stream" if stream else "json"
            for name, (url, headers) in rows.items():
                say(f"{kind}: {name}")
                out[f"{kind}: {name}"] = sequential(caller, url, headers, stream, runs)
        for name in ("direct", "gateway, injection"):
            url, headers = rows[name]
            say(f"{clients} concurrent streaming clients: {name}")
            out[f"concurrent: {name}"] = concurrent(caller, url, headers, clients, max(runs, clients * 10))
        return out
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


def delta(now: float | None, before: float | None) -> str:
    if now is None or before is None or not before:
        return ""
    return f" ({(now - before) / before * 100:+.0f}%)"


def report(r: dict[str, Any], prev: dict[str, Any] | None) -> str:
    def old(*path: str) -> Any:
        cur: Any = prev or {}
        for p in path:
            cur = cur.get(p) if isinstance(cur, dict) else None
        return cur

    rows = [("row", "p50", "p95", "ttfb p50", "ttfb p95")]
    for kind in ("json", "stream"):
        for name in ("direct", "gateway, no injection", "gateway, injection"):
            m = r.get(f"{kind}: {name}") or {}
            tot, ttfb = m.get("total", {}), m.get("ttfb", {})
            rows.append((
                f"{kind}: {name}",
                f"{tot.get('p50_ms')} ms{delta(tot.get('p50_ms'), old(f'{kind}: {name}', 'total', 'p50_ms'))}",
                f"{tot.get('p95_ms')} ms",
                f"{ttfb.get('p50_ms')} ms" if ttfb else "",
                f"{ttfb.get('p95_ms')} ms" if ttfb else "",
            ))  # fmt: skip
    for name in ("direct", "gateway, injection"):
        m = r.get(f"concurrent: {name}") or {}
        rows.append((
            f"{m.get('clients')} streaming clients: {name}",
            f"{m.get('rps')} req/s{delta(m.get('rps'), old(f'concurrent: {name}', 'rps'))}",
            f"p95 {m.get('total', {}).get('p95_ms')} ms", "", "",
        ))  # fmt: skip
    direct = (r.get("json: direct") or {}).get("total", {}).get("p50_ms")
    for name in ("gateway, no injection", "gateway, injection"):
        g = (r.get(f"json: {name}") or {}).get("total", {}).get("p50_ms")
        if direct is not None and g is not None:
            rows.append((f"added p50, json: {name}", f"{round(g - direct, 2)} ms", "", "", ""))
    widths = [max(len(str(row[i])) for row in rows) for i in range(5)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=60_000, help="lessons in the store (a context_gen size)")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--concurrent", type=int, default=16)
    ap.add_argument("--fake", type=int, help=argparse.SUPPRESS)  # internal: serve the fake provider
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.fake:
        fake(args.fake)
        return 0
    prev = json.loads(args.out.read_text()) if args.out.exists() else None
    result: dict[str, Any] = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_start": os.getloadavg()[0],
        "commit": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
    }
    result.update(run(args.size, args.runs, args.concurrent))
    result["load_end"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(report(result, prev))
    print(f"load {result['load_start']:.1f} -> {result['load_end']:.1f}; {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
