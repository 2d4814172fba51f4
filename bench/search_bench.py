"""Benchmark search and recall: latency by store size and mode, recall end to end, reindex, the model.

    .venv/bin/python bench/search_bench.py [--quick] [--sizes 10000,60000,100000] [--rebuild]

What it measures (full / quick sizes):

* stores of 10,000, 60,000 and 100,000 generated lessons (quick: 1,000, 3,000, 5,000), each bulk-loaded
  through ``Cairn.import_lines`` (plain records, as ``cairn import``) and then embedded with
  ``Cairn.drain_embeddings``: the import rate and the drain's embedding throughput (model + index writes);
* in-process search latency, p50 / p95 / mean, for ``fts``, ``vector`` and ``hybrid`` over 50 varied
  queries (questions, error texts, identifiers, short keywords, some with a repo/branch ladder or a tag
  filter), and in-process ``recall`` latency, at every size;
* ``cairn recall`` end to end, a fresh ``python -m cairn.cli.main recall`` process per run with the error
  on stdin, at the middle size (60,000): p50 / p95 of 10 runs, next to ``python -c pass``;
* ``reindex`` of the middle-size store (full-text rebuild and re-embedding of every lesson), on a copy;
* the embedding model's cold load (fresh processes: ``get_embedder()`` and a first ``embed``), and the
  model's own throughput on a fixed sample at its default batch size.

Stores are cached under ``bench/out/search-stores/`` keyed by size, generator version and a fingerprint
of the index code (migrations, ``search_index.py``, ``indexing.py``) and model; they are built as nested
prefixes (the 60,000 store is the 10,000 store plus 50,000 more lessons), so a first run imports and
embeds each lesson once and a rerun only measures. ``--rebuild`` drops the cache.

Prints a table, writes ``bench/out/search.json`` (compared with the previous run's JSON: delta %) and
draws ``bench/out/search.png`` (p50 latency against store size, one line per mode).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import shutil
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
sys.path.insert(0, str(ROOT / "src"))

OUT_DIR = ROOT / "bench" / "out"
OUT = OUT_DIR / "search.json"
PLOT = OUT_DIR / "search.png"
CACHE = OUT_DIR / "search-stores"

GENERATOR_VERSION = 1
FULL_SIZES = (10_000, 60_000, 100_000)
QUICK_SIZES = (1_000, 3_000, 5_000)
MODES = ("fts", "vector", "hybrid")
RECALL_RUNS = 10
LOAD_RUNS = 5

# ------------------------------------------------------------------------------------------------ generator

ORGS = ["acme", "globex", "initech", "umbrella", "hooli", "stark"]
REPOS = ["web", "api", "billing", "infra", "mobile", "search", "payments", "auth", "etl", "docs"]
PROJECTS = ["shop", "platform", "data", "growth", "mobile-apps"]
BRANCHES = ["main", "dev", "release-2.4", "feature/checkout-v2"]
TAGS = [
    "ci", "tests", "deploy", "deps", "python", "node", "docker", "db", "api", "git", "perf", "security",
    "k8s", "frontend", "auth", "cache", "flaky", "infra", "migrations", "observability",
]  # fmt: skip
KINDS = ["lesson"] * 6 + ["fact", "preference", "reference"]

SUBJECTS = [
    "the billing worker", "the CI runner", "pytest fixtures", "the nginx ingress", "the Postgres replica",
    "the React build", "the Kafka consumer", "the Redis cache", "the Celery beat scheduler", "the GraphQL gateway",
    "the Terraform plan", "the Helm chart", "the webpack dev server", "the Django admin", "the Go build",
    "the gRPC client", "the S3 uploader", "the Airflow DAG", "the Elasticsearch cluster", "the Rust crate",
    "the Android emulator", "the iOS simulator", "the Jest suite", "the Playwright tests", "the Alembic migration",
    "the SQLAlchemy session", "the FastAPI app", "the Spring Boot service", "the RabbitMQ queue",
    "the Docker image", "the Kubernetes job", "the cron job", "the feature flag service", "the OAuth callback",
    "the JWT middleware", "the rate limiter", "the search indexer", "the metrics exporter", "the log shipper",
    "the pre-commit hook", "the dependency lockfile", "the monorepo build", "the Storybook build",
    "the WebSocket server", "the payment webhook", "the email sender", "the PDF renderer", "the image resizer",
    "the data pipeline", "the ETL job", "the Snowflake loader", "the dbt model", "the Spark job",
    "the ML training job", "the notebook kernel", "the VPN client", "the SSH bastion", "the load balancer",
    "the CDN cache", "the DNS resolver", "the TLS certificate", "the secrets manager", "the Vault agent",
]  # fmt: skip
PROBLEMS = [
    "times out after {n} seconds under load", "leaks file descriptors until it hits the ulimit",
    "fails with {error} on a cold start", "silently drops messages when the broker restarts",
    "deadlocks when two workers migrate at once", "runs out of memory on large batches",
    "returns stale data after a deploy", "breaks when the clock moves to daylight saving time",
    "fails only on ARM laptops", "picks up the wrong config file in CI", "is flaky when tests run in parallel",
    "retries forever without backoff", "logs secrets at debug level", "rejects requests with a {code} status",
    "hangs on DNS resolution inside the container", "exhausts the connection pool during traffic spikes",
    "fails with {error} after the dependency upgrade", "reads the environment before the .env file is loaded",
    "corrupts unicode in file names", "uses the local timezone instead of UTC", "ignores the proxy settings",
    "caches credentials past their expiry", "double-processes events after a rebalance",
    "builds a different artifact on every run", "starts before the database is ready",
]  # fmt: skip
FIXES = [
    "raise {setting} to {n}", "pin {pkg} to {ver} until upstream ships a fix", "run {cmd} before the step",
    "set {setting}=0 in the CI environment", "wrap the call in a retry with exponential backoff and jitter",
    "move the secret to the vault and read it at startup", "add a readiness probe that checks the database",
    "use a connection pool sized to the worker count", "pass --platform linux/amd64 to the build",
    "clear the cache key by bumping {setting}", "run the migrations in a single advisory-locked job",
    "convert timestamps to UTC at the boundary", "set the idempotency key from the event id",
    "stream the batch in chunks of {n} rows", "mount the CA bundle and point {setting} at it",
    "disable parallelism for that test module", "call {func} in the teardown", "restart it with {cmd}",
    "use the lockfile hash in the cache key", "check the exit code of {cmd} instead of parsing output",
]  # fmt: skip
REASONS = [
    "Otherwise the on-call gets paged for a false alarm.", "This cost us a day of debugging in {month}.",
    "The upstream issue is tracked as {org}/{repo}#{n}.", "Staging does not reproduce it; production does.",
    "The error message is misleading: the real cause is upstream.", "Confirmed by profiling with py-spy.",
    "Only happens with more than {n} concurrent users.", "The default changed in {pkg} {ver}.",
    "", "", "",
]  # fmt: skip
ERRORS = [
    "ConnectionResetError", "TimeoutError", "ModuleNotFoundError", "OperationalError", "ECONNREFUSED",
    "OOMKilled", "CrashLoopBackOff", "SSLCertVerificationError", "PermissionError", "KeyError",
    "IntegrityError", "BrokenPipeError", "ENOSPC", "SIGSEGV", "NullPointerException", "DeadlineExceeded",
]  # fmt: skip
PKGS = ["requests", "urllib3", "numpy", "pydantic", "sqlalchemy", "celery", "webpack", "react", "grpcio", "boto3"]
CMDS = ["make db", "npm ci", "poetry lock --no-update", "kubectl rollout restart", "terraform init -upgrade",
        "docker compose down -v", "alembic upgrade head", "git fetch --prune", "pip cache purge"]  # fmt: skip
SETTING_A = ["WORKER", "POOL", "CACHE", "HTTP", "DB", "QUEUE", "SYNC", "EXPORT", "INDEX", "AUTH", "UPLOAD", "BATCH"]
SETTING_B = ["TIMEOUT", "MAX_SIZE", "RETRIES", "TTL", "CONCURRENCY", "GRACE", "INTERVAL", "LIMIT", "VERSION"]
MONTHS = ["January", "March", "May", "July", "September", "November"]


def _fill(rng: random.Random, text: str) -> str:
    return text.format(
        n=rng.choice([3, 5, 10, 30, 64, 100, 500, 1000, 4096]),
        error=rng.choice(ERRORS),
        code=rng.choice([400, 403, 409, 413, 429, 502, 503]),
        setting=f"{rng.choice(ORGS).upper()}_{rng.choice(SETTING_A)}_{rng.choice(SETTING_B)}",
        pkg=rng.choice(PKGS),
        ver=f"{rng.randint(1, 5)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}",
        cmd=rng.choice(CMDS),
        func=f"{rng.choice(['reset', 'clear', 'close', 'flush'])}_{rng.choice(['registry', 'pool', 'cache', 'state'])}",
        month=rng.choice(MONTHS),
        org=rng.choice(ORGS),
        repo=rng.choice(REPOS),
    )


def make_records(n: int, seed: int = GENERATOR_VERSION * 1009) -> list[dict[str, Any]]:
    """Deterministic, distinct lessons: ``make_records(n)[:m] == make_records(m)`` (stores nest)."""
    rng = random.Random(seed)
    scopes = ["global"] * 8 + [f"project::{p}" for p in PROJECTS]
    scopes += [f"repo::{o}/{r}" for o in ORGS for r in REPOS]
    scopes += [f"branch::{o}/{r}::{b}" for o in ORGS[:2] for r in REPOS[:4] for b in BRANCHES]
    out = []
    seen: set[str] = set()
    for i in range(n):
        subject = rng.choice(SUBJECTS)
        problem = _fill(rng, rng.choice(PROBLEMS))
        fix = _fill(rng, rng.choice(FIXES))
        reason = _fill(rng, rng.choice(REASONS))
        value = f"{subject[0].upper()}{subject[1:]} {problem}; {fix}. {reason}".strip()
        if value in seen:  # every lesson distinct: an import of a twin would count a recurrence instead
            value += f" Seen again in incident INC-{1000 + i}."
        seen.add(value)
        slug = re.sub(r"[^a-z0-9]+", "-", subject.replace("the ", "").lower()).strip("-")
        rec: dict[str, Any] = {
            "scope": rng.choice(scopes),
            "key": f"{slug}-{problem.split()[0]}-{i:06d}",
            "value": value,
            "tags": sorted(rng.sample(TAGS, rng.randint(0, 3))),
            "kind": rng.choice(KINDS),
        }
        out.append(rec)
    return out


QUESTIONS = [
    "why does the kafka consumer process events twice",
    "how do I stop the billing worker from running out of memory",
    "what should the connection pool size be",
    "tests pass locally but fail in CI with the wrong config",
    "how to make docker builds work on apple silicon",
    "the dashboard shows stale numbers after a release",
    "secrets showing up in the logs",
    "how do we retry webhook deliveries safely",
    "database not ready when the service starts",
    "why is the build output different every time",
    "dates are off by one hour after the clock change",
    "where do I put the company root certificate",
    "parallel test runs are flaky",
    "how to migrate the schema without two jobs racing",
    "requests hang resolving hostnames in kubernetes",
]
ERROR_QUERIES = [
    "ConnectionResetError: [Errno 104] Connection reset by peer",
    "sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) could not connect to server",
    "Back-off restarting failed container api in pod api-7d9f8b6c5-x2x7k (CrashLoopBackOff)",
    "ssl.SSLCertVerificationError: certificate verify failed: unable to get local issuer certificate",
    "OSError: [Errno 24] Too many open files",
    "npm ERR! code ERESOLVE unable to resolve dependency tree",
    "Killed: container exceeded memory limit (OOMKilled) exit code 137",
    "HTTP 429 Too Many Requests from the payments API",
    "grpc._channel._InactiveRpcError: StatusCode.DEADLINE_EXCEEDED",
    "ModuleNotFoundError: No module named 'pydantic.v1'",
]
IDENTIFIERS = [
    "ACME_WORKER_TIMEOUT", "HOOLI_POOL_MAX_SIZE", "reset_registry", "alembic upgrade head", "kubectl rollout restart",
    "STARK_CACHE_TTL", "flush_pool", "GLOBEX_HTTP_RETRIES", "poetry lock --no-update", "INITECH_DB_CONCURRENCY",
]  # fmt: skip
KEYWORDS = ["celery", "webpack", "helm", "deadlock", "ulimit", "jitter", "snowflake", "idempotency", "proxy", "dns"]
CONTEXTS: list[dict[str, Any]] = [
    {"repo": "acme/web", "branch": "main"},
    {"repo": "globex/api", "branch": "dev", "project": "platform"},
    {"repo": "hooli/billing"},
    {"project": "data"},
    {"tag": "flaky"},
]


def queries() -> list[tuple[str, dict[str, Any]]]:
    """50 queries: 15 questions, 10 errors, 10 identifiers, 10 keywords, 5 with a ladder or tag filter."""
    plain = QUESTIONS + ERROR_QUERIES + IDENTIFIERS + KEYWORDS
    filtered = [(QUESTIONS[i], CONTEXTS[i]) for i in range(len(CONTEXTS))]
    return [(q, {}) for q in plain] + filtered


# ------------------------------------------------------------------------------------------------ helpers


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[idx]


def summary_ms(seconds: list[float]) -> dict[str, Any]:
    return {
        "n": len(seconds),
        "p50_ms": round(statistics.median(seconds) * 1000, 2),
        "p95_ms": round(pct(seconds, 0.95) * 1000, 2),
        "mean_ms": round(statistics.fmean(seconds) * 1000, 2),
        "max_ms": round(max(seconds) * 1000, 2),
    }


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def fingerprint() -> str:
    """Stores are reusable while what they hold stays the same: the schema, the index row formats (the
    functions that create and fill the index tables), what a vector embeds, and the model. A change to
    how the indexes are *queried* keeps the cache."""
    import inspect

    from cairn.search.embed import MODEL_NAME
    from cairn.service import embeddings
    from cairn.store import search_index as ix

    h = hashlib.sha256(f"gen{GENERATOR_VERSION}:{MODEL_NAME}".encode())
    src = ROOT / "src" / "cairn"
    for f in [*sorted((src / "store" / "migrations" / "versions").glob("*.py")), src / "store" / "schema.py"]:
        h.update(f.read_bytes())
    for fn in (ix.vec_table, ix.vec_ensure, ix.vec_put, ix.fts_put, embeddings.embed_text):
        h.update(inspect.getsource(fn).encode())
    return h.hexdigest()[:12]


def clean_env() -> None:
    for name in ("CAIRN_EMBED_MODEL", "CAIRN_FAKE_NOW", "CAIRN_SESSION"):
        os.environ.pop(name, None)


def open_service(home: Path):  # type: ignore[no-untyped-def]
    from cairn.runtime.local import local_principal
    from cairn.service.api import Cairn
    from cairn.store.engine import Store, sqlite_url

    svc = Cairn(Store(sqlite_url(home)))
    p = local_principal()
    svc.ensure_tenant(p)
    return svc, p


def copy_store(src_home: Path, dst_home: Path) -> None:
    """A consistent copy through SQLite's online backup (WAL included)."""
    import pysqlite3.dbapi2 as sqlite3

    dst_home.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(str(src_home / "cairn.db"))
    dst = sqlite3.connect(str(dst_home / "cairn.db"))
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def ticker(label: str, every_s: float = 15.0) -> Callable[[int, int], None]:
    start = time.perf_counter()
    last = [0.0]

    def tick(done: int, total: int) -> None:
        now = time.perf_counter() - start
        if now - last[0] >= every_s or done >= total:
            last[0] = now
            rate = done / now if now else 0.0
            eta = (total - done) / rate if rate else float("nan")
            say(f"  {label}: {done:,}/{total:,} ({rate:,.0f}/s, ~{eta / 60:.1f} min left)")

    return tick


