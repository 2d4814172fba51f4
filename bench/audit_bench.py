"""What ``cairn audit verify`` costs: the chain alone (``--fast``) and the chain plus the state proof.

Builds a store of ``--size`` lessons (default 100,000) through the service's own mutation path
(``mutate.apply_many``: lesson, version, tags, full-text, audit row with its state hashes; 2,000
lessons per transaction), edits a fifth of them (a second version each), forgets 500 (tombstones),
then times ``Cairn.audit_verify`` with ``full=False`` and ``full=True``, best of ``--runs``.

    .venv/bin/python bench/audit_bench.py                 # 100,000 lessons on SQLite (~3-5 min here)
    .venv/bin/python bench/audit_bench.py --size 10000    # quick
    .venv/bin/python bench/audit_bench.py --postgres      # also on a throwaway PostgreSQL (tests/pg_server.py)

Figures go to bench/README.md by hand; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.pg_server (ahead of any installed "tests" package)
BATCH = 2_000


def say(msg: str) -> None:
    print(msg, flush=True)


def build(url: str, size: int) -> tuple[Any, Any, dict[str, float]]:
    from sqlalchemy import select

    from cairn.core.content import content_hash
    from cairn.core.timeparse import utcnow
    from cairn.runtime.local import local_principal
    from cairn.runtime.settings import Settings
    from cairn.service.api import Cairn
    from cairn.service.mutate import Change, apply_many
    from cairn.store.engine import Store
    from cairn.store.schema import lessons

    store = Store(url)
    store.upgrade()
    svc = Cairn(store, Settings())
    p = local_principal()
    svc.ensure_tenant(p)
    scopes = ["global", "project::cairn", *(f"repo::acme/svc-{n}" for n in range(20))]

    def state(i: int, value: str) -> dict[str, Any]:
        return {
            "scope": scopes[i % len(scopes)], "key": f"lesson-{i}", "value": value,
            "tags": json.dumps(["ci"] if i % 3 == 0 else []), "kind": "lesson", "source_agent": "bench",
            "trigger": None, "origin": "agent", "author": p.actor, "url": None, "trust": "candidate",
            "seen_count": 1, "helped_count": 0, "not_helped_count": 0, "valid_from": None, "valid_to": None,
            "expires_at": None, "archived_at": None, "superseded_by": None, "content_hash": content_hash(value),
        }  # fmt: skip

    t0 = time.perf_counter()
    for start in range(0, size, BATCH):
        changes = [
            Change(None, state(i, f"Lesson {i}: retry the flaky step {i % 97} with backoff before failing."), "create")
            for i in range(start, min(size, start + BATCH))
        ]
        store.run(lambda conn, ch=changes: apply_many(conn, p, ch, utcnow()), write=True, **p.db_vars)
    created = time.perf_counter() - t0
    say(f"  created {size:,} lessons in {created:.0f} s")

    t1 = time.perf_counter()
    edit_ids = list(range(0, size, 5))
    for start in range(0, len(edit_ids), BATCH):
        part = edit_ids[start : start + BATCH]

        def edit(conn: Any, part: list[int] = part) -> None:
            keys = [f"lesson-{i}" for i in part]
            rows = conn.execute(select(lessons).where(lessons.c.tenant_id == p.tenant_id, lessons.c.key.in_(keys)))
            changes = []
            for r in rows.mappings():
                before = dict(r)
                value = before["value"] + " Then check the lock file."
                changes.append(Change(before, dict(before, value=value, content_hash=content_hash(value)), "update"))
            apply_many(conn, p, changes, utcnow())

        store.run(edit, write=True, **p.db_vars)
    edited = time.perf_counter() - t1
    t2 = time.perf_counter()
    for i in range(1, min(size, 1000), 2):  # 500 forgets: tombstones with their ledger rows
        svc.forget(p, scopes[i % len(scopes)], f"lesson-{i}", "bench: wrong")
    forgot = time.perf_counter() - t2
    say(f"  edited {len(edit_ids):,} in {edited:.0f} s, forgot 500 in {forgot:.0f} s")
    return svc, p, {"create_s": created, "edit_s": edited, "forget_s": forgot}


def measure(svc: Any, p: Any, runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, full in (("fast", False), ("full", True)):
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            result = svc.audit_verify(p, full=full)
            times.append(time.perf_counter() - t)
        out[name] = {"best_s": round(min(times), 2), "runs_s": [round(x, 2) for x in times]}
        out[name]["checked"] = result["checked"]
        out[name]["state"] = result["state"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL")
    ap.add_argument("--no-sqlite", action="store_true")
    args = ap.parse_args(argv)
    results: dict[str, Any] = {"size": args.size}
    with tempfile.TemporaryDirectory(prefix="cairn-audit-bench-") as tmp:
        work = Path(tmp)
        if not args.no_sqlite:
            say(f"sqlite: {args.size:,} lessons")
            svc, p, built = build(f"sqlite:///{work / 'cairn.db'}", args.size)
            results["sqlite"] = {**built, **measure(svc, p, args.runs)}
            say(f"  {json.dumps(results['sqlite'])}")
            svc.store.dispose()
        if args.postgres:
            from tests.pg_server import start_throwaway_postgres

            server = start_throwaway_postgres(work / "pg")
            try:
                say(f"postgres {server.server_version}: {args.size:,} lessons")
                svc, p, built = build(server.create_database("cairn_bench"), args.size)
                results["postgres"] = {**built, **measure(svc, p, args.runs)}
                say(f"  {json.dumps(results['postgres'])}")
                svc.store.dispose()
            finally:
                server.stop()
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
