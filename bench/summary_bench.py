"""Every speed target in one table, each figure beside its target and LoreKit's: ``make bench``.

    .venv/bin/python bench/summary_bench.py            # minutes with its stores cached; building them is the long part
    .venv/bin/python bench/summary_bench.py --quick    # small stores, projections marked

Each row comes from the bench that owns the measurement, called as a function (nothing is re-timed
here): ``daemon_bench.measure`` (every command end to end with and without the daemon, LoreKit's CLI
timed alternately where it has the operation), ``context_bench.measure_warm`` (session start, recall
and the first context block after a write through a warm ``cairn serve``, its RSS),
``search_bench.measure_search`` (hybrid search in process on a store of random vectors),
``embed_bench.model_throughput`` / ``import_until_searchable`` and ``store_bench.bench_service`` /
``bench_service_many`` (audited writes in process, one at a time and through the batch path).

Sizes (full / quick): context stores of 60,000 / 6,000 lessons (``bench/context_gen.py``, cached);
LoreKit side by side on a 6,000-lesson store in both; hybrid search at 100,000 / 10,000 synthetic
lessons (cached); ``--big SIZE`` adds the context-after-change row at a larger cached store (the
1,000,000 target; building that store is the long part, bench/README.md). An import of 5,000 / 2,000 lessons until
searchable, projected linearly to 60,000 (marked "projected"). A figure measured at a smaller size
than its target's is marked with the size it was measured at.

Prints the table (and the previous run's figures beside it), writes ``bench/out/summary.json`` and
``bench/out/summary.png`` (each figure as a share of its target).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import context_bench  # noqa: E402
import context_gen  # noqa: E402
import daemon_bench  # noqa: E402
import runs  # noqa: E402
import search_bench  # noqa: E402
import store_bench  # noqa: E402

OUT = ROOT / "bench" / "out" / "summary.json"
PLOT = ROOT / "bench" / "out" / "summary.png"
DAEMON_OPS = ["write", "read", "list", "search", "hook session-start"]


def say(msg: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def row(
    what: str, figure: float | None, unit: str, target: float, *, higher: bool = False, **extra: Any
) -> dict[str, Any]:
    """One line of the table: ``met`` when the figure is on the right side of its target."""
    met = None if figure is None else (figure >= target if higher else figure <= target)
    return {"what": what, "figure": figure, "unit": unit, "target": target, "higher": higher, "met": met,
            "load": round(os.getloadavg()[0], 1), **extra}  # fmt: skip


def daemon_rows(store: Path, size: int, runs_: int, cold_runs: int) -> list[dict[str, Any]]:
    say(f"every command with and without the daemon at {size:,} lessons (LoreKit beside it)")
    result = daemon_bench.measure(store, size, runs_, cold_runs, True, DAEMON_OPS)
    out = []
    for r in result["rows"]:  # type: ignore[attr-defined]
        name = "hooks (session start)" if r["op"] == "hook session-start" else f"`{r['op']}`"
        cpu = f"CPU: client {r.get('daemon_client_cpu_ms')} + daemon {r.get('daemon_cpu_ms')} ms"
        out.append(row(f"{name}, daemon, p50 end to end", r["daemon_p50_ms"], "ms", 100, at=size,
                       lorekit=r["lorekit_p50_ms"], note=cpu))  # fmt: skip
        if r["op"] == "hook session-start":
            out.append(row("session start without a daemon, p50", r["no_daemon_p50_ms"], "ms", 500, at=size,
                           lorekit=r["lorekit_p50_ms"], note=f"CPU {r.get('no_daemon_cpu_ms')} ms"))  # fmt: skip
    return out


def lorekit_rows(store: Path, size: int, cold_runs: int) -> list[dict[str, Any]]:
    say(f"session start without a daemon against LoreKit's hook at {size:,} lessons")
    result = daemon_bench.measure(store, size, 1, cold_runs, True, ["hook session-start"])
    r = result["rows"][0]  # type: ignore[index]
    peer = r["lorekit_p50_ms"]
    note = f"CPU {r.get('no_daemon_cpu_ms')} ms, LoreKit's {r.get('lorekit_cpu_ms')} ms"
    return [row("session start without a daemon vs LoreKit's hook, p50", r["no_daemon_p50_ms"], "ms",
                peer if peer is not None else float("nan"), at=size, lorekit=peer,
                note=note if peer is not None else "LoreKit's CLI absent")]  # fmt: skip


def context_rows(size: int, runs_: int, big: bool = False) -> list[dict[str, Any]]:
    meta = context_gen.build_store(size)
    home = context_gen.store_home(size)
    say(f"context, recall and the first context after a write, daemon warm, {meta.get('lessons', size):,} lessons")
    base, _ = context_bench.launcher()
    log = OUT.parent / "summary-serve.log"
    # The big row reports context only: a recall there would load every vector into the daemon
    # (float16, ~770 MB at a million) and time nothing this row shows.
    ops = ("context",) if big else ("context", "recall")
    warm = context_bench.measure_warm(size, home, runs_, base, log, ops)
    after = warm.get(context_bench.AFTER_WRITE, {})
    target = 300 if big else 150
    repeat = warm.get("context", {}).get("p50_ms")
    note = f"the same block repeated without a change: p50 {repeat} ms"
    if after.get("daemon_cpu_p50_ms") is not None:
        note += f"; CPU p50: client {after.get('client_cpu_p50_ms')} + daemon {after['daemon_cpu_p50_ms']} ms"
    if big:
        rss = warm.get("daemon_rss_mb") or {}
        note += f"; daemon RSS after the runs {rss.get('VmRSS')} MB (peak {rss.get('VmHWM')} MB)"
    out = [row("first context block after a change, daemon warm, p50 end to end", after.get("p50_ms"), "ms", target,
               at=size, note=note)]  # fmt: skip
    if not big:
        out.append(row("recall, daemon warm, p50 end to end", warm.get("recall", {}).get("p50_ms"), "ms", 150, at=size))
        rss = warm.get("daemon_rss_mb") or {}
        out.append(row("`cairn serve` RSS after the runs", rss.get("VmRSS"), "MB", 400, at=size))
    return out


def search_rows(size: int) -> list[dict[str, Any]]:
    say(f"hybrid search in process at {size:,} lessons (random vectors)")
    search_bench.clean_env()
    home = search_bench.build_synthetic((size,))[size]
    s = search_bench.measure_search(home)
    return [row("hybrid search in process, p50", s["hybrid"]["p50_ms"], "ms", 30, at=size,
                note=f"CPU p50 {s['hybrid']['cpu_p50_ms']} ms")]  # fmt: skip


def embed_rows(n_import: int, full_size: int = 60_000) -> list[dict[str, Any]]:
    import backends_bench
    import embed_bench

    from cairn.search import embed as E
    from cairn.service.embeddings import embed_text

    say("embedding throughput (the model alone) and an import until searchable")
    emb = E.get_embedder()
    plain, _ = next(backends_bench.lesson_chunks(1000))
    texts = [embed_text({"key": r["key"], "value": r["value"]}) for r in plain]
    best = max((embed_bench.model_throughput(emb, texts, bs, 1) for bs in embed_bench.BATCH_SIZES),
               key=lambda m: m["per_s"])  # fmt: skip
    out = [row("embedding throughput, best batch size", best["per_s"], "lessons/s", 400, higher=True,
               note=f"batch {best['batch_size']}, {best['per_cpu_s']} per CPU-second")]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="cairn-summary-import-") as tmp:
        imported = embed_bench.import_until_searchable(n_import, Path(tmp))
    seconds = imported["searchable_s"] * full_size / imported["lessons"]
    note = f"{imported['lessons']:,} lessons searchable in {imported['searchable_s']} s"
    if imported["lessons"] != full_size:
        note += f"; projected linearly to {full_size:,}"
    out.append(row(f"`cairn import` of {full_size:,} until searchable by meaning", round(seconds / 60, 2), "min", 3,
                   at=imported["lessons"], note=note))  # fmt: skip
    return out


def write_rows(n: int, cap_s: float) -> list[dict[str, Any]]:
    say(f"audited writes in process: {n:,} one at a time, then {n * 5:,} through write_many")
    with tempfile.TemporaryDirectory(prefix="cairn-summary-writes-") as tmp:
        single = store_bench.bench_service(Path(tmp), n, cap_s)["create"]
        many = store_bench.bench_service_many(Path(tmp), n * 5)
    return [
        row("audited writes in process, one transaction each", single["per_sec"], "writes/s", 1000, higher=True,
            note=f"{single['per_cpu_sec']} per CPU-second"),
        row("audited writes in process, `write_many` (batch path)", many["per_sec"], "writes/s", 1000, higher=True,
            note=f"{many['per_cpu_sec']} per CPU-second"),
    ]  # fmt: skip


def fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return f"{v:,.1f}" if isinstance(v, float) and v < 100 else f"{v:,.0f}" if isinstance(v, float) else f"{v:,}"


def report(result: dict[str, Any], previous: dict[str, Any] | None) -> str:
    before = {(r["what"], r.get("at")): r for r in (previous or {}).get("rows", [])}  # same figure, same size
    lines = [
        f"\nCairn against its speed targets ({'quick' if result['quick'] else 'full'} run, {result['at']}, "
        f"load {result['load_start']} → {result['load_end']}, {result['minutes']} min)\n",
        "| what | at | Cairn | target | met | LoreKit | previous | load | note |",
        "|---|---:|---:|---|---|---:|---:|---:|---|",
    ]
    for r in result["rows"]:
        sign = "≥" if r["higher"] else "≤"
        lorekit_target = r["what"].endswith("LoreKit's hook, p50")
        target = "< LoreKit" if lorekit_target else f"{sign} {fmt(r['target'])} {r['unit']}"
        met = {True: "yes", False: "NO", None: ""}[r["met"]]
        prev = before.get((r["what"], r.get("at")), {}).get("figure")
        lines.append(
            f"| {r['what']} | {fmt(r.get('at'))} | {fmt(r['figure'])} {r['unit'] if r['figure'] is not None else ''} "
            f"| {target} | {met} | {fmt(r.get('lorekit'))} | {fmt(prev)} | {r['load']} "
            f"| {r.get('note', '')} |"
        )
    return "\n".join(lines)


def plot(result: dict[str, Any]) -> None:
    try:
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in result["rows"] if r["figure"] is not None and r["target"] == r["target"] and r["target"]]
    ratios = [(r["target"] / r["figure"]) if r["higher"] else (r["figure"] / r["target"]) for r in shown]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(shown) + 1.2))
    colors = ["tab:green" if x <= 1 else "tab:red" for x in ratios]
    ax.barh(range(len(shown)), ratios, color=colors)
    ax.axvline(1, color="black", linewidth=1)
    ax.set_yticks(range(len(shown)), [r["what"].replace("`", "") for r in shown], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("share of the target (left of 1: met)")
    ax.set_title(f"Cairn against its speed targets ({result['at']}, load {result['load_start']})")
    fig.tight_layout()
    fig.savefig(PLOT, dpi=100)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small stores; projections are marked")
    ap.add_argument("--big", type=int, help="also the first context after a change at this cached store size")
    ap.add_argument("--skip", default="", help="comma-separated sections to leave out: " + ", ".join(
        ("writes", "daemon", "lorekit", "context", "search", "embed", "big")))  # fmt: skip
    args = ap.parse_args(argv)
    q = args.quick
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    size = 6_000 if q else 60_000
    started, load_start = time.perf_counter(), round(os.getloadavg()[0], 1)
    sections: list[tuple[str, Callable[[], list[dict[str, Any]]]]] = [
        ("writes", lambda: write_rows(300 if q else 2000, 8 if q else 30)),
        ("daemon", lambda: daemon_rows(context_gen.store_home(size), size, 5 if q else 9, 3)),
        ("lorekit", lambda: lorekit_rows(context_gen.store_home(6_000), 6_000, 3 if q else 5)),
        ("context", lambda: context_rows(size, 10 if q else 20)),
        ("search", lambda: search_rows(10_000 if q else 100_000)),
        ("embed", lambda: embed_rows(2_000 if q else 5_000)),
    ]
    if args.big:
        sections.append(("big", lambda: context_rows(args.big, 10, big=True)))
    for size_needed in {size, 6_000}:  # the stores the daemon and LoreKit rows copy
        if not ({"daemon", "lorekit", "context"} <= skip):
            context_gen.build_store(size_needed)
    rows: list[dict[str, Any]] = []
    for name, fn in sections:
        if name in skip:
            continue
        t0 = time.perf_counter()
        rows.extend(fn())
        say(f"{name}: {time.perf_counter() - t0:.0f} s")
    result = {
        "bench": "summary",
        "quick": q,
        "at": datetime.now(UTC).isoformat(timespec="minutes"),
        "minutes": round((time.perf_counter() - started) / 60, 1),
        "load_start": load_start,
        "load_end": round(os.getloadavg()[0], 1),
        "cpus": os.cpu_count(),
        "commit": store_bench.environment().get("commit"),
        "rows": rows,
        "met": sum(1 for r in rows if r["met"]),
        "measured": sum(1 for r in rows if r["met"] is not None),
        "median_load": statistics.median(r["load"] for r in rows) if rows else None,
    }
    runs.keep(OUT, result, report, say)
    plot(result)
    say(f"wrote {PLOT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