# ------------------------------------------------------------------------------------------------ stores


def build_stores(sizes: tuple[int, ...], rebuild: bool) -> dict[int, dict[str, Any]]:
    """Build (or reuse) one store per size, each a prefix of the next; return per-store build figures."""
    root = CACHE / f"g{GENERATOR_VERSION}-{fingerprint()}"
    if rebuild and CACHE.exists():
        shutil.rmtree(CACHE)
    for stale in CACHE.glob("g*") if CACHE.exists() else []:
        if stale != root:
            say(f"dropping stale store cache {stale.name}")
            shutil.rmtree(stale)
    records = make_records(max(sizes))
    info: dict[int, dict[str, Any]] = {}
    previous: Path | None = None
    prev_size = 0
    for size in sorted(sizes):
        home = root / str(size)
        meta_file = home / "meta.json"
        meta = json.loads(meta_file.read_text()) if meta_file.exists() else None
        if meta and meta.get("complete"):
            say(f"store {size:,}: cached ({home.relative_to(ROOT)})")
            info[size] = {**meta, "cached": True}
            previous, prev_size = home, size
            continue
        if home.exists():
            shutil.rmtree(home)
        if previous is not None:
            say(f"store {size:,}: copying the {prev_size:,} store, then adding {size - prev_size:,} lessons")
            copy_store(previous, home)
        else:
            home.mkdir(parents=True)
            say(f"store {size:,}: importing {size:,} lessons")
        svc, p = open_service(home)
        lines = [json.dumps(r) for r in records[prev_size:size]]
        t0 = time.perf_counter()
        result = svc.import_lines(p, lines, progress=ticker("import"))
        import_s = time.perf_counter() - t0
        if result["refused"] or result["created"] != len(lines):
            raise SystemExit(f"import did not create every lesson: {result}")
        say(f"  embedding {len(lines):,} lessons (drain_embeddings)")
        t0 = time.perf_counter()
        embedded = svc.drain_embeddings(p, progress=ticker("embed"))
        embed_s = time.perf_counter() - t0
        svc.store.dispose()
        meta = {
            "lessons": size,
            "added": len(lines),
            "import_seconds": round(import_s, 1),
            "import_per_s": round(len(lines) / import_s, 1),
            "embedded": embedded,
            "embed_seconds": round(embed_s, 1),
            "embed_per_s": round(embedded / embed_s, 1) if embed_s else None,
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "complete": True,
        }
        meta_file.write_text(json.dumps(meta, indent=1))
        info[size] = {**meta, "cached": False}
        previous, prev_size = home, size
    for size in sizes:
        db = root / str(size) / "cairn.db"
        info[size]["db_mb"] = round(db.stat().st_size / 1e6, 1)
        info[size]["home"] = str(root / str(size))
    return info


