"""Benchmark embedding: the model alone, and the embedding drain (model + vector writes) on both databases.

    .venv/bin/python bench/embed_bench.py                      # ~3-4 minutes on 2 quiet cores
    .venv/bin/python bench/embed_bench.py --quick              # fewer lessons and runs, ~1 minute
    .venv/bin/python bench/embed_bench.py --only sqlite --runs 5 --lessons 2000   # ad hoc
    .venv/bin/python bench/embed_bench.py --import-lessons 60000 --only sqlite    # + `cairn import` until searchable
    .venv/bin/python bench/embed_bench.py --quick --no-drain --model all-MiniLM-L6-v2-int8   # float32, to compare

Sections (every figure is the median of ``--runs`` runs):

* **cold load**: in fresh subprocesses, ``import cairn.search.embed``, ``get_embedder()`` (onnxruntime
  import, model hash check, session build, tokenizer) and the first ``embed``;
* **model**: ``Embedder.embed`` of ``--lessons`` realistic lessons (``context_gen.Generator``'s mix, the
  text the drain embeds: ``service.embeddings.embed_text``, 40-600 characters) at batch sizes 4, 16, 32
  and 64, as every caller gets it (``CAIRN_EMBED_THREADS`` batches at once on the shared session, default
  two on two cores); lessons per second of wall time and per CPU-second of the whole process (the second
  moves less with machine load); plus one short query per call (the search path, one run);
* **drain**: ``Cairn.drain_embeddings`` of a freshly imported store of ``--lessons`` lessons (a new
  SQLite file / a new Postgres database per run), with the model replaced by the lessons' pooled
  vectors (``db only``: the vector writes alone -- vec0 / pgvector row with its HNSW insert, float
  vector, signature, queue) and with the real model (``full``: what an import waits for). Postgres is
  the throwaway server of ``tests/pg_server.py`` (``--only sqlite`` skips it);
* **import until searchable** (``--import-lessons N``, off by default): ``cairn import FILE`` of N
  generated plain records in a fresh ``CAIRN_HOME`` through the CLI (no daemon), then a
  ``cairn search --mode vector``: the seconds until the store answers by meaning (the import embeds its
  queue before it returns; the search, which embeds only a slice, must find nothing still queued), and
  the import's CPU-seconds.

The machine's load average is read before and after: other processes on its 2 cores slow every
figure, so a busy run says so. Prints a table, writes ``bench/out/embed.json`` (``--quick``:
``embed-quick.json``) and compares with the previous run's JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.pg_server (first: a dependency, confusables, installs a top-level "tests")
import cairn  # noqa: E402,F401  (first: the bench modules below put ROOT/src on sys.path)

sys.path.insert(0, str(ROOT / "bench"))
import backends_bench  # noqa: E402
import context_gen  # noqa: E402

OUT = ROOT / "bench" / "out" / "embed.json"
OUT_QUICK = ROOT / "bench" / "out" / "embed-quick.json"
BATCH_SIZES = (4, 16, 32, 64)
QUERIES = [
    "ModuleNotFoundError: No module named 'yaml'",
    "how do I stop readers blocking while the database is written",
    "docker image built on a mac crashes on the server",
    "retry 429 responses",
    "which timezone for audit timestamps",
    "the CI cache key",
    "pytest stops at the first failure",
    "alembic autogenerate misses server defaults",
]


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------- cold load

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


def cold_load(runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        res = subprocess.run([sys.executable, "-c", _COLD_PROBE], capture_output=True, text=True, check=True)
        samples.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return {k: round(statistics.median(s[k] for s in samples), 4) for k in samples[0]}


# ----------------------------------------------------------------------------------------------- model


def model_throughput(emb: Any, texts: list[str], batch_size: int, runs: int) -> dict[str, float]:
    emb.embed(texts[: 2 * batch_size], batch_size=batch_size)  # warm-up
    wall, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        emb.embed(texts, batch_size=batch_size)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return {
        "batch_size": batch_size,
        "per_s": round(len(texts) / statistics.median(wall), 1),
        "per_cpu_s": round(len(texts) / statistics.median(cpu), 1),
    }


def query_latency(emb: Any, runs: int) -> dict[str, float]:
    lat = []
    for _ in range(runs):
        for q in QUERIES:
            t = time.perf_counter()
            emb.embed([q])
            lat.append(time.perf_counter() - t)
    lat.sort()
    return {
        "p50_ms": round(1000 * statistics.median(lat), 2),
        "p95_ms": round(1000 * lat[int(0.95 * (len(lat) - 1))], 2),
    }


# ----------------------------------------------------------------------------------------------- drain


def drain_once(url: str, plain: list[dict[str, Any]], by_value: dict[str, Any] | None) -> float:
    """Import ``plain`` into the fresh store at ``url`` (untimed), then time one drain of its whole queue.

    ``by_value``: answer the drain with these pooled vectors instead of the model (the DB side alone).
    """
    svc, p = backends_bench.open_service(url)
    try:
        svc.drain_embeddings(p)  # nothing queued yet: records the model, as a first search does
        svc.import_lines(p, [json.dumps(r, ensure_ascii=False) for r in plain])
        if by_value is None:
            t = time.perf_counter()
            done = svc.drain_embeddings(p)
        else:
            with context_gen.stand_in_model(by_value):
                t = time.perf_counter()
                done = svc.drain_embeddings(p)
        seconds = time.perf_counter() - t
        if done != len(plain):
            raise SystemExit(f"the drain wrote {done} vectors for {len(plain)} lessons")
        return seconds
    finally:
        svc.store.dispose()


def drain_section(
    db: str, plain: list[dict[str, Any]], by_value: dict[str, Any], runs: int, work: Path, model: bool
) -> dict[str, Any]:
    server = None
    if db == "postgres":
        from tests.pg_server import start_throwaway_postgres

        server = start_throwaway_postgres(work / "pg")
    counter = iter(range(10_000))

    def fresh_url() -> str:
        n = next(counter)
        if server is not None:
            return server.create_database(f"cairn_embed_{n}")
        d = work / f"sqlite-{n}"
        d.mkdir(parents=True)
        return f"sqlite:///{d}/cairn.db"

    try:
        out: dict[str, Any] = {}
        for label, vectors in (("db_only", by_value), ("full", None))[: 2 if model else 1]:
            secs = [drain_once(fresh_url(), plain, vectors) for _ in range(runs)]
            med = statistics.median(secs)
            out[label] = {"per_s": round(len(plain) / med, 1), "seconds": round(med, 2)}
            say(f"{db} drain {label}: {out[label]['per_s']} lessons/s")
        if server is not None:
            out["postgres"] = server.server_version
            out["pgvector"] = server.vector_version
        return out
    finally:
        if server is not None:
            server.stop()


# ------------------------------------------------------------------------------ import until searchable


def import_until_searchable(n: int, work: Path) -> dict[str, Any]:
    """``cairn import`` of ``n`` generated records through the CLI in a fresh home, then a vector
    search: the seconds until the store answers by meaning."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / "import.jsonl"
    written = 0
    with path.open("w", encoding="utf-8") as fh:
        for plain, _ in backends_bench.lesson_chunks(n):
            for rec in plain:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                written += 1
    env = {**os.environ, "CAIRN_HOME": str(work / "home"), "CAIRN_NO_DAEMON": "1"}
    cli = [sys.executable, "-m", "cairn.cli.main"]
    t = time.perf_counter()
    cpu = _children_cpu()
    res = subprocess.run([*cli, "--json", "import", str(path)], capture_output=True, text=True, env=env, check=False)
    import_s = time.perf_counter() - t
    import_cpu = _children_cpu() - cpu
    if res.returncode != 0:
        raise SystemExit(f"cairn import failed: {res.stderr[-2000:]}")
    t2 = time.perf_counter()
    res = subprocess.run(
        [*cli, "--json", "search", "retry the flaky deploy", "--mode", "vector"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    search_s = time.perf_counter() - t2
    if res.returncode != 0:
        raise SystemExit(f"cairn search failed: {res.stderr[-2000:]}")
    answer = json.loads(res.stdout)
    data = answer.get("data", answer)
    if data.get("pending_embeddings"):
        raise SystemExit(f"{data['pending_embeddings']} lessons still queued after the import: not searchable")
    return {
        "lessons": written,
        "import_s": round(import_s, 1),
        "import_cpu_s": round(import_cpu, 1),
        "first_vector_search_s": round(search_s, 1),
        "searchable_s": round(import_s + search_s, 1),
        "results": len(data.get("results", [])),
    }


def _children_cpu() -> float:
    """CPU-seconds (user + system) of this process's waited-for children: the import's own cost, which
    moves less with the machine's load than its wall time."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# ---------------------------------------------------------------------------------------------- report


def delta(new: float | None, old: float | None, higher_is_better: bool = True) -> str:
    if not new or not old:
        return ""
    change = (new - old) / old * 100
    if abs(change) < 5:
        return f"{change:+.0f}%"
    better = change > 0 if higher_is_better else change < 0
    return f"{change:+.0f}% {'better' if better else 'WORSE'}"


def dig(d: Any, *path: Any) -> Any:
    for key in path:
        try:
            d = d[key]
        except (KeyError, IndexError, TypeError):
            return None
    return d


def report(r: dict[str, Any], prev: dict[str, Any] | None) -> str:
    env = r["env"]
    lines = [
        f"model {env['model']} (dim {env['dim']}), {env['threads']} embedding thread(s), "
        f"{env['cpu_count']} CPU(s); {r['lessons']} lessons, tokens mean {r['tokens']['mean']} / max "
        f"{r['tokens']['max']}; median of {r['runs']} runs; commit {env['commit']}"
    ]
    la, lb = env["loadavg_1m_before_after"]
    busy = max(la, lb) > 0.5 * (env["cpu_count"] or 1)
    lines.append(f"load average (1 min) before/after: {la:.2f} / {lb:.2f}" + ("  <- BUSY: pessimistic" if busy else ""))
    lines.append("")
    rows: list[tuple[str, str, str]] = []
    c = r["cold_load"]
    if c:
        figure = f"{c['load_s'] + c['first_embed_s']:.3f} s"
        rows.append(
            ("cold get_embedder() + first embed", figure, delta(c["load_s"], dig(prev, "cold_load", "load_s"), False))
        )
    for i, m in enumerate(r["model"]):
        old = dig(prev, "model", i)
        old = old if old and old.get("batch_size") == m["batch_size"] else None
        figure = f"{m['per_s']:.0f} lessons/s ({m['per_cpu_s']:.0f}/CPU-s)"
        rows.append((f"model alone, batch {m['batch_size']}", figure, delta(m["per_s"], dig(old, "per_s"))))
    q = r["query"]
    if q:
        figure = f"p50 {q['p50_ms']} ms, p95 {q['p95_ms']} ms"
        rows.append(
            ("one query per call (search path)", figure, delta(q["p50_ms"], dig(prev, "query", "p50_ms"), False))
        )
    for db, d in r["drain"].items():
        for label, name in (("db_only", "vector writes alone"), ("full", "model + writes")):
            if label in d:
                figure = f"{d[label]['per_s']:.0f} lessons/s"
                rows.append(
                    (f"drain {db}: {name}", figure, delta(d[label]["per_s"], dig(prev, "drain", db, label, "per_s")))
                )
    im = r.get("import")
    if im:
        figure = (
            f"{im['searchable_s']} s (import {im['import_s']} s, {im.get('import_cpu_s', '?')} CPU-s; "
            f"first vector search {im['first_vector_search_s']} s)"
        )
        rows.append(
            (
                f"cairn import {im['lessons']:,}, until searchable",
                figure,
                delta(im["searchable_s"], dig(prev, "import", "searchable_s"), False),
            )
        )
    width = max(len(a) for a, _, _ in rows)
    vwidth = max(len(b) for _, b, _ in rows)
    lines.append(f"{'what':<{width}}  {'figure':<{vwidth}}  vs previous")
    lines += [f"{a:<{width}}  {b:<{vwidth}}  {c}" for a, b, c in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=None, help="runs per figure, median reported (default 3; quick 1)")
    ap.add_argument("--lessons", type=int, default=None, help="lessons per model / drain run (default 1000; quick 300)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=("sqlite", "postgres"), default=None, help="drain on one database only")
    ap.add_argument("--no-drain", action="store_true", help="model figures only")
    ap.add_argument("--no-model", action="store_true", help="vector writes alone: no cold load, no real model")
    ap.add_argument(
        "--import-lessons", type=int, default=0, help="also time `cairn import` of N lessons until searchable"
    )
    ap.add_argument("--threads", type=int, default=None, help="set CAIRN_EMBED_THREADS")
    ap.add_argument("--model", default=None, help="set CAIRN_EMBED_MODEL (e.g. all-MiniLM-L6-v2-int8, float32)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    runs = args.runs or (1 if args.quick else 3)
    n = args.lessons or (300 if args.quick else 1000)
    out = args.out or (OUT_QUICK if args.quick else OUT)

    backends_bench.clean_env()
    if args.threads is not None:
        os.environ["CAIRN_EMBED_THREADS"] = str(args.threads)
    if args.model is not None:
        os.environ["CAIRN_EMBED_MODEL"] = args.model
    import cairn.search.embed as E
    from cairn.service.embeddings import embed_text as _embed_text

    load_before = os.getloadavg()[0]
    cold: dict[str, float] = {}
    if not args.no_model:
        say("cold load")
        cold = cold_load(max(runs, 3))
    emb = E.get_embedder()
    plain, by_value = next(backends_bench.lesson_chunks(n))
    texts = [_embed_text({"key": r["key"], "value": r["value"]}) for r in plain]
    tokens = sorted(len(e.ids) for e in emb._tokenizer.encode_batch(texts))  # type: ignore[attr-defined]
    model = []
    for bs in () if args.no_model else BATCH_SIZES:
        model.append(model_throughput(emb, texts, bs, runs))
        say(f"model batch {bs}: {model[-1]['per_s']} lessons/s")
    query = {} if args.no_model else query_latency(emb, runs)
    drain: dict[str, Any] = {}
    imported = None
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="cairn-embed-bench-", dir=shm) as tmp:
        if not args.no_drain:
            for db in ("sqlite", "postgres"):
                if args.only in (None, db):
                    drain[db] = drain_section(db, plain, by_value, runs, Path(tmp) / db, not args.no_model)
        if args.import_lessons:
            say(f"cairn import of {args.import_lessons:,} lessons until searchable")
            imported = import_until_searchable(args.import_lessons, Path(tmp) / "import")
    load_after = os.getloadavg()[0]

    result = {
        "lessons": n,
        "runs": runs,
        "tokens": {"mean": round(statistics.mean(tokens), 1), "median": statistics.median(tokens), "max": tokens[-1]},
        "env": {
            "model": emb.name,
            "dim": emb.dim,
            "threads": E._threads(),
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "commit": backends_bench.environment().get("commit"),
            "loadavg_1m_before_after": [round(load_before, 2), round(load_after, 2)],
        },
        "cold_load": cold,
        "model": model,
        "query": query,
        "drain": drain,
        "import": imported,
    }
    prev = json.loads(out.read_text(encoding="utf-8")) if out.exists() else None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(report(result, prev))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
