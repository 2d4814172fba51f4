"""What the paraphrase check of tombstones costs: forget, and a write in a tenant with N tombstones.

    .venv/bin/python bench/tombstone_bench.py            # SQLite in a temporary directory, ~1 minute
    .venv/bin/python bench/tombstone_bench.py --quick    # fewer writes, smaller N

Sections (each a fresh store, the shipped model, warm after its first load):

* model load: the first embedding in a process (what a cold ``cairn forget`` or the first write of
  a tenant with tombstones pays once per process);
* forget: ``Cairn.forget`` of distinct lessons, the forgotten text embedded inside the transaction;
* write at N tombstones: ``Cairn.write`` of distinct new lessons while the tenant has N tombstone
  vectors (N = 0 skips the check: one count query); the vectors are random unit vectors inserted
  directly (as many forgets would leave, without spending minutes making them), so no write is held
  and the figure is the lookup itself: one embedding and a matrix product;
* first write after a forget at the largest N: the tenant's matrix is reloaded (the cache is keyed
  by the deletion epoch every forget bumps).

Prints a table and writes ``bench/out/tombstone.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _ms(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"median_ms": round(statistics.median(xs) * 1000, 2), "p95_ms": round(xs[int(len(xs) * 0.95) - 1] * 1000, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    writes = 40 if args.quick else 150
    sizes = (0, 1_000, 5_000) if args.quick else (0, 1_000, 10_000)

    import numpy as np

    from cairn.core.timeparse import utcnow
    from cairn.runtime.local import local_principal
    from cairn.runtime.settings import Settings
    from cairn.search.embed import get_embedder, vector_to_blob
    from cairn.service.api import Cairn
    from cairn.store.engine import Store, sqlite_url
    from cairn.store.schema import tombstone_vectors

    out: dict[str, object] = {}
    t = time.perf_counter()
    embedder = get_embedder()
    embedder.embed(["warm up"])
    out["model_load_ms"] = round((time.perf_counter() - t) * 1000, 1)

    def fresh(tmp: str) -> tuple[Cairn, object]:
        store = Store(sqlite_url(Path(tmp)))
        store.ensure_schema()
        svc = Cairn(store, Settings())
        me = local_principal()
        svc.ensure_tenant(me)
        return svc, me

    with tempfile.TemporaryDirectory() as tmp:
        svc, me = fresh(tmp)
        for i in range(writes):
            svc.write(me, "global", f"f-{i}", f"Lesson number {i} about the build cache and flag {i * 7}.")
        took = []
        for i in range(writes):
            t = time.perf_counter()
            svc.forget(me, "global", f"f-{i}", "wrong")
            took.append(time.perf_counter() - t)
        out["forget"] = _ms(took)

    rng = np.random.default_rng(7)
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            svc, me = fresh(tmp)
            if n:
                vectors = rng.standard_normal((n, embedder.dim)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                now = utcnow()
                rows = [
                    {"tombstone_id": 1_000_000 + i, "tenant_id": me.tenant_id, "model": embedder.name,
                     "dim": embedder.dim, "vector": vector_to_blob(v), "created_at": now}
                    for i, v in enumerate(vectors)
                ]  # fmt: skip
                svc.store.run(
                    lambda c, rows=rows: c.execute(tombstone_vectors.insert(), rows), write=True, tenant=me.tenant_id
                )
            took = []
            for i in range(writes):
                t = time.perf_counter()
                svc.write(me, "global", f"w-{i}", f"Write {i}: rebuild the docker layer after lockfile change {i}.")
                took.append(time.perf_counter() - t)
            out[f"write_at_{n}"] = _ms(took[1:])  # the first write loads the matrix: below
            out[f"first_write_at_{n}_ms"] = round(took[0] * 1000, 2)

    print(f"{'section':<34} {'median ms':>10} {'p95 ms':>10}")
    print(f"{'model load (once per process)':<34} {out['model_load_ms']:>10}")
    for key, value in out.items():
        if isinstance(value, dict):
            print(f"{key:<34} {value['median_ms']:>10} {value['p95_ms']:>10}")
        elif key.startswith("first_write"):
            print(f"{key + ' (matrix load)':<34} {value:>10}")
    dest = ROOT / "bench" / "out"
    dest.mkdir(exist_ok=True)
    (dest / "tombstone.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
