"""Hybrid search with and without the full-text arm's best-first read, alternated in one process.

    CAIRN_EMBED_THREADS=1 .venv/bin/python bench/search_fts_ab.py [--size 100000] [--rounds 3]

On ``search_bench``'s synthetic store of that size (built and cached by ``build_synthetic``), each of
``measure_search``'s queries runs in ``hybrid`` twice per round, once as shipped and once with
``search_index._fts_best_first`` switched off (the joined query answers), in alternating order so the
machine's load falls on both alike. Prints CPU (process time) and wall p50 per variant.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_bench  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    search_bench.clean_env()
    home = search_bench.build_synthetic((args.size,))[args.size]
    from cairn.store import search_index as ix

    shipped = ix._fts_best_first
    svc, p = search_bench.open_service(home)
    qs = search_bench.queries()
    for q, o in qs[:5]:
        svc.search(p, q, mode="hybrid", **o)
    res: dict[str, tuple[list[float], list[float]]] = {"best-first": ([], []), "joined": ([], [])}
    load = os.getloadavg()[0]
    for rnd in range(args.rounds):
        for n, (q, o) in enumerate(qs):
            for arm in ["best-first", "joined"] if (n + rnd) % 2 == 0 else ["joined", "best-first"]:
                ix._fts_best_first = shipped if arm == "best-first" else (lambda *a, **k: None)
                t0, c0 = time.perf_counter(), time.process_time()
                svc.search(p, q, mode="hybrid", **o)
                res[arm][0].append(time.perf_counter() - t0)
                res[arm][1].append(time.process_time() - c0)
    ix._fts_best_first = shipped
    for arm, (wall, cpu) in res.items():
        print(
            f"{arm}: hybrid CPU p50 {statistics.median(cpu) * 1e3:.1f} ms (mean {statistics.mean(cpu) * 1e3:.1f}), "
            f"wall p50 {statistics.median(wall) * 1e3:.1f} ms"
        )
    print(f"load {load:.1f} -> {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