# ------------------------------------------------------------------------------------------------ latency only


def synthetic_vectors(home: Path, seed: int = 11) -> int:
    """Give every queued lesson a random unit vector (and its sign bits) instead of embedding it.

    For the latency run only (``--latency``): embedding 100,000 lessons takes most of an hour on this
    machine, and what the query path costs does not depend on what the vectors mean (the vector arm
    scans every sign-bit row and re-ranks a fixed number of them by exact cosine). Quality is measured
    on real embeddings by ``evals/run_eval.py``, never here.
    """
    import numpy as np
    import pysqlite3.dbapi2 as sqlite3

    from cairn.core.principal import LOCAL_TENANT
    from cairn.search.embed import DIM, MODEL_NAME, signature

    db = sqlite3.connect(str(home / "cairn.db"))
    try:
        rows = db.execute(
            "SELECT l.id, l.content_hash FROM embed_queue q JOIN lessons l ON l.id = q.lesson_id ORDER BY l.id"
        ).fetchall()
        rng = np.random.default_rng(seed)
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        for start in range(0, len(rows), 5000):
            chunk = rows[start : start + 5000]
            vecs = rng.standard_normal((len(chunk), DIM)).astype("<f4")
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            emb, sig = [], []
            for (lid, chash), v in zip(chunk, vecs, strict=True):
                emb.append((lid, MODEL_NAME, LOCAL_TENANT, DIM, chash, now, v.tobytes()))
                sig.append((lid, MODEL_NAME, LOCAL_TENANT, now, signature(v)))
            db.executemany("INSERT OR REPLACE INTO lesson_embeddings VALUES (?, ?, ?, ?, ?, ?, ?)", emb)
            db.executemany("INSERT OR REPLACE INTO lesson_signatures VALUES (?, ?, ?, ?, ?)", sig)
        db.execute("DELETE FROM embed_queue")
        db.execute("DELETE FROM embed_state WHERE tenant_id = ?", (LOCAL_TENANT,))
        db.execute(
            "INSERT INTO embed_state (tenant_id, model, updated_at, generation) VALUES (?, ?, ?, 1)",
            (LOCAL_TENANT, MODEL_NAME, now),
        )
        db.commit()
    finally:
        db.close()
    return len(rows)


