"""Vector-arm recall@3 on error texts for other query views (an experiment; nothing here is shipped).

    python evals/error_views.py          # dev halves of set1 and set2, 5,000 distractors a set
    python evals/error_views.py test     # the test halves (read only after choosing on dev)

Shipped: an error text is embedded as two views, its telling lines (``error_focus``) and the whole
cleaned text, and a lesson's cosine is the better of the two. Tried here: adding a third view, the last
telling line alone (usually the exception or the tool's one-line message), or the telling lines with the
words every error is made of (``ERROR_NOISE``) removed. Vectors from ``evals/out/embed-cache.sqlite``.
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import run_eval as E  # noqa: E402

from cairn.core.ranking import _SHOUTED, _TELLING, ERROR_NOISE, clean_error, clean_error_lines, error_focus  # noqa: E402
from cairn.search.embed import get_embedder  # noqa: E402
from cairn.service.embeddings import embed_text  # noqa: E402


def last_telling(text: str) -> str:
    lines = [ln.strip() for ln in clean_error_lines(text) if ln.strip()]
    telling = [ln for ln in lines if _TELLING.search(ln) or _SHOUTED.search(ln)]
    return (telling or lines or [""])[-1][:500]


def denoised(text: str) -> str:
    return " ".join(w for w in re.split(r"\s+", error_focus(text)) if w.lower().strip(".:,()[]'\"") not in ERROR_NOISE)


def main() -> None:
    split = sys.argv[1] if len(sys.argv) > 1 else "dev"
    emb = E.CachedEmbedder(get_embedder(), E.OUT / "embed-cache.sqlite")
    for name, spec in E.available_sets().items():
        if spec["kind"] == "conv":
            continue
        qs, corpus, ids = E.exact_corpus(name, spec)
        docs = emb.embed([embed_text({"key": x["key"], "value": x["value"]}) for x in corpus])
        scores: dict[str, list[float]] = {}
        for q in qs:
            if q["split"] != split or not q["relevant"] or not E.is_error_text(q):
                continue
            shipped = [error_focus(q["text"]), clean_error(q["text"])[:2000]]
            variants = {
                "shipped (focus, cleaned)": shipped,
                "+ last telling line": [*shipped, last_telling(q["text"])],
                "+ focus without error words": [*shipped, denoised(q["text"])],
                "last telling line alone": [last_telling(q["text"])],
            }
            right = {i for i, x in enumerate(ids) if x in set(q["relevant"])}
            for label, views in variants.items():
                views = [v[:2000] for v in dict.fromkeys(views) if v.strip()]
                sims = (docs @ emb.embed(views).T).max(axis=1)
                scores.setdefault(label, []).append(1.0 if right & set(np.argsort(-sims)[:3].tolist()) else 0.0)
        print(f"{name} {split} errors: " + ", ".join(f"{k} {statistics.mean(v):.3f}" for k, v in scores.items()))


if __name__ == "__main__":
    main()
