"""Fit and check the thresholds of ``cairn.core.similarity`` on the labelled pair sets.

    python evals/similarity/calibrate.py            # fit on dev, report dev and test, write calibration.json
    python evals/similarity/calibrate.py --check    # also exit 1 if the module's constants differ from the fit

Pairs are embedded with Cairn's shipped embedder (``cairn.search.embed.get_embedder``), through the
same text -> vector cache as ``evals/run_eval.py`` (``evals/out/embed-cache.sqlite``). Each check is
swept over a grid of thresholds on the **dev** halves only, with the module's own rule functions (the
sweep sets the module constants, then calls ``is_near_duplicate`` / ``is_contradiction`` /
``is_tombstone_paraphrase``); the chosen point is then reported on dev and test.

Operating points (why each is chosen the way it is):

* **merge** — a wrong merge archives a real lesson. Among the grid points whose dev precision is at
  least ``MERGE_MIN_PRECISION``, take the one with the most dev recall; ties go to the higher
  thresholds (fewer merges).
* **contradiction** — a flag costs a reviewer a look, a miss leaves two disagreeing lessons side by
  side. Most dev recall among the points with dev precision >= ``CONTRADICTION_MIN_PRECISION``;
  ties to the higher threshold.
* **paraphrase** (tombstones) — a miss lets forgotten content back into every read; a false hold
  costs a reviewer's click. The highest threshold that still holds ``PARAPHRASE_MIN_RECALL`` of the
  dev paraphrases (fewest false holds at that recall).

Labels: in ``merge_pairs.jsonl`` a pair is a duplicate iff ``label == "duplicate"`` and a
contradiction iff its label is one of ``CONTRADICTION_LABELS``; in ``tombstone_pairs.jsonl`` a pair
should be held iff ``label == "paraphrase"`` (``negated``, ``related`` and ``unrelated`` should not).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "evals"))

import numpy as np  # noqa: E402
from run_eval import OUT, CachedEmbedder  # noqa: E402

from cairn.core import similarity as sim  # noqa: E402
from cairn.search.embed import get_embedder  # noqa: E402

MERGE_MIN_PRECISION = 1.0
CONTRADICTION_MIN_PRECISION = 0.80
PARAPHRASE_MIN_RECALL = 0.95
CONTRADICTION_LABELS = frozenset({"negation", "antonym", "number", "preference", "order"})

COSINES = [round(0.5 + i / 100, 2) for i in range(49)]
OVERLAPS = [round(i / 20, 2) for i in range(13)]


@dataclass(frozen=True)
class Pair:
    id: str
    label: str
    a: str
    b: str
    split: str
    cosine: float


def load(path: Path, a: str, b: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for r in rows:
        r["a"], r["b"] = r.pop(a), r.pop(b)
    return rows


def embed_pairs(rows: list[dict[str, Any]], embedder: Any) -> list[Pair]:
    texts = sorted({t for r in rows for t in (r["a"], r["b"])})
    vectors = dict(zip(texts, embedder.embed(texts), strict=True))
    return [
        Pair(r["id"], r["label"], r["a"], r["b"], r["split"], float(np.dot(vectors[r["a"]], vectors[r["b"]])))
        for r in rows
    ]


@dataclass(frozen=True)
class Score:
    n: int
    positives: int
    tp: int
    fp: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / self.positives if self.positives else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "positives": self.positives,
            "tp": self.tp,
            "fp": self.fp,
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
        }


def score(pairs: Iterable[Pair], truth: Callable[[Pair], bool], rule: Callable[[Pair], bool]) -> Score:
    n = positives = tp = fp = 0
    for p in pairs:
        n += 1
        want, got = bool(truth(p)), bool(rule(p))
        positives += want
        tp += want and got
        fp += got and not want
    return Score(n, positives, tp, fp)


def with_constants(**values: float) -> None:
    for name, value in values.items():
        setattr(sim, name, value)


def split(pairs: list[Pair], half: str) -> list[Pair]:
    return [p for p in pairs if p.split == half]


def is_dup(p: Pair) -> bool:
    return p.label == "duplicate"


def is_contra(p: Pair) -> bool:
    return p.label in CONTRADICTION_LABELS


def is_para(p: Pair) -> bool:
    return p.label == "paraphrase"


def merge_rule(p: Pair) -> bool:
    return sim.is_near_duplicate(p.a, p.b, p.cosine)


def contradiction_rule(p: Pair) -> bool:
    return sim.is_contradiction(p.a, p.b, p.cosine)


def paraphrase_rule(p: Pair) -> bool:
    # The candidate write is b (``candidate``), the forgotten text a (``forgotten``).
    return sim.is_tombstone_paraphrase(p.b, p.a, p.cosine)


def fit_merge(dev: list[Pair]) -> dict[str, float]:
    best: tuple[float, float, float, float] | None = None
    for cos in COSINES:
        for ov in OVERLAPS:
            with_constants(MERGE_COSINE=cos, MERGE_OVERLAP=ov)
            s = score(dev, is_dup, merge_rule)
            if s.precision < MERGE_MIN_PRECISION:
                continue
            key = (s.recall, s.precision, cos, ov)
            if best is None or key > best:
                best = key
    if best is None:
        raise SystemExit(f"no merge threshold reaches precision {MERGE_MIN_PRECISION} on dev")
    return {"MERGE_COSINE": best[2], "MERGE_OVERLAP": best[3]}


def fit_contradiction(dev: list[Pair]) -> dict[str, float]:
    best: tuple[float, float, float] | None = None
    for cos in COSINES:
        with_constants(CONTRADICTION_COSINE=cos)
        s = score(dev, is_contra, contradiction_rule)
        if s.precision < CONTRADICTION_MIN_PRECISION:
            continue
        key = (s.recall, s.precision, cos)
        if best is None or key > best:
            best = key
    if best is None:
        raise SystemExit(f"no contradiction threshold reaches precision {CONTRADICTION_MIN_PRECISION} on dev")
    return {"CONTRADICTION_COSINE": best[2]}


def fit_paraphrase(dev: list[Pair]) -> dict[str, float]:
    recall = {}
    for cos in COSINES:
        with_constants(PARAPHRASE_COSINE=cos)
        recall[cos] = score(dev, is_para, paraphrase_rule).recall
    # The recall target, or the most the rule can reach when it cannot reach the target (the text
    # rule may refuse some paraphrases at any cosine); then the highest threshold that gets there.
    target = min(PARAPHRASE_MIN_RECALL, max(recall.values()))
    return {"PARAPHRASE_COSINE": max(cos for cos, r in recall.items() if r >= target)}


def by_label(pairs: list[Pair], rule: Callable[[Pair], bool]) -> dict[str, str]:
    """Per label: how many pairs the rule said yes to, out of how many."""
    out: dict[str, list[int]] = {}
    for p in pairs:
        got = out.setdefault(p.label, [0, 0])
        got[0] += bool(rule(p))
        got[1] += 1
    return {label: f"{yes}/{n}" for label, (yes, n) in out.items()}


def report(pairs: list[Pair], truth: Callable[[Pair], bool], rule: Callable[[Pair], bool]) -> dict:
    out = {}
    for half in ("dev", "test"):
        rows = split(pairs, half)
        out[half] = {
            **score(rows, truth, rule).as_dict(),
            "said_yes_by_label": by_label(rows, rule),
            "wrong": sorted(p.id for p in rows if bool(truth(p)) != bool(rule(p))),
        }
    return out


def merge_curve(dev: list[Pair], overlap: float) -> list[dict[str, Any]]:
    """Dev precision and recall of the merge rule by cosine, at the fitted overlap: the trade-off."""
    out = []
    for cos in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9):
        with_constants(MERGE_COSINE=cos, MERGE_OVERLAP=overlap)
        out.append({"cosine": cos, **score(dev, is_dup, merge_rule).as_dict()})
    return out


def quartiles(pairs: list[Pair]) -> dict[str, list[float]]:
    """Per label, the quartiles of the pairs' cosines (where each kind of pair sits)."""
    out = {}
    for label in sorted({p.label for p in pairs}):
        cos = [p.cosine for p in pairs if p.label == label]
        out[label] = [round(float(q), 3) for q in np.quantile(cos, [0.25, 0.5, 0.75])]
    return out