def build_synthetic(sizes: tuple[int, ...]) -> dict[int, Path]:
    """One store per size with real text and random vectors (cached like the real stores)."""
    root = CACHE / f"syn-g{GENERATOR_VERSION}-{fingerprint()}"
    records = make_records(max(sizes))
    homes = {}
    for size in sorted(sizes):
        home = root / str(size)
        if (home / "meta.json").exists():
            say(f"synthetic store {size:,}: cached")
            homes[size] = home
            continue
        if home.exists():
            shutil.rmtree(home)
        home.mkdir(parents=True)
        svc, p = open_service(home)
        t0 = time.perf_counter()
        result = svc.import_lines(p, [json.dumps(r) for r in records[:size]], progress=ticker("import"))
        if result["refused"]:
            raise SystemExit(f"import refused: {result['refused'][:3]}")
        svc.store.dispose()
        n = synthetic_vectors(home)
        (home / "meta.json").write_text(json.dumps({"lessons": size, "vectors": n, "synthetic": True}))
        say(f"synthetic store {size:,}: built in {time.perf_counter() - t0:.0f}s")
        homes[size] = home
    return homes


def measure_recall_daemon(home: Path, runs: int) -> dict[str, Any]:
    """``cairn recall`` end to end (a fresh CLI process per run) while ``cairn serve`` is up and warm."""
    env = cli_env(home)
    server = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "serve", "--no-http", "--no-sweep"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        from cairn.daemon import protocol

        sock = Path(protocol.socket_path(str(home)))
        deadline = time.time() + 300
        while not sock.exists():
            if server.poll() is not None or time.time() > deadline:
                raise SystemExit(f"cairn serve did not come up: {server.stderr.read() if server.stderr else ''}")
            time.sleep(0.2)
        for err in ERROR_QUERIES[:3]:  # warm: the ranking index and the model, in the daemon
            subprocess.run([sys.executable, "-m", "cairn.cli.main", "recall"], input=err, capture_output=True,
                           text=True, env=env, check=True)  # fmt: skip
        times = []
        for i in range(runs):
            err = ERROR_QUERIES[i % len(ERROR_QUERIES)]
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "cairn.cli.main", "recall"], input=err,
                                  capture_output=True, text=True, env=env)  # fmt: skip
            times.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                raise SystemExit(f"cairn recall failed: {proc.stderr[-2000:]}")
        return summary_ms(times)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def latency_main(sizes: tuple[int, ...], runs: int) -> int:
    """The bounded latency run: in-process search per mode and recall, and recall through the daemon."""
    clean_env()
    homes = build_synthetic(sizes)
    result: dict[str, Any] = {"bench": "search-latency", "at": datetime.now(UTC).isoformat(timespec="seconds"),
                              "env": environment(), "search": {}, "recall_daemon": {}}  # fmt: skip
    for size in sizes:
        say(f"in-process search @ {size:,}")
        result["search"][str(size)] = measure_search(homes[size])
        say(f"cairn recall through the warm daemon @ {size:,}")
        result["recall_daemon"][str(size)] = measure_recall_daemon(homes[size], runs)
    for size in sizes:
        s = result["search"][str(size)]
        d = result["recall_daemon"][str(size)]
        print(f"{size:>7,}  " + "  ".join(f"{m} p50 {s[m]['p50_ms']:.1f} ms (CPU {s[m]['cpu_p50_ms']:.1f})"
                                          for m in (*MODES, "recall"))
              + f"  | cairn recall (daemon) p50 {d['p50_ms']:.1f} ms, p95 {d['p95_ms']:.1f} ms")  # fmt: skip
    out = OUT_DIR / "search-latency.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


