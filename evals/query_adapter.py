"""A learned diagonal query adapter for the vector arm (an experiment; nothing here is shipped).

    python evals/query_adapter.py      # fit on the dev halves of set1, set2 and conv; report dev and test

A lesson's score becomes ``sum_i w_i q_i d_i`` (the query's dimensions reweighted, the stored vectors
untouched): ``w`` starts at 1 and is fitted by a pairwise logistic loss (each right lesson against the
wrong ones among the query's top 50 by cosine) with an L2 pull back to 1. Vector arm alone, exact scores
over each whole store at 5,000 distractors. Vectors come from ``evals/out/embed-cache.sqlite``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import run_eval as E  # noqa: E402

from cairn.core.ranking import clean_error, error_focus  # noqa: E402
from cairn.search.embed import get_embedder  # noqa: E402
from cairn.service.embeddings import embed_text  # noqa: E402

TEMPERATURE = 20.0
DEPTH = 50


def load() -> list[dict]:
    emb = E.CachedEmbedder(get_embedder(), E.OUT / "embed-cache.sqlite")
    out = []
    for name, spec in E.available_sets().items():
        qs, corpus, ids = E.exact_corpus(name, spec)
        docs = emb.embed([embed_text({"key": x["key"], "value": x["value"]}) for x in corpus], batch_size=16)
        for q in qs:
            if not q["relevant"]:
                continue
            if E.is_error_text(q):
                both = [error_focus(q["text"]), clean_error(q["text"])[:2000]]
                views = [v[:2000] for v in dict.fromkeys(both) if v.strip()]
            else:
                views = [q["text"][:2000]]
            right = np.array([i for i, x in enumerate(ids) if x in set(q["relevant"])])
            out.append({"set": name, "split": q["split"], "qv": emb.embed(views), "right": right, "docs": docs})
    return out


def r_at_3(rows: list[dict], w: np.ndarray) -> float:
    hits = []
    for r in rows:
        sims = (r["docs"] @ (r["qv"] * w).T).max(axis=1)
        hits.append(1.0 if set(r["right"].tolist()) & set(np.argsort(-sims)[:3].tolist()) else 0.0)
    return statistics.mean(hits)


def fit(rows: list[dict], l2: float, steps: int = 200, lr: float = 20.0) -> np.ndarray:
    # Per query: the features q_i d_i of its right lessons and of the wrong ones in its top DEPTH.
    pairs = []
    for r in rows:
        q = r["qv"][0]
        sims = r["docs"] @ q
        top = [i for i in np.argsort(-sims)[:DEPTH] if i not in set(r["right"].tolist())]
        pos = r["docs"][r["right"]] * q
        neg = r["docs"][top] * q
        pairs.append((pos, neg))
    w = np.ones(pairs[0][0].shape[1])
    for _ in range(steps):
        grad = l2 * 2 * (w - 1)
        for pos, neg in pairs:
            diff = (pos[:, None, :] - neg[None, :, :]).reshape(-1, pos.shape[1])  # right minus wrong
            z = TEMPERATURE * diff @ w
            g = -TEMPERATURE / (1 + np.exp(z))  # d/dz log(1 + e^-z)
            grad += (g[:, None] * diff).mean(axis=0) / len(pairs)
        w -= lr * grad
    return w


def main() -> None:
    rows = load()
    dev = [r for r in rows if r["split"] == "dev"]
    sets = sorted({r["set"] for r in rows})
    ones = np.ones(rows[0]["qv"].shape[1])
    print("l2      " + "  ".join(f"{s} dev / test" for s in sets))

    def line(label: str, w: np.ndarray) -> str:
        cells = []
        for s in sets:
            d = r_at_3([r for r in rows if r["set"] == s and r["split"] == "dev"], w)
            t = r_at_3([r for r in rows if r["set"] == s and r["split"] == "test"], w)
            cells.append(f"{d:.3f} / {t:.3f}")
        return f"{label:<7} " + "  ".join(cells)

    print(line("none", ones), flush=True)
    for l2 in (0.003, 0.001, 0.0003):
        w = fit(dev, l2)
        print(line(str(l2), w) + f"   |w - 1| = {np.linalg.norm(w - 1):.2f}", flush=True)


if __name__ == "__main__":
    main()
