"""Hybrid search and failure recall.

Two arms over the same visible set: BM25 over an OR of the query's weighted terms (FTS5 on SQLite, ``ts_rank``
on Postgres; ``store/search_index.py``), and the nearest lessons by meaning (all-MiniLM-L6-v2, int8 ONNX,
offline) found by Hamming distance on the ranking index's sign bits and re-ranked by exact cosine on the
float16 vectors the index holds (no vector is read from the database). Every candidate of either arm gets the
other arm's evidence too (its cosine, its coverage of the query's rare terms), and a fitted logistic model
fuses those features into one order (``cairn/search/ranker.py``). Recall then needs an absolute "relevant
enough" to stay silent: a second fitted model turns a ranked candidate's features into a probability, and
recall prints the candidates at or above ``RECALL_FLOOR``. Both were fitted on the dev halves of two eval sets
(``evals/run_eval.py --fit``); tenant, scope, trust, tag and expiry predicates sit inside both arms.

Embeddings are made lazily: writes enqueue (``embed_queue``) and the queue is drained in the background
(``service/embeddings.py``). A search or recall embeds at most a small slice of it first and never waits
for the rest: a lesson still queued is found by the full-text arm only, and the answer says how many wait
(``pending_embeddings``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from cairn.core.content import first_line
from cairn.core.context import recall_block
from cairn.core.lesson import MAX_QUERY_CHARS, MAX_SEARCH_RESULTS, MODES, TRUST_FILTERS
from cairn.core.principal import READ, Principal
from cairn.core.ranking import (
    STRONG_WEIGHT,
    Candidate,
    clean_error,
    coverage,
    error_focus,
    rank_rows,
    relevance_rows,
    snippet,
    text_stems,
    weighted_terms,
)
from cairn.core.scope import ladder, validate_scope
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.search import ranker
from cairn.service.embeddings import Embeddings, pending_embeddings
from cairn.service.records import active_clause, public
from cairn.service.search_arms import ARM_DEPTH, DF_CAP, fts_query, vector_arm
from cairn.service.tx import read_tx
from cairn.service.write_input import normalize_tags
from cairn.store import search_index as ix
from cairn.store.engine import Store
from cairn.store.schema import (
    lessons,
)

if TYPE_CHECKING:
    from cairn.service.rank_index import RankIndex
    from cairn.service.rank_indexes import RankIndexes

RECALL_DEPTH = 20  # candidates recall weighs (it prints at most RECALL_MAX)
# Recall prints the lessons whose fitted relevance (ranker.model().relevance) reaches this floor:
# the operating point chosen on the dev halves of both eval sets (evals/README.md).
RECALL_FLOOR = ranker.model().floor
RECALL_MAX = 3


@dataclass(eq=False, repr=False)
class Search:
    """Hybrid search and failure recall; embeds a slice of the queue first and ranks on the shared indexes."""

    store: Store
    embeddings: Embeddings
    ranks: RankIndexes

    # -- scopes -----------------------------------------------------------------------------
    def _scopes(
        self,
        conn: Connection,
        principal: Principal,
        scopes: list[str] | None,
        repo: str | None,
        branch: str | None,
        project: str | None,
    ) -> tuple[list[str] | None, list[str] | None]:
        """The scope list both arms filter on, and the ladder order when a context was given."""
        order = None
        if scopes:
            chosen: list[str] | None = list(dict.fromkeys(validate_scope(s) for s in scopes))
        elif repo or branch or project:
            order = ladder(repo=repo, branch=branch, project=project)
            chosen = order
        else:
            chosen = None
        if principal.scope_limited:
            if chosen is None:
                existing = conn.execute(
                    select(lessons.c.scope).where(lessons.c.tenant_id == principal.tenant_id).distinct()
                ).scalars()
                chosen = [s for s in existing if principal.can_see(s)]
            else:
                chosen = [s for s in chosen if principal.can_see(s)]
        return chosen, order

    # -- search -----------------------------------------------------------------------------
    def search(
        self,
        principal: Principal,
        query: str,
        *,
        scopes: list[str] | None = None,
        repo: str | None = None,
        branch: str | None = None,
        project: str | None = None,
        tag: str | None = None,
        trust: str | None = None,
        limit: int = 10,
        mode: str = "hybrid",
    ) -> dict[str, Any]:
        principal.require(READ)
        query = (query or "").strip()
        if not query:
            raise CairnError("INVALID_INPUT", "the search query is empty")
        if len(query) > MAX_QUERY_CHARS:
            raise CairnError("INVALID_INPUT", f"the search query is longer than {MAX_QUERY_CHARS} characters")
        if mode not in MODES:
            raise CairnError("INVALID_INPUT", f"mode must be one of {', '.join(MODES)}")
        if not 1 <= limit <= MAX_SEARCH_RESULTS:
            raise CairnError("INVALID_INPUT", f"limit must be between 1 and {MAX_SEARCH_RESULTS}")
        if trust is not None and trust not in TRUST_FILTERS:
            raise CairnError("INVALID_INPUT", "trust filter must be candidate or verified")
        tag_norm = normalize_tags([tag])[0] if tag else None
        found = self._retrieve(
            principal, query, error=False, scopes=scopes, repo=repo, branch=branch, project=project,
            tag=tag_norm, trust=trust, limit=limit, mode=mode, weigh=False,
        )  # fmt: skip
        return {"query": query, "mode": mode, "results": found.hits, "pending_embeddings": found.pending}

    def recall(
        self,
        principal: Principal,
        error_text: str,
        *,
        scopes: list[str] | None = None,
        repo: str | None = None,
        branch: str | None = None,
        project: str | None = None,
        floor: float | None = None,
        limit: int = RECALL_MAX,
        mode: str = "hybrid",
    ) -> dict[str, Any]:
        """At most three lessons relevant to a failure, or none: silence beats a wrong lesson.

        Each candidate's ``relevance`` is the fitted model's probability that it answers the
        failure (``cairn/search/ranker.py``); the ones at or above the floor are printed. ``mode``
        and ``limit`` beyond three exist for the eval (``evals/run_eval.py``), which measures each
        arm alone and ranks deeper than a hook would print.
        """
        principal.require(READ)
        if mode not in MODES:
            raise CairnError("INVALID_INPUT", f"mode must be one of {', '.join(MODES)}")
        if not 1 <= limit <= 20:
            raise CairnError("INVALID_INPUT", "limit must be between 1 and 20")
        threshold = recall_floor() if floor is None else floor
        text = (error_text or "")[-8000:]  # the end of a long log holds the error
        found = self._retrieve(
            principal, text, error=True, scopes=scopes, repo=repo, branch=branch, project=project,
            tag=None, trust=None, limit=20, mode=mode, weigh=True,
        )  # fmt: skip
        chosen = [h for h in found.hits if h["relevance"] >= threshold]
        if mode == "hybrid":  # an arm alone keeps its own order (the eval measures each arm's ranking)
            chosen.sort(key=lambda h: -h["relevance"])
        self._label_webhook_hits(principal, chosen[:limit])
        # The printable block travels with the answer, so every surface (hook, CLI, API, MCP) shows the same.
        return {
            "terms": [t for t, _ in found.terms][:24],
            "lessons": chosen[:limit],
            "floor": threshold,
            "text": recall_block(chosen[:limit]),
            "pending_embeddings": found.pending,
        }

    def _label_webhook_hits(self, principal: Principal, hits: list[dict[str, Any]]) -> None:
        """A webhook lesson says who wrote it and on which PR (``provenance``), outsiders marked."""
        named = [(h["scope"], h["key"]) for h in hits if h["lesson"].get("origin") == "webhook"]
        if not named:
            return
        from cairn.service.webhooks import labels_by_address

        labels = self.store.run(
            lambda conn: labels_by_address(conn, principal.tenant_id, named), write=False, **principal.db_vars
        )
        for h in hits:
            if (h["scope"], h["key"]) in labels:
                h["provenance"] = labels[(h["scope"], h["key"])]

    def _retrieve(
        self,
        principal: Principal,
        text: str,
        *,
        error: bool,
        scopes: list[str] | None,
        repo: str | None,
        branch: str | None,
        project: str | None,
        tag: str | None,
        trust: str | None,
        limit: int,
        mode: str,
        weigh: bool,
    ) -> Retrieved:
        """Both arms, their union scored by the fusion model, best first (recall: with relevance).

        The full-text arm is BM25 over an OR of the query's weighted terms (rarest first, the
        commonest dropped: ``search_arms.fts_query``); the vector arm ranks every visible lesson by the sign
        bits of its vector in the ranking index and re-ranks the nearest by exact cosine. Every
        candidate of either arm then gets the other arm's evidence too (its exact cosine, its
        coverage of the query's terms), so fusion compares like with like.
        """
        terms = weighted_terms(text, error=error)
        # An error is read twice by the model: its telling lines, and the whole cleaned text (its
        # first ~256 tokens); a lesson's cosine is the better of the two.
        views = [text]
        if error:
            views = [v for v in dict.fromkeys([error_focus(text), clean_error(text)[:2000]]) if v.strip()]
        semantic_text = " ".join(views)
        if not terms and not semantic_text.strip():
            return Retrieved(terms, [], [], read_tx(self.store, principal, lambda c: pending_embeddings(c, principal)))
        use_fts = mode in ("hybrid", "fts") and bool(terms)
        use_vec = mode in ("hybrid", "vector") and bool(semantic_text.strip())
        qvec: list[bytes] | None = None
        model_name = None
        if use_vec:
            try:
                self.embeddings.drain_slice(principal)
            except CairnError as exc:
                if exc.code != "SETUP":
                    raise
                # A store this process cannot write (a read-only mount): answer from what is embedded.
            from cairn.search.embed import get_embedder, vector_to_blob

            embedder = get_embedder()
            model_name = embedder.name
            qvec = [vector_to_blob(v) for v in embedder.embed([v[:2000] for v in views])]
        idx: RankIndex | None = self.ranks.get(principal.tenant_id) if use_vec else None
        fitted = ranker.model()

        def tx(conn: Connection) -> Retrieved:
            found = rank(conn)
            found.pending = pending_embeddings(conn, principal)
            return found

        def rank(conn: Connection) -> Retrieved:
            now = utcnow()
            chosen, order = self._scopes(conn, principal, scopes, repo, branch, project)
            if chosen is not None and not chosen:
                return Retrieved(terms, [], [])
            df, total = ix.doc_frequencies(conn, [t for t, _ in terms], cap=DF_CAP) if terms else ({}, 0)
            idf = {t: math.log(1 + total / n) for t, n in df.items() if n}
            cands: dict[int, Candidate] = {}
            if use_fts:
                match = fts_query(terms, df, total)
                if match is not None:
                    fts = ix.fts_search(conn, principal.tenant_id, match, chosen, now, ARM_DEPTH, trust, tag)
                    for rank, (i, score) in enumerate(fts, start=1):
                        cands[i] = Candidate(i, bm25=score, fts_rank=rank)
            if qvec is not None and idx is not None and model_name is not None:
                arm = vector_arm(conn, idx, principal.tenant_id, model_name, qvec, chosen, now, trust, tag)
                for rank, (i, cos) in enumerate(arm.nearest, start=1):
                    c = cands.setdefault(i, Candidate(i))
                    c.cos, c.vec_rank = cos, rank
                missing = [i for i, c in cands.items() if c.cos is None]
                if missing:  # the full-text arm's finds, measured by meaning too
                    for i, cos in arm.cosines(missing).items():
                        cands[i].cos = cos
            if not cands:
                return Retrieved(terms, [], [])
            rows = {
                r["id"]: dict(r)
                for r in conn.execute(
                    select(lessons).where(
                        lessons.c.tenant_id == principal.tenant_id, lessons.c.id.in_(list(cands)), active_clause(now)
                    )
                ).mappings()
            }
            pool = [c for i, c in cands.items() if i in rows]
            strong = [(t, w) for t, w in terms if w >= STRONG_WEIGHT]
            unknown = None if error else math.log(1 + total)
            for c in pool:
                stems = text_stems(_index_text(rows[c.id]))
                c.coverage = coverage(terms, idf, stems, unknown)
                c.strong = coverage(strong, idf, stems) if strong else 0.0
            for c, feats in zip(pool, rank_rows(pool), strict=True):
                c.score = fitted.fusion.logit(feats)
            if mode == "fts":
                pool.sort(key=lambda c: (-(c.bm25 or 0.0), c.id))
            elif mode == "vector":
                pool.sort(key=lambda c: (-(c.cos or 0.0), c.id))
            else:
                pool.sort(key=lambda c: (-c.score, c.id))
            if order:
                keep = set(_shadow(conn, principal, [c.id for c in pool], rows, order, now))
                pool = [c for c in pool if c.id in keep]
            if weigh:
                for c, feats in zip(pool, relevance_rows(pool), strict=True):
                    c.relevance = fitted.relevance.prob(feats)
            shown = pool[: max(limit, RECALL_DEPTH) if weigh else limit]
            return Retrieved(terms, pool, [_hit(rows[c.id], c, terms, now, weigh) for c in shown])

        return read_tx(self.store, principal, tx)


@dataclass
class Retrieved:
    """One query's terms, its whole ranked pool (the eval reads the features) and the printable hits."""

    terms: list[tuple[str, float]]
    pool: list[Candidate]
    hits: list[dict[str, Any]]
    pending: int = 0  # the caller's lessons still waiting for their vector: found by words only