# ------------------------------------------------------------------------------------------------ measures


def measure_search(home: Path) -> dict[str, Any]:
    svc, p = open_service(home)
    qs = queries()
    for mode in MODES:  # warm: model loaded, page cache hot, statement caches filled
        for q, opts in qs[:3]:
            svc.search(p, q, mode=mode, **opts)
    out: dict[str, Any] = {}
    for mode in MODES:
        times, cpu = [], []
        for q, opts in qs:
            t0, c0 = time.perf_counter(), time.process_time()
            svc.search(p, q, mode=mode, **opts)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        out[mode] = summary_ms(times) | {"cpu_p50_ms": round(statistics.median(cpu) * 1000, 2)}
    times, cpu = [], []
    for q in ERROR_QUERIES + QUESTIONS[:10]:
        t0, c0 = time.perf_counter(), time.process_time()
        svc.recall(p, q)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    # CPU time (with CAIRN_EMBED_THREADS=1: one core's work) does not grow with the machine's load.
    out["recall"] = summary_ms(times) | {"cpu_p50_ms": round(statistics.median(cpu) * 1000, 2)}
    svc.store.dispose()
    return out


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["CAIRN_HOME"] = str(home)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def measure_recall_e2e(home: Path, runs: int) -> dict[str, Any]:
    env = cli_env(home)
    times, printed = [], 0
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)  # warm the interpreter's files
    for i in range(runs):
        err = ERROR_QUERIES[i % len(ERROR_QUERIES)]
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "cairn.cli.main", "recall"], input=err, capture_output=True, text=True, env=env
        )
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"cairn recall failed: {proc.stderr[-2000:]}")
        printed += bool(proc.stdout.strip())
    base = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        base.append(time.perf_counter() - t0)
    return {
        **summary_ms(times),
        "printed_lessons_runs": printed,
        "python_startup_ms": round(statistics.median(base) * 1000, 1),
    }


