"""Hybrid search and failure recall.

Two arms, fused by reciprocal rank fusion (RRF): FTS5 BM25 over key, value and tags, and KNN over
sentence embeddings (all-MiniLM-L6-v2, int8 ONNX, offline). Tenant and scope predicates sit inside
both arms' SQL. Fusion is rank-based; recall additionally needs an *absolute* notion of "relevant
enough" to stay silent, which RRF does not give, so recall scores each fused candidate by the
cosine similarity of its embedding to the error's plus how far it stands above the neighbouring
candidates, and keeps those above a floor calibrated on the eval set (``evals/``; ``RECALL_FLOOR``).

Embeddings are made lazily: writes enqueue (``embed_queue``) and every search first drains the
tenant's queue with the warm model, re-checking each lesson's content hash under the write
transaction so a vector made from text that changed meanwhile is discarded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from cairn.core.content import first_line
from cairn.core.context import recall_block
from cairn.core.principal import READ, Principal
from cairn.core.ranking import clean_error, distill, distinctiveness, query_terms, rrf, snippet
from cairn.core.scope import ladder, validate_scope
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.service import indexing
from cairn.service.lessons import normalize_tags
from cairn.service.records import active_clause, public, status
from cairn.store import search_index as ix
from cairn.store.engine import Store
from cairn.store.schema import embed_queue, embed_state, lesson_embeddings, lesson_signatures, lessons

MODES = ("hybrid", "fts", "vector")
ARM_DEPTH = 50  # candidates each arm contributes to fusion
RERANK_FACTOR = 8  # binary-quantized KNN returns this many times ARM_DEPTH for exact re-ranking
DRAIN_BATCH = 256
# Recall: relevance = cosine(query, lesson) + GAP_WEIGHT × how far that cosine stands above the
# next five candidates' (core/ranking.distinctiveness). Chosen on the dev half of evals/ only
# (`make eval --calibrate` prints the sweep; evals/README.md).
GAP_WEIGHT = 1.0
# The floor with the best balanced accuracy (answered vs abstained) on the dev half, the same
# at 0 and at 5,000 distractors (`python evals/run_eval.py --calibrate`).
RECALL_FLOOR = 0.75
# In hybrid search the full-text query is conjunctive (every query word must match); recall's is an OR
# of the error's rarest terms. An OR over a question's words matches most lessons on some incidental
# word, and RRF then lets those weak matches, returned by both arms, outrank the vector arm's best:
# on the dev half of evals/ the OR arm cost 7 points of recall@1 and 9 of recall@3 against AND.
RECALL_MAX = 3

Progress = Callable[[int, int], None]


class SearchOps:
    store: Store

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

    # -- embeddings -------------------------------------------------------------------------
    def drain_embeddings(self, principal: Principal, progress: Progress | None = None) -> int:
        """Embed every queued lesson of the tenant; returns how many vectors were written."""
        from cairn.search.embed import get_embedder

        def probe(c: Connection) -> tuple[str | None, int]:
            state = c.execute(select(embed_state.c.model).where(embed_state.c.tenant_id == principal.tenant_id))
            count = c.execute(
                select(func.count()).select_from(embed_queue).where(embed_queue.c.tenant_id == principal.tenant_id)
            )
            return state.scalar(), count.scalar_one()

        # Read first: a search with nothing to embed must not take the write lock (WAL readers never
        # wait for a writer; a write probe on every search made them queue behind imports).
        state, pending = self.store.run(probe, write=False, **principal.db_vars)
        if state != indexing.configured_model():
            self.store.run(lambda c: _follow_model(c, principal.tenant_id), write=True, **principal.db_vars)
            state, pending = self.store.run(probe, write=False, **principal.db_vars)
        if not pending:
            return 0
        embedder = get_embedder()
        done = 0
        while True:
            batch = self.store.run(
                lambda c: _queued(c, principal.tenant_id, DRAIN_BATCH), write=False, **principal.db_vars
            )
            if not batch:
                return done
            vectors = embedder.embed([_embed_text(r) for r in batch])

            def write(conn: Connection, batch: list[dict[str, Any]] = batch, vectors: Any = vectors) -> int:
                return _write_vectors(conn, principal.tenant_id, embedder, batch, vectors)

            done += self.store.run(write, write=True, **principal.db_vars)
            if progress:
                progress(done, pending)

    def reindex(self, principal: Principal, progress: Progress | None = None) -> dict[str, Any]:
        """Rebuild the full-text index and every embedding of the tenant (e.g. after a model change)."""
        principal.require_account_wide("reindex")
        from cairn.search.embed import get_embedder

        embedder = get_embedder()

        def rebuild(conn: Connection) -> int:
            now = utcnow()
            ids = []
            for row in conn.execute(select(lessons).where(lessons.c.tenant_id == principal.tenant_id)).mappings():
                indexing.drop(conn, row["id"])
                if status(dict(row), now) == "active":
                    ix.fts_put(conn, dict(row))
                    ids.append(row["id"])
            if ids:
                conn.execute(
                    insert(embed_queue),
                    [{"lesson_id": i, "tenant_id": principal.tenant_id, "queued_at": now} for i in ids],
                )
            # Vectors of other models are gone with the drops above; their tables go too.
            keep = ix.vec_table(embedder.name, embedder.dim)
            for table in ix.vec_tables(conn):
                if table != keep and not _table_in_use(conn, table):
                    ix.vec_drop_table(conn, table)
            return len(ids)

        count = self.store.run(rebuild, write=True, **principal.db_vars)
        embedded = self.drain_embeddings(principal, progress)
        return {"indexed": count, "embedded": embedded, "model": embedder.name, "dim": embedder.dim}

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
        if len(query) > 4000:
            raise CairnError("INVALID_INPUT", "the search query is longer than 4000 characters")
        if mode not in MODES:
            raise CairnError("INVALID_INPUT", f"mode must be one of {', '.join(MODES)}")
        if not 1 <= limit <= 100:
            raise CairnError("INVALID_INPUT", "limit must be between 1 and 100")
        if trust is not None and trust not in ("candidate", "verified"):
            raise CairnError("INVALID_INPUT", "trust filter must be candidate or verified")
        tag_norm = normalize_tags([tag])[0] if tag else None
        terms = query_terms(query)
        hits = self._hybrid(
            principal, terms, query, scopes, repo, branch, project, tag_norm, trust, limit, mode, weigh=False
        )
        return {"query": query, "mode": mode, "results": hits}

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

        ``mode`` and ``limit`` beyond three exist for the eval (``evals/run_eval.py``), which
        measures each arm alone and ranks deeper than a hook would print.
        """
        principal.require(READ)
        if mode not in MODES:
            raise CairnError("INVALID_INPUT", f"mode must be one of {', '.join(MODES)}")
        if not 1 <= limit <= 20:
            raise CairnError("INVALID_INPUT", "limit must be between 1 and 20")
        text = (error_text or "")[-8000:]  # the end of a long log holds the error
        terms = distill(text)
        cleaned = clean_error(text)
        if not terms and not cleaned:
            return {"terms": [], "lessons": [], "floor": RECALL_FLOOR if floor is None else floor, "text": ""}
        hits = self._hybrid(principal, terms, cleaned, scopes, repo, branch, project, None, None, 20, mode, weigh=True)
        threshold = RECALL_FLOOR if floor is None else floor
        chosen = [h for h in hits if h["relevance"] >= threshold]
        chosen.sort(key=lambda h: -h["relevance"])
        # The printable block travels with the answer, so every surface (hook, CLI, API, MCP) shows the same.
        return {"terms": terms, "lessons": chosen[:limit], "floor": threshold, "text": recall_block(chosen[:limit])}

    def _hybrid(
        self,
        principal: Principal,
        terms: list[str],
        semantic_text: str,
        scopes: list[str] | None,
        repo: str | None,
        branch: str | None,
        project: str | None,
        tag: str | None,
        trust: str | None,
        limit: int,
        mode: str,
        *,
        weigh: bool,
    ) -> list[dict[str, Any]]:
        use_vec = mode in ("hybrid", "vector") and bool(semantic_text)
        if use_vec:
            self.drain_embeddings(principal)
        qvec = None
        model = None
        if use_vec:
            from cairn.search.embed import get_embedder, vector_to_blob

            embedder = get_embedder()
            model = embedder
            qvec = vector_to_blob(embedder.embed([semantic_text[:2000]])[0])

        def tx(conn: Connection) -> list[dict[str, Any]]:
            now = utcnow()
            chosen, order = self._scopes(conn, principal, scopes, repo, branch, project)
            if chosen is not None and not chosen:
                return []
            depth = ARM_DEPTH
            fts: list[tuple[int, float]] = []
            if mode in ("hybrid", "fts") and terms:
                match = _match_expr(conn, terms, weigh, conjunctive=mode == "hybrid")
                if match:
                    fts = ix.fts_search(conn, principal.tenant_id, match, chosen, now, depth, trust, tag)
            vec: list[tuple[int, float]] = []
            if qvec is not None and model is not None:
                table = ix.vec_table(model.name, model.dim)
                if table in ix.vec_tables(conn):
                    # Binary-quantized KNN for a generous top set, then exact cosine re-ranking.
                    coarse = ix.vec_search(
                        conn, table, principal.tenant_id, qvec, chosen, now, depth * RERANK_FACTOR, trust, tag
                    )
                    sims = _cosines(conn, model.name, qvec, coarse)
                    vec = sorted(sims.items(), key=lambda kv: -kv[1])[:depth]
            fused = rrf([[i for i, _ in fts], [i for i, _ in vec]])
            if not fused:
                return []
            ids = sorted(fused, key=lambda i: -fused[i])
            rows = {
                r["id"]: dict(r)
                for r in conn.execute(
                    select(lessons).where(
                        lessons.c.tenant_id == principal.tenant_id, lessons.c.id.in_(ids), active_clause(now)
                    )
                ).mappings()
            }
            ids = [i for i in ids if i in rows]
            if order:
                ids = _shadow(conn, principal, ids, rows, order, now)
            fts_rank = {i: n for n, (i, _) in enumerate(fts, start=1)}
            fts_score = dict(fts)
            cos = dict(vec)
            margin: dict[int, float] = {}
            if weigh and qvec is not None and model is not None:
                missing = [i for i in ids[:20] if i not in cos]
                if missing:
                    cos.update(_cosines(conn, model.name, qvec, missing))
                ranked_cos = sorted(((cos.get(i, 0.0), i) for i in ids[:20]), reverse=True)
                gaps = distinctiveness([c for c, _ in ranked_cos])
                margin = {i: g for (_, i), g in zip(ranked_cos, gaps, strict=True)}
            out = []
            for i in ids[: max(limit, 20) if weigh else limit]:
                row = rows[i]
                item = public(row, now)
                hit = {
                    "scope": row["scope"],
                    "key": row["key"],
                    "trust": row["trust"],
                    "score": round(fused[i], 6),
                    "snippet": snippet(row["value"], terms),
                    "summary": first_line(row["value"]),
                    "fts_rank": fts_rank.get(i),
                    "fts_score": round(fts_score[i], 4) if i in fts_score else None,
                    "similarity": round(cos[i], 4) if i in cos else None,
                    "lesson": item,
                }
                if weigh:
                    hit["relevance"] = _relevance(cos.get(i), margin.get(i, 0.0), i in fts_rank, mode)
                out.append(hit)
            return out

        return self.store.run(tx, write=False, **principal.db_vars)


