"""Benchmark SQLite against Postgres at one store size: load, writes, reads and search, in one run.

    .venv/bin/python bench/backends_bench.py                 # 100,000 lessons, ~17 min on 2 cores
    .venv/bin/python bench/backends_bench.py --quick         # 5,000 lessons, ~1-2 min
    .venv/bin/python bench/backends_bench.py --size 20000 --only postgres --out /tmp/b.json   # ad hoc

For each database (SQLite: a file in a temporary directory; Postgres: a throwaway server started with
``tests/pg_server.py``, PostgreSQL with pgvector), on a store of ``--size`` lessons of one tenant:

* **load**: generated lessons imported with ``Cairn.import_lines`` (plain JSONL records, the path of
  ``cairn import``; 10,000 records per call, the import commits every 500) -- the import rate; then a
  vector per lesson through ``context_gen.bulk_drain`` under ``context_gen.stand_in_model`` (pooled real
  embeddings, see below) -- the vector load rate. On Postgres the HNSW index is dropped for the load and
  built once after it (pgvector's bulk path; one insert at a time runs at ~200/s here), then
  ``VACUUM (ANALYZE)``, what autovacuum does to a table that just grew (both timed, as the database
  owner on a plain connection; SQLite gets no ``ANALYZE``: the service never runs it);
* **read**: ``Cairn.read`` of 200 existing addresses, p50 / p95;
* **search**: ``Cairn.search`` in ``fts``, ``vector`` and ``hybrid`` mode over 110 queries (the 50 of
  ``search_bench.queries()``: questions, error texts, identifiers, keywords, 5 with a ladder or tag
  filter; and the 60 questions of ``evals/data/queries.jsonl``), warm model, p50 / p95 / mean, and
  queries per second per core (one thread: qps = 1 / mean latency);
* **write**: audited ``Cairn.write`` of distinct new lessons on top of the store (2,000 or 60 s) and
  edits, new content at existing addresses (1,000 or 30 s), one transaction each (lesson, version,
  tags, indexes, embed queue, tombstone check, hash-chained audit row): rate, p50 / p95;
* **drain**: ``Cairn.drain_embeddings`` of the lessons those writes queued, the model replaced by pooled
  vectors: what a steady write costs the vector index (on Postgres, the incremental HNSW insert);
* **audit verify**: ``Cairn.audit_verify`` of the whole chain after the writes (must pass).

Search runs before the writes: a write queues its lesson for embedding, and the next vector search
would first embed the queue with the real model.

The lessons are ``context_gen.Generator``'s (the context bench's mix: 43 scopes, bot-loop notes,
near-duplicates, 40-600 characters, every value distinct), each imported as a plain record: its last
version's value, tags, kind and source agent (no histories, all active). Vectors are the context
bench's shortcut: the ~3,900 base texts embedded once with the real model (``context_gen.pool_vectors``,
cached), each lesson its base text's vector plus gaussian noise; ``bulk_drain`` writes what
``drain_embeddings`` writes (vector index row, float vector, signature), one transaction per 10,000.
Queries are embedded by the real model.

Both databases run on tmpfs (/dev/shm): neither pays for an fsync, and the throwaway Postgres runs with
``fsync=off, synchronous_commit=off`` anyway (SQLite runs WAL with ``synchronous=NORMAL``: no fsync per
commit either). The figures are the CPU cost of Cairn's code paths on each database, not of durable
commits; a production Postgres adds a WAL flush (~0.1-2 ms on SSD) to every write.

The SQLite store is cached in ``bench/out/backends-stores/`` (keyed by size, generator and schema; the
load figures are kept from its build) and copied to tmpfs for each run, since the write section changes
it. The Postgres store is rebuilt on every run (the throwaway server removes its files when it stops),
so its load figures are measured every time. ``--rebuild`` rebuilds the SQLite cache too.

Prints a table (database x operation: rate, p50, p95, change against the previous run's JSON), writes
``bench/out/backends.json`` (``--quick``: ``backends-quick.json``, so quick runs compare with quick runs;
environment: commit of the code that ran, load average at start and end,
CPUs, SQLite / sqlite-vec / PostgreSQL / pgvector / psycopg versions).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.pg_server (first: confusables installs a top-level "tests" package)
# cairn first: context_gen and search_bench put ROOT/src at the front of sys.path when imported, and a
# package already imported stays where it was found (PYTHONPATH=<worktree>/src runs that copy).
import cairn  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
import context_gen  # noqa: E402
import search_bench  # noqa: E402
import store_bench  # noqa: E402
from store_bench import delta, dig, pct, timed_loop  # noqa: E402

OUT = ROOT / "bench" / "out" / "backends.json"
OUT_QUICK = ROOT / "bench" / "out" / "backends-quick.json"  # a quick run compares with the last quick run
CACHE = ROOT / "bench" / "out" / "backends-stores"
GENERATOR_VERSION = 1  # of this file's record conversion; context_gen.GENERATOR_VERSION is keyed too
CHUNK = 10_000
DATABASES = ("sqlite", "postgres")
MODES = ("fts", "vector", "hybrid")
FULL = {"size": 100_000, "reads": 200, "create_n": 2000, "create_cap_s": 60, "edit_n": 1000, "edit_cap_s": 30}
QUICK = {"size": 5_000, "reads": 100, "create_n": 300, "create_cap_s": 10, "edit_n": 200, "edit_cap_s": 6}


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def clean_env() -> None:
    for name in ("CAIRN_EMBED_MODEL", "CAIRN_FAKE_NOW", "CAIRN_SESSION", "CAIRN_ACTOR", "CAIRN_DEBUG"):
        os.environ.pop(name, None)


def summary(seconds: list[float]) -> dict[str, Any]:
    mean = statistics.fmean(seconds)
    return {
        "n": len(seconds),
        "p50_ms": round(statistics.median(seconds) * 1000, 2),
        "p95_ms": round(pct(seconds, 0.95) * 1000, 2),
        "mean_ms": round(mean * 1000, 2),
        "qps_per_core": round(1 / mean, 1) if mean else None,
    }


# ------------------------------------------------------------------------------------------------ lessons


def lesson_chunks(size: int) -> Iterator[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """(plain records, value -> vector) per chunk of ``CHUNK``; deterministic for a given day.

    A record whose content (``content_hash``) is already in its scope is left out: the import would
    count it as the same lesson again (``unchanged``), not create one (the generator's near-duplicates
    sometimes differ only in punctuation, which content identity ignores).
    """
    import numpy as np

    from cairn.core.content import content_hash
    from cairn.core.timeparse import utcnow
    from cairn.search.embed import DIM

    pool = context_gen.text_pool()
    vecs = context_gen.pool_vectors(pool)
    gen = context_gen.Generator(pool, utcnow())
    nprng = np.random.default_rng(context_gen.GENERATOR_VERSION)
    seen: set[tuple[str, str]] = set()
    done = 0
    while done < size:
        want = min(CHUNK, size - done)
        n = want + want // 10 + 10  # a margin for the records left out
        recs, _extra, origins = gen.chunk(n)  # tombstones and links are not plain records: left out
        # The vectors exactly as context_gen.build_store makes them: base + noise, a near-duplicate
        # around its original's.
        chunk_vecs = np.empty((n, DIM), dtype="<f4")
        noise = nprng.standard_normal((n, DIM)).astype("<f4")
        for j, (base, dup_of) in enumerate(origins):
            if dup_of >= 0:
                v = chunk_vecs[dup_of] + context_gen.DUP_NOISE * noise[j]
            else:
                v = vecs[base] + context_gen.NOISE * noise[j]
            chunk_vecs[j] = v / np.linalg.norm(v)
        plain, by_value = [], {}
        for j, rec in enumerate(recs):
            last = rec["versions"][-1]
            ident = (rec["scope"], content_hash(last["value"]))
            if ident in seen:
                continue
            seen.add(ident)
            row = {"scope": rec["scope"], "key": rec["key"], "value": last["value"], "tags": last["tags"]}
            row["kind"] = last["kind"]
            if last.get("source_agent"):
                row["source_agent"] = last["source_agent"]
            plain.append(row)
            by_value[last["value"].rstrip()] = chunk_vecs[j]
            if len(plain) == want:
                break
        if len(plain) < want:
            raise SystemExit(f"the generator gave {len(plain)} distinct lessons of {want}")
        done += want
        yield plain, by_value


def open_service(url: str) -> tuple[Any, Any]:
    from cairn.runtime.local import local_principal
    from cairn.runtime.settings import Settings
    from cairn.service.api import Cairn
    from cairn.store.engine import Store

    store = Store(url)
    store.upgrade()  # explicit on every database (Postgres no longer migrates on first use)
    svc = Cairn(store, Settings())
    p = local_principal()
    svc.ensure_tenant(p)
    return svc, p


def load_store(svc: Any, p: Any, size: int) -> dict[str, Any]:
    """Import ``size`` lessons and their vectors; returns the load figures and the addresses."""
    svc.drain_embeddings(p)  # nothing queued: records the model in embed_state, as a first search does
    t_gen = t_import = t_vec = 0.0
    created = vectors = 0
    addresses: list[tuple[str, str]] = []
    started = time.perf_counter()
    t0 = time.perf_counter()
    for plain, by_value in lesson_chunks(size):
        t1 = time.perf_counter()
        t_gen += t1 - t0
        result = svc.import_lines(p, [json.dumps(r, ensure_ascii=False) for r in plain])
        t2 = time.perf_counter()
        if result["refused"] or result["created"] != len(plain):
            raise SystemExit(f"import did not create every lesson: {json.dumps(result, default=str)[:2000]}")
        created += result["created"]
        with context_gen.stand_in_model(by_value):
            vectors += context_gen.bulk_drain(svc, p, by_value)
        t0 = time.perf_counter()
        t_import += t2 - t1
        t_vec += t0 - t2
        addresses.extend((r["scope"], r["key"]) for r in plain)
        el = time.perf_counter() - started
        say(
            f"  {created:,}/{size:,} lessons: import {created / t_import:,.0f}/s, vectors {vectors / t_vec:,.0f}/s "
            f"(generate {t_gen:.0f} s, import {t_import:.0f} s, vectors {t_vec:.0f} s; "
            f"~{(size - created) / (created / el) / 60:.1f} min left)"
        )
    if vectors != created:
        raise SystemExit(f"{created} lessons but {vectors} vectors written")
    return {
        "lessons": created,
        "generate_seconds": round(t_gen, 1),
        "import_seconds": round(t_import, 1),
        "import_per_s": round(created / t_import, 1),
        "vectors": vectors,
        "vector_seconds": round(t_vec, 1),
        "vector_per_s": round(vectors / t_vec, 1),
        "vector_total_per_s": round(vectors / t_vec, 1),  # Postgres: the HNSW build added below
        "addresses": addresses,
    }


# ------------------------------------------------------------------------------------------------ measures


def eval_questions() -> list[str]:
    lines = (ROOT / "evals" / "data" / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [q["text"] for q in map(json.loads, filter(str.strip, lines)) if q["type"] == "question"]


def all_queries() -> list[tuple[str, dict[str, Any]]]:
    return search_bench.queries() + [(q, {}) for q in eval_questions()]


def measure(svc: Any, p: Any, addresses: list[tuple[str, str]], sizes: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {}
    rng = random.Random(5)
    sample = rng.sample(addresses, min(sizes["reads"], len(addresses)))

    # read
    for scope, key in sample[:5]:
        svc.read(p, scope, key)
    times = []
    for scope, key in sample:
        t0 = time.perf_counter()
        svc.read(p, scope, key)
        times.append(time.perf_counter() - t0)
    out["read"] = summary(times)
    say(f"  read p50 {out['read']['p50_ms']} ms")

    # search (before any write: a write queues an embedding that the next vector search would make)
    qs = all_queries()
    hits: dict[str, int] = {}
    for mode in MODES:
        for q, opts in qs[:3]:  # warm: model loaded, caches filled
            svc.search(p, q, mode=mode, **opts)
        times, empty = [], 0
        for q, opts in qs:
            t0 = time.perf_counter()
            res = svc.search(p, q, mode=mode, **opts)
            times.append(time.perf_counter() - t0)
            empty += not res["results"]
        out[f"search_{mode}"] = summary(times)
        hits[mode] = len(qs) - empty
        say(f"  search {mode}: p50 {out[f'search_{mode}']['p50_ms']} ms ({len(qs) - empty}/{len(qs)} with results)")
    out["search_answered"] = {m: f"{hits[m]}/{len(qs)}" for m in MODES}

    # writes: new lessons, then edits of existing ones
    records = store_bench.make_records(sizes["create_n"], seed=23)
    actions: dict[str, int] = {}
    written: list[str] = []

    def create(i: int) -> None:
        r = records[i]
        res = svc.write(p, r["scope"], r["key"], r["value"], tags=r["tags"], kind=r["kind"])
        actions[res["action"]] = actions.get(res["action"], 0) + 1
        written.append(r["value"])

    out["write_create"] = timed_loop(create, sizes["create_n"], sizes["create_cap_s"])
    out["write_create"]["actions"] = actions
    say(f"  create: {out['write_create']['per_sec']}/s, p50 {out['write_create']['median_ms']} ms")
    targets = rng.sample(addresses, min(sizes["edit_n"], len(addresses)))
    edit_actions: dict[str, int] = {}

    def edit(i: int) -> None:
        scope, key = targets[i % len(targets)]
        value = f"Revised in bench run {i}: the earlier note was incomplete; see runbook step {i % 17}."
        res = svc.write(p, scope, key, value)
        edit_actions[res["action"]] = edit_actions.get(res["action"], 0) + 1
        written.append(value)

    out["write_edit"] = timed_loop(edit, sizes["edit_n"], sizes["edit_cap_s"])
    out["write_edit"]["actions"] = edit_actions
    say(f"  edit: {out['write_edit']['per_sec']}/s, p50 {out['write_edit']['median_ms']} ms")

    # The queue those writes left: the service's own drain_embeddings, the model replaced by pooled
    # vectors (the real model would add ~1/70 s per lesson here): the index cost of a steady write.
    pool_vecs = context_gen.pool_vectors(context_gen.text_pool())
    noise = np.random.default_rng(7).standard_normal((len(written), pool_vecs.shape[1])).astype("<f4")
    by_value = {}
    for j, value in enumerate(written):
        v = pool_vecs[j % len(pool_vecs)] + context_gen.NOISE * noise[j]
        by_value[value.rstrip()] = v / np.linalg.norm(v)
    t0 = time.perf_counter()
    with context_gen.stand_in_model(by_value):
        drained = svc.drain_embeddings(p)
    took = time.perf_counter() - t0
    out["drain"] = {
        "vectors": drained,
        "seconds": round(took, 2),
        "per_sec": round(drained / took, 1) if took else None,
    }
    say(f"  drain after the writes: {drained:,} vectors at {out['drain']['per_sec']}/s (model excluded)")

    t0 = time.perf_counter()
    verify = svc.audit_verify(p)
    out["audit_verify"] = {
        "ok": verify["ok"],
        "rows": verify.get("checked"),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    if not verify["ok"]:
        say(f"  AUDIT CHAIN BROKEN: {json.dumps(verify, default=str)[:500]}")
    else:
        say(f"  audit verify: {verify.get('checked'):,} rows in {out['audit_verify']['seconds']} s")
    return out


# ------------------------------------------------------------------------------------------------ databases


def cache_key(size: int) -> str:
    """The SQLite cache holds while what it holds stays the same: sizes, generators, schema, model."""
    from cairn.search.embed import MODEL_NAME
    from cairn.store.migrations import HEAD

    h = hashlib.sha256(f"{GENERATOR_VERSION}:{context_gen.GENERATOR_VERSION}:{HEAD}:{MODEL_NAME}".encode())
    src = Path(cairn.__file__).parent
    for f in [*sorted((src / "store" / "migrations" / "versions").glob("*.py")), src / "store" / "schema.py"]:
        h.update(f.read_bytes())
    return f"sqlite-{size}-{h.hexdigest()[:12]}"


def sqlite_store(size: int, rebuild: bool) -> tuple[Path, dict[str, Any]]:
    """The cached SQLite store of ``size`` lessons (built on a miss); returns its file and build figures."""
    import pysqlite3.dbapi2 as sqlite3

    from cairn.store.engine import sqlite_url

    home = CACHE / cache_key(size)
    meta_file = home / "meta.json"
    if CACHE.exists():
        for stale in CACHE.glob(f"sqlite-{size}-*"):
            if stale != home or rebuild:
                say(f"dropping store cache {stale.name}")
                shutil.rmtree(stale)
    if meta_file.exists():
        meta = json.loads(meta_file.read_text())
        say(f"sqlite: cached store of {size:,} lessons ({home.relative_to(ROOT)})")
        return home / "cairn.db", {**meta, "cached": True}
    home.mkdir(parents=True)
    say(f"sqlite: building the store of {size:,} lessons in {home.relative_to(ROOT)}")
    svc, p = open_service(sqlite_url(home))
    load = load_store(svc, p, size)
    svc.store.dispose()
    con = sqlite3.connect(str(home / "cairn.db"))
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file alone is the whole store
    finally:
        con.close()
    (home / "addresses.json").write_text(json.dumps(load.pop("addresses")))
    meta = {**load, "built_at": datetime.now(UTC).isoformat(timespec="seconds"), "cache_key": home.name}
    meta_file.write_text(json.dumps(meta, indent=1) + "\n")
    return home / "cairn.db", {**meta, "cached": False}


def run_sqlite(size: int, sizes: dict[str, Any], rebuild: bool, work: Path) -> dict[str, Any]:
    from cairn.store.engine import sqlite_url

    db, build = sqlite_store(size, rebuild)
    addresses = [tuple(a) for a in json.loads((db.parent / "addresses.json").read_text())]
    home = work / "sqlite"
    home.mkdir()
    t0 = time.perf_counter()
    shutil.copyfile(db, home / "cairn.db")
    say(
        f"sqlite: copied the store to {home} "
        f"({(home / 'cairn.db').stat().st_size / 1e6:,.0f} MB, {time.perf_counter() - t0:.1f} s)"
    )
    svc, p = open_service(sqlite_url(home))
    result: dict[str, Any] = {"load": build, "db_mb": round((home / "cairn.db").stat().st_size / 1e6, 1)}
    result.update(measure(svc, p, addresses, sizes))
    svc.store.dispose()
    return result


def owner_sql(dsn: str, statements: list[str]) -> list[Any]:
    """Run maintenance as the database owner on a plain connection, outside the store's transactions.

    Requests run as the application role (row-level security; it owns no table), so index DDL and
    VACUUM go through their own autocommit connection; the last statement's rows are returned.
    """
    import psycopg

    rows: list[Any] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for sql in statements:
            cur = conn.execute(sql)
            rows = cur.fetchall() if cur.description else []
    return rows


def drop_hnsw(svc: Any, p: Any, dsn: str) -> list[str]:
    """Create the model's vector table as the service would, and drop its HNSW index for the load.

    pgvector inserts into an HNSW graph one vector at a time at ~200/s here (384 dimensions, one core),
    ~8 minutes for 100,000; building the index once over the loaded table is the bulk path pgvector
    recommends. Returns the ``CREATE INDEX`` statements to run after the load (the service's own
    definitions, read back from ``pg_indexes``). Later writes go through the rebuilt index as usual.
    """
    from cairn.search.embed import DIM, MODEL_NAME
    from cairn.store import search_index as ix

    table = context_gen.write_tx(svc, lambda conn: ix.vec_ensure(conn, MODEL_NAME, DIM), p.tenant_id)
    rows = owner_sql(
        dsn,
        [f"SELECT indexname, indexdef FROM pg_indexes WHERE tablename = '{table}' AND indexdef ILIKE '%USING hnsw%'"],
    )
    if rows:
        owner_sql(dsn, [f'DROP INDEX "{name}"' for name, _ in rows])
    return [d for _, d in rows]


def run_postgres(size: int, sizes: dict[str, Any], work: Path, env: dict[str, Any]) -> dict[str, Any]:

    from tests.pg_server import start_throwaway_postgres

    t0 = time.perf_counter()
    server = start_throwaway_postgres(work / "pg")
    try:
        env["postgres"] = server.server_version
        env["pgvector"] = server.vector_version
        url = server.create_database("cairn_bench")
        say(
            f"postgres: {server.server_version}, pgvector {server.vector_version}, "
            f"started in {time.perf_counter() - t0:.1f} s"
        )
        svc, p = open_service(url)
        dsn = server.url_for("cairn_bench", driver=False)  # the owner, as `cairn db upgrade` runs
        settings = owner_sql(
            dsn,
            [
                "SELECT name, setting FROM pg_settings WHERE name IN ('shared_buffers', 'work_mem', "
                "'fsync', 'synchronous_commit', 'maintenance_work_mem', 'effective_cache_size')"
            ],
        )
        env["postgres_settings"] = dict(settings)
        say(f"postgres: loading {size:,} lessons")
        t1 = time.perf_counter()
        hnsw = drop_hnsw(svc, p, dsn)
        load = load_store(svc, p, size)
        addresses = load.pop("addresses")
        t2 = time.perf_counter()
        # maintenance_work_mem: the whole graph in memory, no spill to disk while building.
        owner_sql(dsn, ["SET maintenance_work_mem = '1GB'", *hnsw])
        t3 = time.perf_counter()
        load["hnsw_build_seconds"] = round(t3 - t2, 1)
        load["vector_total_per_s"] = round(load["vectors"] / (load["vector_seconds"] + t3 - t2), 1)
        say(f"postgres: HNSW index built over {load['vectors']:,} vectors in {t3 - t2:.1f} s")
        owner_sql(dsn, ["VACUUM (ANALYZE)"])
        load["vacuum_analyze_seconds"] = round(time.perf_counter() - t3, 1)
        load["total_seconds"] = round(time.perf_counter() - t1, 1)
        say(f"postgres: loaded in {load['total_seconds']} s (VACUUM ANALYZE {load['vacuum_analyze_seconds']} s)")
        db_mb = owner_sql(dsn, ["SELECT pg_database_size(current_database())"])[0][0]
        result: dict[str, Any] = {"load": load, "db_mb": round(db_mb / 1e6, 1)}
        result.update(measure(svc, p, addresses, sizes))
        svc.store.dispose()
        return result
    finally:
        server.stop()


# ------------------------------------------------------------------------------------------------ report

# (label, key in a database's metrics, rate path, p50 path, p95 path, unit of the rate)
ROWS = [
    ("import (plain records)", ("load", "import_per_s"), None, None, "lessons/s"),
    ("vector load incl. index", ("load", "vector_total_per_s"), None, None, "vectors/s"),
    (
        "write: new lesson",
        ("write_create", "per_sec"),
        ("write_create", "median_ms"),
        ("write_create", "p95_ms"),
        "writes/s",
    ),
    (
        "write: edit (new version)",
        ("write_edit", "per_sec"),
        ("write_edit", "median_ms"),
        ("write_edit", "p95_ms"),
        "writes/s",
    ),
    ("embed drain after writes", ("drain", "per_sec"), None, None, "vectors/s"),
    ("read", ("read", "qps_per_core"), ("read", "p50_ms"), ("read", "p95_ms"), "reads/s"),
    *[
        (
            f"search {m}",
            (f"search_{m}", "qps_per_core"),
            (f"search_{m}", "p50_ms"),
            (f"search_{m}", "p95_ms"),
            "qps/core",
        )
        for m in MODES
    ],
]


def report(result: dict[str, Any], previous: dict[str, Any] | None) -> str:
    env = result["env"]
    lines = [
        f"backends bench ({'quick' if result['quick'] else 'full'}) · {result['size']:,} lessons · "
        f"{env['cpus']} CPUs · load {env['load_avg_1m']} → {env.get('load_avg_1m_end')} · {env['commit']}",
        f"SQLite {env['sqlite']} (sqlite-vec {env.get('sqlite_vec')}) · {env.get('postgres', 'Postgres not run')} "
        f"(pgvector {env.get('pgvector', '-')}) · psycopg {env.get('psycopg')} · Python {env['python']}",
        "rates are single-threaded (one process, one connection): per core; latencies in ms",
        "",
    ]
    cols = ["database", "operation", "rate", "unit", "p50", "p95", "rate vs prev", "p50 vs prev"]
    rows = []
    prev_m = (previous or {}).get("metrics", {})
    for db in DATABASES:
        m = result["metrics"].get(db)
        if not m:
            continue
        for label, rate_p, p50_p, p95_p, unit in ROWS:
            rate = dig(m, rate_p)
            p50 = dig(m, p50_p) if p50_p else None
            p95 = dig(m, p95_p) if p95_p else None
            if rate is None and p50 is None:
                continue
            rows.append(
                [
                    db,
                    label,
                    f"{rate:,.1f}" if rate is not None else "",
                    unit,
                    f"{p50:,.1f}" if p50 is not None else "",
                    f"{p95:,.1f}" if p95 is not None else "",
                    delta(rate, dig(prev_m.get(db), rate_p), True),
                    delta(p50, dig(prev_m.get(db), p50_p), False) if p50_p else "",
                ]
            )
    widths = [max(len(str(r[i])) for r in [cols, *rows]) for i in range(len(cols))]
    fmt = "  ".join(f"{{:{'>' if i in (2, 4, 5) else '<'}{w}}}" for i, w in enumerate(widths))
    lines.append(fmt.format(*cols))
    lines.append(fmt.format(*("-" * w for w in widths)))
    lines.extend(fmt.format(*r) for r in rows)
    lines.append("")
    for db in DATABASES:
        m = result["metrics"].get(db)
        if not m:
            continue
        ld = m["load"]
        lines.append(
            f"{db}: {m['db_mb']:,} MB; load {ld['lessons']:,} lessons: import {ld['import_seconds']} s, vectors "
            f"{ld['vector_seconds']} s"
            + (f" + HNSW index build {ld['hnsw_build_seconds']} s" if "hnsw_build_seconds" in ld else "")
            + (f", VACUUM ANALYZE {ld['vacuum_analyze_seconds']} s" if "vacuum_analyze_seconds" in ld else "")
            + (" (cached store: figures from its build)" if ld.get("cached") else "")
            + f"; audit verify {m['audit_verify']['rows']:,} rows {'ok' if m['audit_verify']['ok'] else 'BROKEN'} "
            f"in {m['audit_verify']['seconds']} s; drain after the writes {m['drain']['vectors']:,} vectors at "
            f"{m['drain']['per_sec']}/s; searches with results {m['search_answered']}"
        )
    if previous is not None and (previous.get("size") != result["size"]):
        lines.append(f"note: the previous run had {previous.get('size')} lessons; deltas mix sizes")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    import psycopg
    import pysqlite3.dbapi2 as sqlite3

    repo = Path(cairn.__file__).resolve().parents[2]  # the checkout whose src/ ran (a worktree or ROOT)
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=repo, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], capture_output=True, text=True, cwd=repo, timeout=10
        ).stdout.strip()
        commit = (commit or "unknown") + ("+dirty" if dirty else "")
    except OSError:
        commit = "unknown"
    try:
        con = sqlite3.connect(":memory:")
        con.enable_load_extension(True)
        import sqlite_vec

        sqlite_vec.load(con)
        vec = con.execute("SELECT vec_version()").fetchone()[0]
        con.close()
    except Exception:  # noqa: BLE001 - a version string is not worth failing over
        vec = None
    return {
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "sqlite_vec": vec,
        "psycopg": psycopg.__version__,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "commit": commit,
        "code": str(repo),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, help="lessons in each store (default 100000; --quick 5000)")
    ap.add_argument("--quick", action="store_true", help="5,000 lessons and shorter write loops (~1-2 min)")
    ap.add_argument("--only", choices=DATABASES, help="one database only")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the cached SQLite store")
    ap.add_argument(
        "--out", type=Path, help=f"the JSON result (default {OUT.relative_to(ROOT)}; --quick: {OUT_QUICK.name})"
    )
    args = ap.parse_args(argv)
    clean_env()
    sizes = dict(QUICK if args.quick else FULL)
    if args.size:
        sizes["size"] = args.size
    size = sizes["size"]
    args.out = args.out or (OUT_QUICK if args.quick else OUT)
    previous = store_bench.load(args.out)
    env = environment()
    started = time.perf_counter()
    metrics: dict[str, Any] = {}
    shm = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="cairn-backends-", dir=shm) as tmp_name:
        work = Path(tmp_name)
        for db in DATABASES:
            if args.only and db != args.only:
                continue
            t0 = time.perf_counter()
            say(f"== {db}, {size:,} lessons")
            if db == "sqlite":
                metrics[db] = run_sqlite(size, sizes, args.rebuild, work)
            else:
                metrics[db] = run_postgres(size, sizes, work, env)
            metrics[db]["seconds"] = round(time.perf_counter() - t0, 1)
            say(f"== {db} done in {metrics[db]['seconds']} s")
    env["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    result = {
        "bench": "backends",
        "format": 1,
        "quick": args.quick,
        "size": size,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runtime_seconds": round(time.perf_counter() - started, 1),
        "sizes": sizes,
        "queries": len(all_queries()),
        "env": env,
        "metrics": metrics,
    }
    print(report(result, previous))
    busiest = max(env["load_avg_1m"], env["load_avg_1m_end"])
    if busiest > (env["cpus"] or 1) * 0.75:
        print(
            f"warning: the machine was busy (1-minute load {busiest} on {env['cpus']} CPUs); "
            "figures are pessimistic and deltas noisy (the Postgres section's own server process adds ~1)"
        )
    print(f"\ntotal {result['runtime_seconds']} s; wrote {args.out}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
