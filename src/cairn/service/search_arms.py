"""Search's two arms: BM25 over an OR of the query's weighted terms, and the nearest lessons by meaning.

``fts_query`` bounds what the full-text arm asks (the rarest terms, their postings capped);
``vector_arm`` ranks the visible lessons by the sign bits of their vectors in the ranking index and
re-ranks the nearest by exact cosine. ``service/search.py`` fuses what both find.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from cairn.search.embed import signature
from cairn.store import search_index as ix
from cairn.store.schema import (
    lesson_tags,
)

if TYPE_CHECKING:
    from cairn.service.rank_index import RankIndex

ARM_DEPTH = 50  # candidates each arm contributes to fusion
# The vector arm re-ranks this many nearest-by-sign-bits of each query view by exact cosine on the ranking
# index's float16 vectors. Sign bits alone are a coarse order; how much of the exact top 20 this depth
# holds, and what a deeper one costs, is measured in bench/README.md (vector arm).
VECTOR_PREFILTER = 1000
FTS_TERMS = 16  # the full-text arm's OR holds at most this many terms, rarest first...
FTS_POSTINGS = 4000  # ...while their document counts sum under this many rows (each is scored)...
DF_CAP = 2000  # ...and never a term this common when rarer ones exist (document counts stop here)


def fts_query(terms: list[tuple[str, float]], df: dict[str, int], total: int) -> ix.FtsQuery | None:
    """BM25 over an OR of the query's terms the store knows, bounded.

    An OR (not every word, as before): a lesson that answers a question rarely repeats all of its
    words, and an error's own identifiers are in no lesson. BM25's IDF already lets rare terms
    dominate; what bounds the arm's cost is leaving out the commonest terms (in ``DF_CAP`` lessons or
    more, where IDF is near zero in a store large enough to hold them) and keeping at most
    ``FTS_TERMS``, rarest first, while their postings stay under ``FTS_POSTINGS`` rows (every
    matching row is scored and joined to its lesson: a common word would cost tens of milliseconds).
    Strong terms (error codes, exception names) are repeated: FTS5's BM25 sums over the query's
    phrases, so a repeated phrase counts twice.
    """
    known = [(t, w) for t, w in terms if df.get(t)]
    if not known or not total:
        return None
    useful = [(t, w) for t, w in known if df[t] < DF_CAP] or sorted(known, key=lambda tw: df[tw[0]])[:1]
    useful.sort(key=lambda tw: df[tw[0]])
    picked: list[tuple[str, float]] = []
    postings = 0
    for t, w in useful:
        if len(picked) >= FTS_TERMS or (len(picked) >= 3 and postings + df[t] > FTS_POSTINGS):
            break
        picked.append((t, w))
        postings += df[t]
    phrases = []
    for t, w in picked:
        phrases += [ix.fts_phrase(t)] * max(1, round(w))
    return ix.fts_any(phrases)


@dataclass
class VectorArm:
    """The vector arm's answer: the nearest visible lessons, and the means to measure any other."""

    nearest: list[tuple[int, float]]
    arrays: Any = None  # the ranking index's snapshot the arm read (None: nothing to compare with)
    order: Any = None
    queries: Any = None  # (dim, views) float32

    def cosines(self, ids: list[int]) -> dict[int, float]:
        """Exact cosine (the best over the query's views) of each of ``ids`` that has a vector."""
        from cairn.service.rank_index import rows_of

        if self.arrays is None or not ids:
            return {}
        rows, found = rows_of(self.arrays, self.order, ids)
        keep = self.arrays.has_vec[rows]
        rows = rows[keep]
        held = [i for i, f in zip(ids, found, strict=True) if f]
        held = [i for i, k in zip(held, keep, strict=True) if k]
        sims = _exact(self.arrays.half[rows], self.queries)
        return {i: float(v) for i, v in zip(held, sims, strict=True)}


def _exact(half: Any, queries: Any) -> Any:
    """The best cosine over the query views of each float16 row (vectors are L2-normalized)."""
    return (half.astype("<f4") @ queries).max(axis=1)