def _follow_model(conn: Connection, tenant_id: str) -> None:
    """On a model change, queue every active lesson that has no vector from the configured model."""
    model = indexing.configured_model()
    state = conn.execute(select(embed_state.c.model).where(embed_state.c.tenant_id == tenant_id)).scalar()
    if state == model:
        return
    now = utcnow()
    have = select(lesson_embeddings.c.lesson_id).where(lesson_embeddings.c.model == model)
    queued = select(embed_queue.c.lesson_id)
    ids = (
        conn.execute(
            select(lessons.c.id).where(
                lessons.c.tenant_id == tenant_id,
                active_clause(now),
                lessons.c.id.not_in(have),
                lessons.c.id.not_in(queued),
            )
        )
        .scalars()
        .all()
    )
    if ids:
        conn.execute(insert(embed_queue), [{"lesson_id": i, "tenant_id": tenant_id, "queued_at": now} for i in ids])
    conn.execute(delete(embed_state).where(embed_state.c.tenant_id == tenant_id))
    conn.execute(insert(embed_state).values(tenant_id=tenant_id, model=model, updated_at=now))


def _write_vectors(conn: Connection, tenant_id: str, embedder: Any, batch: list[dict[str, Any]], vectors: Any) -> int:
    """Store a drained batch's vectors; returns how many were written.

    Each lesson is checked under this write transaction: one whose content changed while it was
    embedded is re-queued (its vector is of the old text), one erased or no longer in the full-text
    index (archived, rejected, expired) is dropped from the queue with no vector. Every table is
    written with one statement per batch: per-lesson statements cost more than the rows.
    """
    from cairn.search.embed import signature, vector_to_blob

    now = utcnow()
    ids = [r["id"] for r in batch]
    current = {
        r["id"]: dict(r)
        for r in conn.execute(
            select(
                lessons.c.id,
                lessons.c.tenant_id,
                lessons.c.scope,
                lessons.c.trust,
                lessons.c.expires_at,
                lessons.c.content_hash,
            ).where(lessons.c.id.in_(ids), lessons.c.tenant_id == tenant_id)
        ).mappings()
    }
    conn.execute(delete(embed_queue).where(embed_queue.c.lesson_id.in_(ids)))
    changed = [r["id"] for r in batch if r["id"] in current and current[r["id"]]["content_hash"] != r["content_hash"]]
    if changed:  # changed while we embedded: embed the new text next round
        conn.execute(insert(embed_queue), [{"lesson_id": i, "tenant_id": tenant_id, "queued_at": now} for i in changed])
    unchanged = [
        (r, v)
        for r, v in zip(batch, vectors, strict=True)
        if current.get(r["id"], {}).get("content_hash") == r["content_hash"]
    ]
    active = ix.fts_present(conn, [r["id"] for r, _ in unchanged])
    keep = [(current[r["id"]], vector_to_blob(v), signature(v)) for r, v in unchanged if r["id"] in active]
    if not keep:
        return 0
    written = [row["id"] for row, _, _ in keep]
    ix.vec_put_many(conn, ix.vec_ensure(conn, embedder.name, embedder.dim), [(row, blob) for row, blob, _ in keep])
    conn.execute(delete(lesson_embeddings).where(lesson_embeddings.c.lesson_id.in_(written)))
    conn.execute(
        insert(lesson_embeddings),
        [
            {
                "lesson_id": row["id"],
                "model": embedder.name,
                "tenant_id": tenant_id,
                "dim": embedder.dim,
                "content_hash": row["content_hash"],
                "embedded_at": now,
                "vector": blob,
            }
            for row, blob, _ in keep
        ],
    )
    conn.execute(delete(lesson_signatures).where(lesson_signatures.c.lesson_id.in_(written)))
    conn.execute(
        insert(lesson_signatures),
        [
            {"lesson_id": row["id"], "model": embedder.name, "tenant_id": tenant_id, "embedded_at": now, "bits": bits}
            for row, _, bits in keep
        ],
    )
    # Tells ranking indexes in every process that vectors arrived.
    conn.execute(
        update(embed_state).where(embed_state.c.tenant_id == tenant_id).values(generation=embed_state.c.generation + 1)
    )
    return len(keep)