def cosine_only(threshold_name: str) -> Callable[[Pair], bool]:
    return lambda p: p.cosine >= getattr(sim, threshold_name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the module's constants differ from the fit")
    ap.add_argument("--out", type=Path, default=HERE / "calibration.json")
    args = ap.parse_args()

    shipped = {
        k: getattr(sim, k) for k in ("MERGE_COSINE", "MERGE_OVERLAP", "CONTRADICTION_COSINE", "PARAPHRASE_COSINE")
    }
    embedder = CachedEmbedder(get_embedder(), OUT / "embed-cache.sqlite")
    merge = embed_pairs(load(HERE / "merge_pairs.jsonl", "a", "b"), embedder)
    tomb = embed_pairs(load(HERE / "tombstone_pairs.jsonl", "forgotten", "candidate"), embedder)

    fitted = {
        **fit_merge(split(merge, "dev")),
        **fit_contradiction(split(merge, "dev")),
        **fit_paraphrase(split(tomb, "dev")),
    }
    curve = merge_curve(split(merge, "dev"), fitted["MERGE_OVERLAP"])
    with_constants(**fitted)
    checks = {
        "merge": report(merge, is_dup, merge_rule),
        "merge, cosine alone": report(merge, is_dup, cosine_only("MERGE_COSINE")),
        "contradiction": report(merge, is_contra, contradiction_rule),
        "paraphrase": report(tomb, is_para, paraphrase_rule),
        "paraphrase, cosine alone": report(tomb, is_para, cosine_only("PARAPHRASE_COSINE")),
    }
    result = {
        "model": embedder.name,
        "operating_points": {
            "merge_min_precision": MERGE_MIN_PRECISION,
            "contradiction_min_precision": CONTRADICTION_MIN_PRECISION,
            "paraphrase_min_recall": PARAPHRASE_MIN_RECALL,
        },
        "fitted": fitted,
        "shipped": shipped,
        "checks": checks,
        "merge_dev_curve": curve,
        "cosine_quartiles": {
            name: {
                label: [
                    round(float(q), 3)
                    for q in np.quantile([p.cosine for p in pairs if p.label == label], [0.25, 0.5, 0.75])
                ]
                for label in sorted({p.label for p in pairs})
            }
            for name, pairs in (("merge", merge), ("tombstone", tomb))
        },
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    print("fitted on dev: " + ", ".join(f"{k} = {v}" for k, v in fitted.items()))
    print()
    print("| check | half | n | positives | precision | recall | said yes, by label |")
    print("|---|---|---:|---:|---:|---:|---|")
    for name, halves in checks.items():
        for half, s in halves.items():
            labels = ", ".join(f"{k} {v}" for k, v in s["said_yes_by_label"].items())
            print(
                f"| {name} | {half} | {s['n']} | {s['positives']} | {s['precision']:.3f} "
                f"| {s['recall']:.3f} | {labels} |"
            )
    print(f"\nmerge on dev by cosine (overlap >= {fitted['MERGE_OVERLAP']}):\n")
    print("| cosine | merged | wrong | precision | recall |")
    print("|---:|---:|---:|---:|---:|")
    for row in curve:
        merged = row["tp"] + row["fp"]
        print(f"| {row['cosine']} | {merged} | {row['fp']} | {row['precision']:.3f} | {row['recall']:.3f} |")
    print(f"\nwrote {args.out.relative_to(ROOT)}")
    differ = {k: (shipped[k], v) for k, v in fitted.items() if abs(shipped[k] - v) > 1e-9}
    if differ:
        print("module constants differ from the fit: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in differ.items()))
        return 1 if args.check else 0
    print("module constants match the fit")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