def measure_reindex(home: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cairn-reindex-", dir=OUT_DIR) as tmp:
        copy = Path(tmp) / "store"
        copy_store(home, copy)
        svc, p = open_service(copy)
        svc.search(p, "warm the model", mode="vector")
        marks: dict[str, float] = {}
        tick = ticker("reindex embed")

        def progress(done: int, total: int) -> None:
            marks.setdefault("first_batch", time.perf_counter())
            tick(done, total)

        t0 = time.perf_counter()
        result = svc.reindex(p, progress=progress)
        total = time.perf_counter() - t0
        svc.store.dispose()
    return {
        "lessons": result["indexed"],
        "embedded": result["embedded"],
        "seconds": round(total, 1),
        "per_s": round(result["indexed"] / total, 1),
        "until_first_batch_s": round(marks.get("first_batch", t0) - t0, 1),
    }


def measure_model(sample: list[str]) -> dict[str, Any]:
    code = (
        "import time; t0 = time.perf_counter()\n"
        "from cairn.search.embed import get_embedder\n"
        "e = get_embedder(); t1 = time.perf_counter(); e.embed(['warm up']); t2 = time.perf_counter()\n"
        "print(t1 - t0, t2 - t1)\n"
    )
    env = cli_env(ROOT)
    loads, firsts = [], []
    for _ in range(LOAD_RUNS):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        a, b = (float(x) for x in out.stdout.split())
        loads.append(a)
        firsts.append(b)
    from cairn.search.embed import get_embedder

    emb = get_embedder()
    emb.embed(sample[:32])
    t0 = time.perf_counter()
    emb.embed(sample)  # the shipped default batch size, as the drain uses it
    secs = time.perf_counter() - t0
    one = []
    for q in QUESTIONS:
        t = time.perf_counter()
        emb.embed([q])
        one.append(time.perf_counter() - t)
    return {
        "name": emb.name,
        "dim": emb.dim,
        "load_median_ms": round(statistics.median(loads) * 1000, 1),
        "load_max_ms": round(max(loads) * 1000, 1),
        "first_embed_median_ms": round(statistics.median(firsts) * 1000, 1),
        "throughput_texts": len(sample),
        "throughput_per_s": round(len(sample) / secs, 1),
        "query_embed": summary_ms(one),
    }


# ------------------------------------------------------------------------------------------------ report


def flatten(d: Any, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(d, int | float) and not isinstance(d, bool):
        out[prefix] = float(d)
    return out


def delta(now: float | None, then: float | None, higher_better: bool) -> str:
    if now is None or then is None or not then:
        return ""
    change = (now - then) / then * 100
    mark = "" if abs(change) < 5 else (" better" if (change > 0) == higher_better else " WORSE")
    return f"{change:+.1f}%{mark}"


def rows_for(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(label, flattened path, unit, higher is better)."""
    rows = []
    for size in result["sizes"]:
        for mode in (*MODES, "recall"):
            for stat in ("p50_ms", "p95_ms"):
                rows.append((f"{mode} {stat[:3]} @ {int(size):,}", f"search.{size}.{mode}.{stat}", "ms", False))
    mid = result["recall_e2e"]["lessons"]
    rows += [
        (f"cairn recall e2e p50 @ {mid:,}", "recall_e2e.p50_ms", "ms", False),
        (f"cairn recall e2e p95 @ {mid:,}", "recall_e2e.p95_ms", "ms", False),
        ("python -c pass", "recall_e2e.python_startup_ms", "ms", False),
        (f"reindex @ {result['reindex']['lessons']:,}", "reindex.seconds", "s", False),
        ("reindex rate", "reindex.per_s", "lessons/s", True),
        ("model load (cold, median)", "model.load_median_ms", "ms", False),
        ("model throughput (default batch)", "model.throughput_per_s", "texts/s", True),
        ("query embed p50", "model.query_embed.p50_ms", "ms", False),
    ]
    for size, st in result["stores"].items():
        if not st.get("cached"):
            rows.append(
                (f"drain throughput (+{st['added']:,} @ {int(size):,})", f"stores.{size}.embed_per_s", "texts/s", True)
            )
            rows.append(
                (f"import rate (+{st['added']:,} @ {int(size):,})", f"stores.{size}.import_per_s", "rec/s", True)
            )
    return rows


def report(result: dict[str, Any], previous: dict[str, Any] | None) -> str:
    env = result["env"]
    lines = [
        f"search bench ({'quick' if result['quick'] else 'full'}) · {env['cpus']} CPUs · Python {env['python']} · "
        f"SQLite {env['sqlite']} · {result['model']['name']} · load {env['load_avg_start']} → {env['load_avg_end']}",
        "",
    ]
    now_flat = flatten(result)
    then_flat = flatten(previous) if previous else {}
    table = [("metric", "value", "unit", "vs previous")]
    for label, path, unit, higher in rows_for(result):
        if path not in now_flat:
            continue
        v = now_flat[path]
        table.append((label, f"{v:,.1f}", unit, delta(v, then_flat.get(path), higher)))
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    fmt = "  ".join(f"{{:{'>' if i == 1 else '<'}{w}}}" for i, w in enumerate(widths))
    lines.append(fmt.format(*table[0]))
    lines.append(fmt.format(*("-" * w for w in widths)))
    lines.extend(fmt.format(*r) for r in table[1:])
    cached = [f"{int(s):,}" for s, st in result["stores"].items() if st.get("cached")]
    if cached:
        lines.append(f"stores {', '.join(cached)} came from the cache: their import/drain figures are from "
                     "the build run (bench/out/search-stores/*/meta.json)")  # fmt: skip
    if previous and previous.get("quick") != result["quick"]:
        lines.append("note: the previous run had other sizes (quick vs full); deltas compare different stores")
    if env["load_avg_start"] > 0.75 * (env["cpus"] or 1):
        lines.append(f"warning: the machine was busy (1-min load {env['load_avg_start']} on {env['cpus']} CPUs); "
                     "figures are pessimistic and deltas are noise")  # fmt: skip
    return "\n".join(lines)


def plot(result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    sizes = sorted(int(s) for s in result["search"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode in (*MODES, "recall"):
        p50 = [result["search"][str(s)][mode]["p50_ms"] for s in sizes]
        p95 = [result["search"][str(s)][mode]["p95_ms"] for s in sizes]
        (line,) = ax.plot(sizes, p50, marker="o", label=f"{mode} p50")
        ax.plot(sizes, p95, marker=".", linestyle=":", color=line.get_color(), alpha=0.6, label=f"{mode} p95")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("lessons in the store")
    ax.set_ylabel("latency (ms, in process)")
    ax.set_title(f"Cairn search latency by store size ({'quick' if result['quick'] else 'full'} run)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(PLOT, dpi=120)
    plt.close(fig)


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
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "commit": commit,
        "embed_threads": os.environ.get("CAIRN_EMBED_THREADS") or "default",
        "load_avg_start": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small stores (1,000 / 3,000 / 5,000): a few minutes")
    ap.add_argument("--sizes", help="comma-separated store sizes (the middle one gets recall e2e and reindex)")
    ap.add_argument("--rebuild", action="store_true", help="drop the cached stores and build them again")
    ap.add_argument("--no-reindex", action="store_true", help="skip the reindex measurement (the slowest part)")
    ap.add_argument("--plot-only", action="store_true", help="redraw bench/out/search.png from search.json")
    ap.add_argument(
        "--latency",
        action="store_true",
        help="bounded latency run on stores with random vectors (default sizes 60000,100000): in-process search "
        "and cairn recall through a warm daemon",
    )
    ap.add_argument("--runs", type=int, default=20, help="--latency: cairn recall runs per size")
    args = ap.parse_args(argv)
    if args.latency:
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else (60_000, 100_000)
        return latency_main(sizes, args.runs)
    if args.plot_only:
        plot(json.loads(OUT.read_text()))
        return 0
    clean_env()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else (QUICK_SIZES if args.quick else FULL_SIZES)
    sizes = tuple(sorted(set(sizes)))
    middle = sizes[len(sizes) // 2]
    started = time.perf_counter()
    env = environment()
    previous = json.loads(OUT.read_text()) if OUT.exists() else None

    say(f"search bench: stores {', '.join(f'{s:,}' for s in sizes)}; recall e2e and reindex at {middle:,}")
    say("model: cold load and throughput")
    model = measure_model([r["value"] for r in make_records(512, seed=7)])
    stores = build_stores(sizes, args.rebuild)
    search: dict[str, Any] = {}
    for size in sizes:
        say(f"search latency @ {size:,} ({len(queries())} queries x {len(MODES)} modes, + recall)")
        search[str(size)] = measure_search(Path(stores[size]["home"]))
    say(f"cairn recall end to end @ {middle:,} ({RECALL_RUNS} runs)")
    recall_e2e = {"lessons": middle, **measure_recall_e2e(Path(stores[middle]["home"]), RECALL_RUNS)}
    if args.no_reindex:
        reindex: dict[str, Any] = {"lessons": middle, "skipped": True}
    else:
        say(f"reindex @ {middle:,} (on a copy; re-embeds every lesson)")
        reindex = measure_reindex(Path(stores[middle]["home"]))
    env["load_avg_end"] = round(os.getloadavg()[0], 2)
    result = {
        "bench": "search",
        "format": 1,
        "quick": args.quick and not args.sizes,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runtime_seconds": round(time.perf_counter() - started, 1),
        "generator_version": GENERATOR_VERSION,
        "sizes": [str(s) for s in sizes],
        "queries": len(queries()),
        "env": env,
        "model": model,
        "stores": {str(s): {k: v for k, v in st.items() if k != "home"} for s, st in stores.items()},
        "search": search,
        "recall_e2e": recall_e2e,
        "reindex": reindex,
    }
    print()
    print(report(result, previous))
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    plot(result)
    print(f"\nwrote {OUT.relative_to(ROOT)} and {PLOT.relative_to(ROOT)} ({result['runtime_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