def _relevance(similarity: float | None, margin: float, lexical: bool, mode: str) -> float:
    """Recall's absolute relevance. The lexical arm alone has no absolute scale: any match counts."""
    if mode == "fts":
        return 1.0 if lexical else 0.0
    return round((similarity or 0.0) + GAP_WEIGHT * margin, 4)


def _queued(conn: Connection, tenant_id: str, n: int) -> list[dict[str, Any]]:
    rows = (
        conn.execute(
            select(lessons.c.id, lessons.c.key, lessons.c.value, lessons.c.tags, lessons.c.content_hash)
            .join(embed_queue, embed_queue.c.lesson_id == lessons.c.id)
            .where(embed_queue.c.tenant_id == tenant_id)
            .order_by(embed_queue.c.lesson_id)
            .limit(n)
        )
        .mappings()
        .all()
    )
    # Queue entries whose lesson is gone are cleaned by the drop path; skip them here.
    return [dict(r) for r in rows]


def _embed_text(row: dict[str, Any]) -> str:
    """What a lesson's vector represents: its key words and its text (tags add little meaning)."""
    return row["key"].replace("-", " ").replace("::", " ") + ". " + row["value"]


def _match_expr(conn: Connection, terms: list[str], weigh: bool, conjunctive: bool) -> ix.FtsQuery | None:
    """The full-text query: quoted terms only, so no user input is read as query syntax.

    Hybrid search: every term (AND), the precise lexical signal fusion needs. Full-text-only
    search: any term (OR), ranked by BM25, classic keyword search. Recall: an OR of the terms the
    store knows, rarest first, at most 12.
    """
    if not weigh:
        phrases = [ix.fts_phrase(t) for t in terms[:32]]
        if not conjunctive:
            return ix.fts_any(phrases)
        conj = ix.fts_all(phrases)
        # An identifier (FROB_GRACE_MS, http2, v1.4) is specific enough to match on its own: extra
        # words around it must not empty the lexical arm and leave it to the vector arm.
        idents = [t for t in terms[:32] if "_" in t or "." in t or any(c.isdigit() for c in t)]
        if idents and len(terms) > 1:
            return ix.fts_any([conj, *(ix.fts_phrase(t) for t in idents)])
        return conj
    df, total = ix.doc_frequencies(conn, terms)
    known = [t for t in terms if df.get(t)]
    if not known or not total:
        return None
    # Terms in more than half the store carry no signal (BM25's IDF goes negative there).
    useful = [t for t in known if df[t] <= total / 2] or known
    useful.sort(key=lambda t: math.log(1 + total / df[t]), reverse=True)
    return ix.fts_any([ix.fts_phrase(t) for t in useful[:12]])


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


def _cosines(conn: Connection, model: str, qvec: bytes, ids: list[int]) -> dict[int, float]:
    """Exact cosine similarity (vectors are L2-normalized, so a dot product) for ``ids``."""
    import numpy as np

    found = ix.float_vectors(conn, model, ids)
    if not found:
        return {}
    keys = list(found)
    matrix = np.frombuffer(b"".join(found[k] for k in keys), dtype="<f4").reshape(len(keys), -1)
    sims = matrix @ np.frombuffer(qvec, dtype="<f4")
    return {k: float(v) for k, v in zip(keys, sims, strict=True)}


def _table_in_use(conn: Connection, table: str) -> bool:
    models = conn.execute(select(lesson_embeddings.c.model, lesson_embeddings.c.dim).distinct()).all()
    return any(ix.vec_table(m, d) == table for m, d in models)