def recall_floor() -> float:
    """The relevance at or above which recall prints a lesson (read at call time: the eval overrides it)."""
    return RECALL_FLOOR


def _hit(
    row: dict[str, Any], c: Candidate, terms: list[tuple[str, float]], now: datetime, weigh: bool
) -> dict[str, Any]:
    hit = {
        "scope": row["scope"],
        "key": row["key"],
        "trust": row["trust"],
        "score": round(c.score, 6),
        "snippet": snippet(row["value"], [t for t, _ in terms]),
        "summary": first_line(row["value"]),
        "fts_rank": c.fts_rank,
        "fts_score": round(c.bm25, 4) if c.bm25 is not None else None,
        "similarity": round(c.cos, 4) if c.cos is not None else None,
        "lesson": public(row, now),
    }
    if weigh:
        hit["relevance"] = round(c.relevance, 4)
    return hit


def _index_text(row: dict[str, Any]) -> str:
    """What the full-text index holds of a lesson (key words, value, tags), for coverage."""
    return (
        row["key"].replace("-", " ").replace("::", " ") + " " + row["value"] + " " + " ".join(json.loads(row["tags"]))
    )


def _shadow(
    conn: Connection,
    principal: Principal,
    ids: list[int],
    rows: dict[int, dict[str, Any]],
    order: list[str],
    now: datetime,
) -> list[int]:
    """Drop a hit when a narrower rung of the ladder holds an active lesson with the same key.

    Only rungs the principal may see shadow: a lesson hidden from a scope-limited token must not hide
    the broader one it can read (the token would otherwise get neither).
    """
    order = [s for s in order if principal.can_see(s)]
    keys = {rows[i]["key"] for i in ids}
    holders: dict[str, int] = {}
    for scope, key in conn.execute(
        select(lessons.c.scope, lessons.c.key).where(
            lessons.c.tenant_id == principal.tenant_id,
            lessons.c.key.in_(keys),
            lessons.c.scope.in_(order),
            active_clause(now),
        )
    ):
        rank = order.index(scope)
        holders[key] = min(holders.get(key, rank), rank)
    return [i for i in ids if order.index(rows[i]["scope"]) == holders.get(rows[i]["key"], 0)]
