"""Vector-arm recall@3 for ways of turning a lesson into vectors (an experiment; nothing here is shipped).

    python evals/lesson_views.py          # dev halves of set1, set2 and conv, 5,000 distractors a set
    python evals/lesson_views.py test     # the test halves (read only after choosing on dev)

Exact cosine over each whole store, queries embedded as search and recall embed them. Vectors come from
``evals/out/embed-cache.sqlite`` (``run_eval.py`` fills it; the views' texts are embedded on first use).
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import run_eval as E  # noqa: E402

from cairn.core.ranking import clean_error, error_focus  # noqa: E402
from cairn.search.embed import get_embedder  # noqa: E402


def key_words(key: str) -> str:
    return key.replace("-", " ").replace("::", " ")


def first_sentence(value: str) -> str:
    m = re.match(r"(.+?[.!?])(\s|$)", value.strip(), re.S)
    return (m.group(1) if m else value.strip())[:300]


def main() -> None:
    split = sys.argv[1] if len(sys.argv) > 1 else "dev"
    emb = E.CachedEmbedder(get_embedder(), E.OUT / "embed-cache.sqlite")
    for name, spec in E.available_sets().items():
        qs, corpus, ids = E.exact_corpus(name, spec)
        full = emb.embed([key_words(x["key"]) + ". " + x["value"] for x in corpus], batch_size=32)
        line = emb.embed([key_words(x["key"]) + ". " + first_sentence(x["value"]) for x in corpus], batch_size=32)
        body = emb.embed([x["value"] for x in corpus], batch_size=32)

        def unit(m: np.ndarray) -> np.ndarray:
            return m / np.linalg.norm(m, axis=1, keepdims=True)

        means = {"key+body (shipped)": full, "mean(key+body, key line)": unit(full + line),
                 "mean(key line, body)": unit(line + body)}  # fmt: skip
        scores: dict[str, list[float]] = {}
        for q in qs:
            if q["split"] != split or not q["relevant"]:
                continue
            if E.is_error_text(q):
                both = [error_focus(q["text"]), clean_error(q["text"])[:2000]]
                views = [v[:2000] for v in dict.fromkeys(both) if v.strip()]
            else:
                views = [q["text"][:2000]]
            qv = emb.embed(views).T
            right = {i for i, x in enumerate(ids) if x in set(q["relevant"])}

            def hit(sims: np.ndarray, right: set[int] = right) -> float:
                return 1.0 if right & set(np.argsort(-sims)[:3].tolist()) else 0.0

            for label, m in means.items():
                scores.setdefault(label, []).append(hit((m @ qv).max(axis=1)))
            two = np.maximum((full @ qv).max(axis=1), (line @ qv).max(axis=1))
            scores.setdefault("max(key+body, key line)", []).append(hit(two))
        print(f"{name} {split}: " + ", ".join(f"{k} {statistics.mean(v):.3f} ({len(v)})" for k, v in scores.items()))


if __name__ == "__main__":
    main()
