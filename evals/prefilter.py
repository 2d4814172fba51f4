"""How much of the exact cosine top 20 the vector arm's sign-bit prefilter keeps, by depth (no labels used).

    python evals/prefilter.py      # every lesson of set1, set2 and conv (5,000 distractors each), every query view

The vector arm (``service/search.py``) ranks every visible lesson by the Hamming distance of its sign bits
to the query's and re-ranks the nearest ``VECTOR_PREFILTER`` exactly; what the sign bits miss at that depth
the arm never sees. Vectors come from ``evals/out/embed-cache.sqlite`` (``run_eval.py`` fills it).
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

DEPTHS = (300, 500, 1000, 2000)


def main() -> None:
    emb = E.CachedEmbedder(get_embedder(), E.OUT / "embed-cache.sqlite")
    texts: list[str] = []
    views: list[str] = []
    for name, spec in E.available_sets().items():
        if spec["kind"] == "conv":
            lessons, qs = E.conv_records(spec["folder"])
            extra: list[dict] = []
        else:
            lessons = E.read_jsonl(spec["folder"] / "lessons.jsonl")
            qs = E.read_jsonl(spec["folder"] / "queries.jsonl")
            extra = E.load_module(spec["distractors"], f"d_{name}").generate(5000, seed=0)
        for x in lessons + [dict(d, key=d["key"] + "-d") for d in extra]:
            texts.append(x["key"].replace("-", " ").replace("::", " ") + ". " + x["value"])
        for q in qs:  # the views search and recall embed (service/search.py)
            if E.is_error_text(q):
                both = [error_focus(q["text"]), clean_error(q["text"])[:2000]]
                views += [v[:2000] for v in dict.fromkeys(both) if v.strip()]
            else:
                views.append(q["text"][:2000])
    lessons_v, queries_v = emb.embed(texts), emb.embed(views)
    bits, qbits = np.packbits(lessons_v > 0, axis=1), np.packbits(queries_v > 0, axis=1)
    kept: dict[int, list[float]] = {k: [] for k in DEPTHS}
    for i in range(len(queries_v)):
        exact = set(np.argsort(-(lessons_v @ queries_v[i]))[:20].tolist())
        order = np.argsort(np.unpackbits(bits ^ qbits[i], axis=1).sum(axis=1), kind="stable")
        for k in DEPTHS:
            kept[k].append(len(exact & set(order[:k].tolist())) / 20)
    print(f"{len(lessons_v)} lessons, {len(queries_v)} query views; share of the exact top 20 in the sign-bit top k:")
    for k in DEPTHS:
        print(f"  k = {k:>5}: {statistics.mean(kept[k]):.3f}")


if __name__ == "__main__":
    main()
