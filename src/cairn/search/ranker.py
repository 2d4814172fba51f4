"""The fitted parts of retrieval: how the two arms' evidence is fused, and when recall stays silent.

Two small logistic models, their coefficients in ``data/ranker.json`` (written by
``evals/run_eval.py --fit``, which says in the file what it was fitted on):

* **fusion** scores every candidate either arm returned from per-candidate features (its cosine,
  its cosine against the best in the pool, its BM25 against the best BM25 in the pool, the share of
  the query's rare terms it covers, its rank in each arm). Candidates are ordered by that score.
* **relevance** gives a ranked candidate a probability of being a right answer from what
  surrounds it (its fusion score and the gap to the next candidate, its cosine and how far that
  stands above the next ones, its coverage, whether both arms ranked it high). Recall prints the
  candidates at or above ``floor``; when none is, it prints nothing.

Pure apart from reading the packaged JSON once; numpy-free (a few dozen candidates per query).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from cairn.core.ranking import RANK_FEATURES, RELEVANCE_FEATURES


@dataclass(frozen=True)
class Linear:
    """A logistic model over named features (standardized by ``mean``/``scale`` before the dot product)."""

    features: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]

    def logit(self, row: Sequence[float]) -> float:
        z = self.bias
        for x, w, m, s in zip(row, self.weights, self.mean, self.scale, strict=True):
            z += w * (x - m) / s
        return z

    def prob(self, row: Sequence[float]) -> float:
        z = self.logit(row)
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    @staticmethod
    def from_dict(d: dict, expected: tuple[str, ...]) -> Linear:
        features = tuple(d["features"])
        if features != expected:
            raise ValueError(f"ranker.json: features {features} differ from the code's {expected}; refit")
        return Linear(features, tuple(d["weights"]), float(d["bias"]), tuple(d["mean"]), tuple(d["scale"]))

    def as_dict(self) -> dict:
        return {
            "features": list(self.features),
            "weights": list(self.weights),
            "bias": self.bias,
            "mean": list(self.mean),
            "scale": list(self.scale),
        }


@dataclass(frozen=True)
class Model:
    fusion: Linear
    relevance: Linear
    floor: float


@cache
def model() -> Model:
    """The shipped model (read once per process)."""
    raw = json.loads(resources.files("cairn.search").joinpath("data/ranker.json").read_text(encoding="utf-8"))
    return Model(
        fusion=Linear.from_dict(raw["fusion"], RANK_FEATURES),
        relevance=Linear.from_dict(raw["relevance"], RELEVANCE_FEATURES),
        floor=float(raw["floor"]),
    )
