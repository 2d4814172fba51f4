"""Retrieval eval: recall@1, recall@3, MRR@10 and abstention, per arm, at 0 and 5,000 distractors.

    python evals/run_eval.py                 # the table (dev and test halves), evals/out/eval.json
    python evals/run_eval.py --calibrate     # also sweep the recall floor on the dev half

Runs the real service on a throwaway SQLite store: lessons go in through ``import`` (plain records),
queries go through ``search`` (questions) and ``recall`` (error texts, which are distilled first), in
three modes: full text only, vector only, hybrid. Abstention is measured with ``recall`` at its
shipped floor on the no-answer queries; "answered" is the share of answerable queries where recall
returns the right lesson above that floor — the other side of the same trade-off.

Tuning discipline: constants in ``cairn/service/search.py`` were chosen on the dev half only
(``--calibrate`` prints the sweep); the test half is reported, never tuned on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evals"))
sys.path.insert(0, str(ROOT / "src"))

from distractors import generate  # noqa: E402

from cairn.core.principal import local_principal  # noqa: E402
from cairn.service.api import Cairn  # noqa: E402
from cairn.service.search import RECALL_FLOOR  # noqa: E402
from cairn.store.engine import Store, sqlite_url  # noqa: E402

DATA = ROOT / "evals" / "data"
OUT = ROOT / "evals" / "out"
MODES = ("fts", "vector", "hybrid")


def load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def build_store(lessons: list[dict[str, Any]], n_distractors: int, seed: int) -> tuple[Cairn, Any, dict[str, tuple]]:
    home = Path(tempfile.mkdtemp(prefix="cairn-eval-"))
    svc = Cairn(Store(sqlite_url(home)))
    p = local_principal()
    svc.ensure_tenant(p)
    addr = {}
    records = []
    taken = set()
    for lesson in lessons:
        records.append(
            {k: lesson[k] for k in ("scope", "key", "value") if k in lesson} | {"tags": lesson.get("tags", [])}
        )
    for d in generate(n_distractors, seed=seed) if n_distractors else []:
        records.append({"scope": d["scope"], "key": d["key"] + "-d", "value": d["value"], "tags": d.get("tags", [])})
    result = svc.import_lines(p, [json.dumps(r) for r in records])
    if result["refused"]:
        raise SystemExit(f"eval store refused records: {result['refused'][:3]}")
    from cairn.core.keys import normalize_key
    from cairn.core.scope import validate_scope

    for lesson in lessons:
        a = (validate_scope(lesson["scope"]), normalize_key(lesson["key"]))
        if a in taken:
            raise SystemExit(f"two labelled lessons share the address {a}")
        taken.add(a)
        addr[lesson["id"]] = a
    t = time.perf_counter()
    svc.drain_embeddings(p)
    print(f"  store: {len(records)} lessons, embedded in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    return svc, p, addr


def ranked(svc: Cairn, p: Any, q: dict[str, Any], mode: str) -> list[tuple[str, str]]:
    if q["type"] == "error":
        hits = svc.recall(p, q["text"], floor=-10.0, limit=20, mode=mode)["lessons"]
    else:
        hits = svc.search(p, q["text"], limit=10, mode=mode)["results"]
    return [(h["scope"], h["key"]) for h in hits]


def recalled(svc: Cairn, p: Any, q: dict[str, Any], mode: str, floor: float | None) -> list[dict[str, Any]]:
    return svc.recall(p, q["text"], floor=floor, mode=mode)["lessons"]


def metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    answerable = [r for r in rows if r["relevant"]]
    noanswer = [r for r in rows if not r["relevant"]]
    out: dict[str, float] = {"n": len(answerable), "n_noanswer": len(noanswer)}
    if answerable:
        out["recall@1"] = statistics.mean(1.0 if r["rank"] == 1 else 0.0 for r in answerable)
        out["recall@3"] = statistics.mean(1.0 if r["rank"] and r["rank"] <= 3 else 0.0 for r in answerable)
        out["mrr@10"] = statistics.mean(1.0 / r["rank"] if r["rank"] and r["rank"] <= 10 else 0.0 for r in answerable)
        out["answered"] = statistics.mean(1.0 if r["recall_hit"] else 0.0 for r in answerable)
    if noanswer:
        out["abstention"] = statistics.mean(1.0 if r["abstained"] else 0.0 for r in noanswer)
    return out


def evaluate(
    svc: Cairn, p: Any, addr: dict[str, tuple], queries: list[dict[str, Any]], mode: str, floor: float | None
) -> list[dict[str, Any]]:
    rows = []
    for q in queries:
        rel = {addr[i] for i in q["relevant"]}
        rank = None
        if rel:
            order = ranked(svc, p, q, mode)
            rank = next((n for n, a in enumerate(order, start=1) if a in rel), None)
        got = recalled(svc, p, q, mode, floor)
        rows.append(
            {
                "id": q["id"],
                "type": q["type"],
                "split": q["split"],
                "relevant": sorted(rel),
                "rank": rank,
                "recall_hit": any((h["scope"], h["key"]) in rel for h in got),
                "abstained": not got,
                "top_relevance": got[0]["relevance"] if got else None,
                "low_overlap": q.get("low_overlap", False),
                "paraphrase": q.get("paraphrase", False),
            }
        )
    return rows


def calibrate(svc: Cairn, p: Any, addr: dict[str, tuple], queries: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Sweep the hybrid floor on the dev half: balanced accuracy of answering vs abstaining."""
    dev = [q for q in queries if q["split"] == "dev"]
    scored = []
    for q in dev:
        rel = {addr[i] for i in q["relevant"]}
        hits = svc.recall(p, q["text"], floor=-10.0, limit=3, mode="hybrid")["lessons"]
        scored.append((rel, [((h["scope"], h["key"]), h["relevance"]) for h in hits]))
    sweep = []
    for step in range(20, 76):
        floor = step / 100
        ans = [any(a in rel and r >= floor for a, r in hits) for rel, hits in scored if rel]
        abst = [not any(r >= floor for _, r in hits) for rel, hits in scored if not rel]
        a, b = statistics.mean(ans), statistics.mean(abst)
        sweep.append({"floor": floor, "answered": a, "abstention": b, "balanced": (a + b) / 2})
    return sweep


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--distractors", type=int, nargs="*", default=[0, 5000])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a constant of cairn.service.search for a tuning experiment (dev half only!)",
    )
    ap.add_argument("--modes", nargs="*", default=list(MODES))
    args = ap.parse_args()
    import cairn.service.search as search_module

    for item in args.set:
        name, value = item.split("=", 1)
        setattr(search_module, name, eval(value, {}))  # noqa: S307 - a developer's own tuning input
        print(f"  override {name} = {value}", file=sys.stderr)
    lessons, queries = load("lessons.jsonl"), load("queries.jsonl")
    report: dict[str, Any] = {
        "floor": search_module.RECALL_FLOOR,
        "overrides": args.set,
        "lessons": len(lessons),
        "queries": len(queries),
        "runs": [],
    }
    header = (
        f"{'distr':>6} {'mode':<7} {'split':<5} {'n':>4} {'R@1':>6} {'R@3':>6} {'MRR@10':>7} "
        f"{'answered':>9} {'abstain':>8}"
    )
    lines = [header, "-" * len(header)]
    for n in args.distractors:
        print(f"building store with {n} distractors…", file=sys.stderr)
        svc, p, addr = build_store(lessons, n, args.seed)
        if args.calibrate:
            sweep = calibrate(svc, p, addr, queries)
            best = max(sweep, key=lambda s: (s["balanced"], -abs(s["floor"] - RECALL_FLOOR)))
            report.setdefault("calibration", {})[str(n)] = {"sweep": sweep, "best": best}
            print(
                f"  dev sweep at {n} distractors: best floor {best['floor']:.2f} "
                f"(answered {best['answered']:.3f}, abstention {best['abstention']:.3f})",
                file=sys.stderr,
            )
        for mode in args.modes:
            t = time.perf_counter()
            rows = evaluate(svc, p, addr, queries, mode, None)
            elapsed = time.perf_counter() - t
            for split in ("dev", "test"):
                m = metrics([r for r in rows if r["split"] == split])
                by_type = {
                    kind: metrics([r for r in rows if r["split"] == split and r["type"] == kind])
                    for kind in ("error", "question")
                }
                hard = {
                    "error_low_overlap": metrics([r for r in rows if r["split"] == split and r["low_overlap"]]),
                    "question_paraphrase": metrics([r for r in rows if r["split"] == split and r["paraphrase"]]),
                }
                report["runs"].append(
                    {
                        "distractors": n,
                        "mode": mode,
                        "split": split,
                        **m,
                        "by_type": by_type,
                        "hard": hard,
                        "seconds": round(elapsed, 2),
                    }
                )
                lines.append(
                    f"{n:>6} {mode:<7} {split:<5} {m['n']:>4.0f} "
                    f"{m.get('recall@1', 0):>6.3f} {m.get('recall@3', 0):>6.3f} "
                    f"{m.get('mrr@10', 0):>7.3f} {m.get('answered', 0):>9.3f} {m.get('abstention', 0):>8.3f}"
                )
            report["runs"][-1]["rows"] = rows
    print("\n".join(lines))
    print(
        f"recall floor {search_module.RECALL_FLOOR} (relevance = cosine + margin over the next candidates); "
        "'answered' = right lesson returned by recall"
    )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "eval.json").write_text(json.dumps(report, indent=1))
    print(f"wrote {OUT / 'eval.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
