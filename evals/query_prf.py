"""Vector-arm recall@3 with pseudo-relevance feedback (an experiment; nothing here is shipped).

    python evals/query_prf.py          # dev halves of set1, set2 and conv, 5,000 distractors a set
    python evals/query_prf.py test     # the test halves (read only after choosing on dev)

Rocchio on the query vector: the query's views are embedded as search and recall embed them, the
store's top ``k`` lessons by exact cosine are averaged, and the query is moved towards them,
``q' = q + beta * mean(top k)``; a lesson's score is its cosine to ``q'``. Vectors come from
``evals/out/embed-cache.sqlite`` (``run_eval.py`` fills it for the model ``$CAIRN_EMBED_MODEL`` names).
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

VARIANTS = [(0, 0.0), (3, 0.3), (3, 0.6), (5, 0.3), (5, 0.6), (10, 0.5)]


def main() -> None:
    split = sys.argv[1] if len(sys.argv) > 1 else "dev"
    emb = E.CachedEmbedder(get_embedder(), E.OUT / "embed-cache.sqlite")
    for name, spec in E.available_sets().items():
        qs, corpus, ids = E.exact_corpus(name, spec)
        docs = emb.embed([embed_text({"key": x["key"], "value": x["value"]}) for x in corpus], batch_size=16)
        scores: dict[str, list[float]] = {}
        for q in qs:
            if q["split"] != split or not q["relevant"]:
                continue
            if E.is_error_text(q):
                both = [error_focus(q["text"]), clean_error(q["text"])[:2000]]
                views = [v[:2000] for v in dict.fromkeys(both) if v.strip()]
            else:
                views = [q["text"][:2000]]
            qv = emb.embed(views)
            right = {i for i, x in enumerate(ids) if x in set(q["relevant"])}
            base = (docs @ qv.T).max(axis=1)
            for k, beta in VARIANTS:
                if k:
                    top = np.argsort(-base)[:k]
                    moved = qv + beta * docs[top].mean(axis=0)
                    moved /= np.linalg.norm(moved, axis=1, keepdims=True)
                    sims = (docs @ moved.T).max(axis=1)
                else:
                    sims = base
                hit = 1.0 if right & set(np.argsort(-sims)[:3].tolist()) else 0.0
                scores.setdefault(f"k={k} b={beta}", []).append(hit)
        print(f"{name} {split}: " + ", ".join(f"{k} {statistics.mean(v):.3f}" for k, v in scores.items()), flush=True)


if __name__ == "__main__":
    main()