def vector_arm(
    conn: Connection,
    idx: RankIndex,
    tenant_id: str,
    model: str,
    qvecs: list[bytes],
    scopes: list[str] | None,
    now: datetime,
    trust: str | None,
    tag: str | None,
) -> VectorArm:
    """The visible lessons nearest the query: Hamming distance on the ranking index's sign bits over
    all of them, then exact cosine on the index's float16 vectors for the ``VECTOR_PREFILTER``
    nearest of each query view, best first. All in memory.

    The ranking index holds only active lessons of this tenant and is brought up to the tenant's
    last change before it is read; scope, trust, tag and expiry are applied here, and the caller
    re-reads the rows with the active predicate.
    """
    import numpy as np

    with idx.lock:
        idx.refresh(conn, model, vectors=True)
        a = idx.arrays
        order = idx.id_order()
        codes = idx.codes_of(scopes) if scopes is not None else None
    dim = len(qvecs[0]) // 4
    if not len(a.ids) or a.bits.shape[1] * 64 != dim or a.half.shape[1] != dim:
        return VectorArm([])
    queries = np.stack([np.frombuffer(q, dtype="<f4") for q in qvecs], axis=1)
    arm = VectorArm([], a, order, queries)
    mask = a.has_vec & (a.expires > now.timestamp())
    if codes is not None:
        mask &= np.isin(a.scope, np.asarray(codes, dtype=np.int32))
    if trust == "verified":
        mask &= a.verified
    elif trust == "candidate":
        mask &= ~a.verified
    if tag:
        tagged = conn.execute(
            select(lesson_tags.c.lesson_id).where(lesson_tags.c.tenant_id == tenant_id, lesson_tags.c.tag == tag)
        ).scalars()
        mask &= np.isin(a.ids, np.fromiter(tagged, dtype=np.int64))
    visible = int(mask.sum())
    if not visible:
        return arm
    k = min(VECTOR_PREFILTER, visible)
    best: dict[int, float] = {}  # row -> best cosine over the views whose prefilter picked it
    for view, qvec in enumerate(qvecs):
        if visible <= k:
            picked = np.nonzero(mask)[0]
        else:
            qbits = np.frombuffer(signature(qvec), dtype=np.uint64)
            # Over every row, then the invisible ones pushed past the end: cheaper than copying the visible rows out.
            distance = np.bitwise_count(a.bits ^ qbits).sum(axis=1, dtype=np.int32)
            distance[~mask] = np.iinfo(np.int32).max
            picked = np.argpartition(distance, k - 1)[:k]
        # Each view measures its own picks (half the work of every view measuring every pick)...
        sims = a.half[picked].astype("<f4") @ queries[:, view]
        top = np.argpartition(-sims, min(ARM_DEPTH * 2, len(sims)) - 1)[: ARM_DEPTH * 2]
        for row, sim in zip(picked[top].tolist(), sims[top].tolist(), strict=True):
            best[row] = max(best.get(row, -2.0), sim)
    # ...and the finalists get the best over every view, exactly.
    rows = np.fromiter(best, dtype=np.int64, count=len(best))
    sims = _exact(a.half[rows], queries)
    ranked = sorted(
        ((int(a.ids[r]), float(c)) for r, c in zip(rows, sims, strict=True)), key=lambda kv: (-kv[1], kv[0])
    )
    arm.nearest = ranked[:ARM_DEPTH]
    return arm


def cosines(conn: Connection, model: str, qvecs: bytes | list[bytes], ids: list[int]) -> dict[int, float]:
    """Exact cosine similarity (vectors are L2-normalized, so a dot product) for ``ids``: the best
    over the query's views, from the stored float32 vectors (context's semantic relevance)."""
    import numpy as np

    if isinstance(qvecs, bytes):
        qvecs = [qvecs]
    found = ix.float_vectors(conn, model, ids)
    if not found:
        return {}
    keys = list(found)
    matrix = np.frombuffer(b"".join(found[k] for k in keys), dtype="<f4").reshape(len(keys), -1)
    queries = np.stack([np.frombuffer(q, dtype="<f4") for q in qvecs], axis=1)
    sims = (matrix @ queries).max(axis=1)
    return {k: float(v) for k, v in zip(keys, sims, strict=True)}
