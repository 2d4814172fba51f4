"""Benchmark cairn.search.embed: cold model load and embedding throughput.

Cold load is measured in fresh subprocesses (interpreter start excluded): the time to
``import cairn.search.embed``, then ``get_embedder()`` (onnxruntime import, model hash check, session
build, tokenizer), then the first ``embed`` call. Throughput is measured on a deterministic corpus of
realistic lessons (1-3 sentences each) at batch sizes 1, 16 and 64, plus the latency of embedding one
query per call (the search path). Every figure is the median of ``--runs`` runs.

    .venv/bin/python bench/embed_bench.py [--runs 5] [--corpus 256] [--threads N]

Prints a table and writes bench/out/embed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out" / "embed.json"

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


def make_corpus(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(SENTENCES, rng.randint(1, 3))) for _ in range(n)]


_COLD_PROBE = """
import json, time
t0 = time.perf_counter()
import cairn.search.embed as E
t1 = time.perf_counter()
emb = E.get_embedder()
t2 = time.perf_counter()
emb.embed(["ModuleNotFoundError: No module named 'yaml'"])
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "first_embed_s": t3 - t2, "total_s": t3 - t0}))
"""


def cold_load(runs: int, env: dict[str, str]) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        res = subprocess.run([sys.executable, "-c", _COLD_PROBE], capture_output=True, text=True, env=env, check=True)
        samples.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def throughput(emb, corpus: list[str], batch_size: int, runs: int) -> dict[str, float]:
    emb.embed(corpus[: max(batch_size, 8)], batch_size=batch_size)  # warm-up
    times, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        emb.embed(corpus, batch_size=batch_size)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    med, cpu_med = statistics.median(times), statistics.median(cpu)
    return {
        "batch_size": batch_size,
        "seconds": med,
        "texts_per_s": len(corpus) / med,
        "cpu_seconds": cpu_med,
        "texts_per_cpu_s": len(corpus) / cpu_med,
    }


def single_query_latency(emb, corpus: list[str], runs: int, n: int = 64) -> dict[str, float]:
    queries = corpus[:n]
    per_run = []
    for _ in range(runs):
        lat = []
        for q in queries:
            t = time.perf_counter()
            emb.embed([q])
            lat.append(time.perf_counter() - t)
        per_run.append((statistics.median(lat), sorted(lat)[int(0.95 * (len(lat) - 1))], sum(lat)))
    return {
        "p50_ms": 1000 * statistics.median(r[0] for r in per_run),
        "p95_ms": 1000 * statistics.median(r[1] for r in per_run),
        "texts_per_s": len(queries) / statistics.median(r[2] for r in per_run),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="runs per measurement (median reported)")
    ap.add_argument("--corpus", type=int, default=256, help="number of lessons in the throughput corpus")
    ap.add_argument("--threads", type=int, default=None, help="set CAIRN_EMBED_THREADS")
    args = ap.parse_args()

    if args.threads is not None:
        os.environ["CAIRN_EMBED_THREADS"] = str(args.threads)
    os.environ.pop("CAIRN_EMBED_MODEL", None)
    env = dict(os.environ)

    import cairn.search.embed as E

    load_before = os.getloadavg()
    cold = cold_load(args.runs, env)
    emb = E.get_embedder()
    threads = E._intra_op_threads()
    corpus = make_corpus(args.corpus)
    tok = emb._tokenizer  # type: ignore[attr-defined]
    token_counts = sorted(len(e.ids) for e in tok.encode_batch(corpus))
    rows = [throughput(emb, corpus, bs, args.runs) for bs in (1, 16, 64)]
    single = single_query_latency(emb, corpus, args.runs)
    load_after = os.getloadavg()

    result = {
        "model": emb.name,
        "dim": emb.dim,
        "intra_op_threads": threads,
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "runs": args.runs,
        "loadavg_1m_before_after": [load_before[0], load_after[0]],
        "corpus": {
            "texts": len(corpus),
            "sentences_per_text": "1-3",
            "tokens_mean": statistics.mean(token_counts),
            "tokens_median": statistics.median(token_counts),
            "tokens_max": token_counts[-1],
        },
        "cold_load": cold,
        "throughput": rows,
        "single_query": single,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    print(f"model {emb.name} (dim {emb.dim}), {threads} intra-op thread(s), {os.cpu_count()} CPU(s)")
    print(
        f"corpus: {len(corpus)} lessons of 1-3 sentences, tokens mean {result['corpus']['tokens_mean']:.1f}"
        f" / max {token_counts[-1]}; median of {args.runs} runs"
    )
    busy = max(load_before[0], load_after[0])
    print(f"load average (1 min) before/after: {load_before[0]:.2f} / {load_after[0]:.2f}", end="")
    print("  <- machine busy, figures are pessimistic" if busy > 0.5 * (os.cpu_count() or 1) else "")
    print()
    print("cold load (fresh process)       seconds")
    print(f"  import cairn.search.embed     {cold['import_s']:.3f}")
    print(f"  get_embedder()                {cold['load_s']:.3f}")
    print(f"  first embed (1 text)          {cold['first_embed_s']:.3f}")
    print(f"  total                         {cold['total_s']:.3f}")
    print()
    print("batch size   texts/s   ms/text   texts/CPU-s")
    for r in rows:
        print(
            f"{r['batch_size']:>10}   {r['texts_per_s']:7.1f}   {1000 / r['texts_per_s']:7.2f}"
            f"   {r['texts_per_cpu_s']:11.1f}"
        )
    print(f"{'1 per call':>10}   {single['texts_per_s']:7.1f}   {1000 / single['texts_per_s']:7.2f}", end="")
    print(f"   (p50 {single['p50_ms']:.2f} ms, p95 {single['p95_ms']:.2f} ms)")
    print()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
