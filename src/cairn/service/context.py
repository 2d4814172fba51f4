"""The session-start context block: the read every session meets.

One read transaction: bring the tenant's ranking index up to date, take every eligible lesson of
the ladder (the whole store: no newest-N window), apply ladder precedence (a narrower rung's lesson
shadows a broader one with the same key), score them all, keep a bounded top set, and only then
fetch text for that set from the database. Relevance comes from the branch name and the task hint
through the same two arms search uses: the full-text index (bounded top matches, BM25) and the
vector index (bounded KNN, exact cosine). Scoring, caps, MMR and rendering are pure
(``core/context.py``); this module only gathers their inputs.

Context never embeds queued lessons itself (a bulk import would make one session start embed
thousands of texts); ``cairn serve`` drains the queue in the background, and until then a lesson
is found by its words only.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from cairn.core import context as core
from cairn.core.content import first_line
from cairn.core.lesson import MAX_TASK_CHARS
from cairn.core.principal import READ, Principal
from cairn.core.scope import ladder
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.service import indexing
from cairn.service.tx import read_tx
from cairn.store import search_index as ix
from cairn.store.engine import Store
from cairn.store.schema import lessons

if TYPE_CHECKING:
    import numpy as np

    from cairn.service.rank_index import RankIndex
    from cairn.service.rank_indexes import RankIndexes

MAX_TERMS = 16  # branch and task words weighed for lexical relevance
TERM_CACHE = 64  # terms whose full-text matches are kept between changes
TEXT_CACHE = 5000  # top-set lesson rows kept between changes
SEMANTIC_DEPTH = 100  # nearest by Hamming distance, re-ranked by exact cosine
QUERY_CACHE = 256  # task/branch embeddings kept (a branch's session starts repeat the same text)
# Cosine similarity (all-MiniLM-L6-v2) mapped to [0, 1]: below the floor a lesson is unrelated to the
# task; at the ceiling it is as related as a paraphrase. Read off the eval set's answer/distractor
# similarity distributions (evals/README.md).
COSINE_FLOOR, COSINE_CEILING = 0.25, 0.65


_TOP_ROWS = select(
    lessons.c.id,
    lessons.c.tenant_id,
    lessons.c.scope,
    lessons.c.key,
    lessons.c.value,
    lessons.c.trust,
    lessons.c.tags,
    lessons.c.origin,
    lessons.c.author,
).where(lessons.c.id.in_(bindparam("ids", expanding=True)))


def top_set_size(max_chars: int) -> int:
    """How many lessons to read with their text: ~4x the lines the budget can show (~20 per 3000)."""
    return max(100, max_chars // 30)


class Context:
    """The session-start block; keeps the task embeddings it was asked for (a branch repeats them)."""

    def __init__(
        self, store: Store, settings: Settings, ranks: RankIndexes, query_vectors: dict[tuple[str, str], bytes]
    ) -> None:
        self.store = store
        self.settings = settings
        self.ranks = ranks
        self._query_vectors = query_vectors

    def context(
        self,
        principal: Principal,
        *,
        repo: str | None = None,
        branch: str | None = None,
        project: str | None = None,
        task: str | None = None,
        max_chars: int | None = None,
        loop_cap: int | None = None,
        settings: Settings | None = None,
    ) -> dict[str, Any]:
        """The block for one working context. ``settings`` carries a repository's ``.cairn.toml``
        when the caller (the daemon) serves several repositories; flags override both."""
        import numpy as np

        principal.require(READ)
        base = settings or self.settings
        cfg = base.with_overrides(max_chars=max_chars, loop_cap=loop_cap)
        task = (task or "").strip() or None
        if task and len(task) > MAX_TASK_CHARS:
            raise CairnError("INVALID_INPUT", f"the task hint is {len(task)} characters; the limit is {MAX_TASK_CHARS}")
        rungs = ladder(repo=repo, branch=branch, project=project)
        visible = [s for s in rungs if principal.can_see(s)]
        terms = core.relevance_terms(branch, task)
        qvec = self._query_vector(task or " ".join(terms)) if terms else None
        idx = self.ranks.get(principal.tenant_id)

        def tx(conn: Connection) -> dict[str, Any]:
            now = utcnow()
            with idx.lock:
                idx.refresh(conn, indexing.configured_model())
                pos, rung, id_order = _eligible(idx, visible, now.timestamp())
                term_cache = idx.memo.setdefault("terms", {})  # this index version's doclists
                text_cache = idx.memo.setdefault("texts", {})  # and the top sets' text
                arrays = idx.arrays
                scope_names = idx.scopes
                bucket_names = idx.buckets
            counts = np.bincount(rung, minlength=len(visible)) if len(rung) else np.zeros(len(visible), int)
            eligible = {s: int(c) for s, c in zip(visible, counts, strict=True)}
            relevance = None
            if terms:
                relevance = _relevance(conn, terms, qvec, arrays, pos, id_order, term_cache)
            age_days = (now.timestamp() - arrays.updated[pos]) / 86400.0
            factors = core.score(
                age_days,
                arrays.seen[pos],
                arrays.helped[pos],
                arrays.not_helped[pos],
                arrays.verified[pos],
                relevance,
                weights=core.Weights(cfg.weight_recency, cfg.weight_salience, cfg.weight_relevance, cfg.weight_outcome),
                half_life_days=cfg.half_life_days,
                candidate_factor=cfg.candidate_factor,
            )
            top = _top_set(factors["score"], arrays.bucket[pos], arrays.human[pos], cfg.loop_cap, cfg.max_chars)
            items = _items(conn, principal, arrays, pos, top, factors, scope_names, bucket_names, text_cache)
            ranked = core.cap_buckets(items, cfg.loop_cap)
            label = visible[0] if visible else "global"
            block = core.fill(ranked, eligible=eligible, order=visible, label=label, max_chars=cfg.max_chars)
            return {
                "text": block.text,
                "loaded": len(block.chosen),
                "eligible": sum(eligible.values()),
                "ladder": visible,
                "scopes": [
                    {
                        "scope": s,
                        "eligible": eligible[s],
                        "loaded": eligible[s] - block.left_out.get(s, 0),
                        "left_out": block.left_out.get(s, 0),
                    }
                    for s in visible
                ],  # fmt: skip
                "terms": terms,
                "budget": cfg.max_chars,
                "chars": len(block.text),
                "loop_cap": cfg.loop_cap,
                "lessons": [_public(i) for i in block.chosen],
            }

        return read_tx(self.store, principal, tx)

    def _query_vector(self, text: str) -> bytes | None:
        """The task's embedding (cached: every session start on a branch asks for the same one)."""
        from cairn.search.embed import get_embedder, vector_to_blob

        embedder = get_embedder()
        cache = self._query_vectors
        key = (embedder.name, text[:MAX_TASK_CHARS])
        if key not in cache:
            if len(cache) >= QUERY_CACHE:
                cache.pop(next(iter(cache)))
            cache[key] = vector_to_blob(embedder.embed([key[1]])[0])
        return cache[key]


def _eligible(idx: RankIndex, visible: list[str], now_ts: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of the eligible lessons in the index, and each one's rung on the ladder.

    Eligible: in a visible rung, not expired, and not shadowed by an active lesson with the same key
    on a narrower rung. Memoized per index version and ladder until the next expiry in it passes.
    """
    import numpy as np

    memo_key = tuple(visible)
    hit = idx.memo.get(memo_key)
    if hit is not None and now_ts < hit[0]:
        return hit[1], hit[2], hit[3]
    a = idx.arrays
    codes = idx.codes_of(visible)
    rung_of = np.full(len(idx.scopes) + 1, -1, dtype=np.int32)
    for code in codes:
        rung_of[code] = visible.index(idx.scopes[code])
    rung_all = rung_of[a.scope] if len(a.ids) else np.empty(0, dtype=np.int32)
    in_ladder = rung_all >= 0
    live = in_ladder & (a.expires > now_ts)
    pos = np.nonzero(live)[0]
    rung = rung_all[pos]
    if len(codes) > 1 and len(pos):
        # Precedence: sort by (key, rung); the first row of each key holds the narrowest rung.
        order = np.lexsort((rung, a.key[pos]))
        keys, rungs = a.key[pos][order], rung[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        group_start = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
        keep = np.empty(len(order), dtype=bool)
        keep[order] = rungs == rungs[group_start]
        pos, rung = pos[keep], rung[keep]
    upcoming = a.expires[in_ladder]
    upcoming = upcoming[upcoming > now_ts]
    valid_until = float(upcoming.min()) if len(upcoming) else float("inf")
    id_order = np.argsort(a.ids[pos], kind="stable")  # for locating ids among the eligible (relevance)
    idx.memo[memo_key] = (valid_until, pos, rung, id_order)
    return pos, rung, id_order


def _relevance(
    conn: Connection,
    terms: list[str],
    qvec: bytes | None,
    arrays: Any,
    pos: np.ndarray,
    order: np.ndarray,
    term_cache: dict[str, np.ndarray],
) -> np.ndarray:
    """Relevance in [0, 1] of each eligible lesson: the better of its lexical and semantic match.

    Lexical: IDF-weighted share of the terms each eligible lesson contains (``_lexical``), for every
    eligible lesson. Semantic: Hamming distance between sign bits over every eligible lesson with a
    vector (in memory), then exact cosine for the nearest ``SEMANTIC_DEPTH``, mapped from
    [COSINE_FLOOR, COSINE_CEILING] to [0, 1]; farther lessons are at 0 semantically.
    """
    import numpy as np

    from cairn.service.search_arms import cosines as _cosines

    ids = arrays.ids[pos]
    out = np.zeros(len(ids), dtype=np.float64)
    if not len(ids):
        return out
    found: dict[int, float] = {}
    out = _lexical(conn, terms, ids, order, term_cache)
    with_vec = np.nonzero(arrays.has_vec[pos])[0]
    if qvec is not None and len(with_vec) and arrays.bits.shape[1] * 64 == len(qvec) // 4:
        query_bits = np.frombuffer(_sign_bits(qvec), dtype=np.uint64)
        distance = np.bitwise_count(arrays.bits[pos[with_vec]] ^ query_bits).sum(axis=1)
        k = min(SEMANTIC_DEPTH, len(with_vec))
        nearest = with_vec[np.argpartition(distance, k - 1)[:k]] if len(with_vec) > k else with_vec
        model = indexing.configured_model()
        for lesson_id, cos in _cosines(conn, model, qvec, [int(i) for i in ids[nearest]]).items():
            sem = min(1.0, max(0.0, (cos - COSINE_FLOOR) / (COSINE_CEILING - COSINE_FLOOR)))
            found[lesson_id] = max(found.get(lesson_id, 0.0), sem)
    if found:
        keys = np.fromiter(found, dtype=np.int64, count=len(found))
        vals = np.fromiter(found.values(), dtype=np.float64, count=len(found))
        where, hit = _locate(ids, order, keys)
        out[where[hit]] = np.maximum(out[where[hit]], vals[hit])
    return out


def _locate(ids: np.ndarray, order: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions in ``ids`` (sorted by ``order``) of each of ``keys``, and which keys are there at all."""
    import numpy as np

    slot = np.minimum(np.searchsorted(ids, keys, sorter=order), len(ids) - 1)
    return order[slot], ids[order[slot]] == keys


def _lexical(
    conn: Connection, terms: list[str], ids: np.ndarray, order: np.ndarray, cache: dict[str, np.ndarray]
) -> np.ndarray:
    """Share of the terms' weight each eligible lesson contains, in [0, 1].

    Each term weighs its inverse document frequency among the eligible lessons, log(1 + n/df), so a
    lesson naming the rare word of ``feat/frob-grace-timeout`` beats one naming only "timeout". Every
    eligible lesson is scored (no top-N cut): the full-text index returns each term's matches
    without running a ranking function, and the intersection with this tenant's eligible ids is
    done here, so other tenants' matches only cost their reading.

    Each term's matches are kept in ``cache`` until the next change to the tenant's lessons (the
    ranking index clears it): every session start on one branch asks for the same terms, and a
    common word's doclist grows with the store.
    """
    import numpy as np

    score = np.zeros(len(ids), dtype=np.float64)
    n = len(ids)
    total = 0.0
    for term in terms[:MAX_TERMS]:
        matches = cache.get(term)
        if matches is None:
            matches = np.asarray(ix.fts_rowids(conn, term), dtype=np.int64)
            if len(cache) >= TERM_CACHE:
                cache.pop(next(iter(cache)))
            cache[term] = matches
        if not len(matches):
            continue
        where, hit = _locate(ids, order, matches)
        df = int(hit.sum())
        if not df:
            continue
        weight = float(np.log1p(n / df))
        score[where[hit]] += weight
        total += weight
    return score / total if total else score


def _sign_bits(qvec: bytes) -> bytes:
    from cairn.search.embed import signature

    return signature(qvec)


def _top_set(scores: np.ndarray, bucket: np.ndarray, human: np.ndarray, loop_cap: int, max_chars: int) -> np.ndarray:
    """Indices (into the eligible arrays) of the bounded top set, best first.

    Lessons outside loop buckets compete for ``top_set_size`` places; each loop bucket sends only its
    best ``loop_cap`` (the cap would drop the rest anyway), so a bucket of 50,000 bot notes costs
    the same as one of five.
    """
    import numpy as np

    k = top_set_size(max_chars)
    free = np.nonzero((bucket < 0) | human)[0]
    if len(free) > k:
        free = free[np.argpartition(-scores[free], k - 1)[:k]]
    chosen = [free]
    if loop_cap > 0:
        looped = np.nonzero((bucket >= 0) & ~human)[0]
        if len(looped):
            order = looped[np.lexsort((-scores[looped], bucket[looped]))]
            b = bucket[order]
            start = np.r_[0, np.nonzero(b[1:] != b[:-1])[0] + 1]
            rank_in_bucket = np.arange(len(order)) - np.repeat(start, np.diff(np.r_[start, len(order)]))
            chosen.append(order[rank_in_bucket < loop_cap])
    top = np.concatenate(chosen)
    return top[np.argsort(-scores[top], kind="stable")]


def _items(
    conn: Connection,
    principal: Principal,
    arrays: Any,
    pos: np.ndarray,
    top: np.ndarray,
    factors: dict[str, np.ndarray],
    scope_names: list[str],
    bucket_names: list[str],
    cache: dict[int, Any],
) -> list[core.Item]:
    """The top set with its text, read from the database (or kept from the last call of this version).

    The rows are kept in the ranking index's memo, which any change to the tenant's lessons clears
    before the next read: a forgotten or edited lesson's old text is never served from it. At a
    million lessons the top set's rows are scattered over a 5 GB file; reading them again each
    session start cost 100+ ms whenever the page cache had moved on.
    """
    if not len(top):
        return []
    ids = [int(i) for i in arrays.ids[pos[top]]]
    rows: dict[int, Any] = {i: cache[i] for i in ids if i in cache}
    missing = [i for i in ids if i not in rows]
    for start in range(0, len(missing), 500):
        batch = missing[start : start + 500]
        # By primary key alone, the tenant checked on each row: with the tenant in the WHERE clause
        # SQLite walks a (tenant, ...) index instead, slow on a large tenant.
        for r in conn.execute(_TOP_ROWS, {"ids": batch}).mappings():
            if r["tenant_id"] == principal.tenant_id:
                rows[r["id"]] = cache[r["id"]] = dict(r)
    if len(cache) > TEXT_CACHE:
        for stale in [k for k in cache if k not in rows][: len(cache) - TEXT_CACHE]:
            del cache[stale]
    hooked = [i for i in ids if i in rows and rows[i]["origin"] == "webhook"]
    labels: dict[int, str] = {}
    if hooked:  # the webhook service's module only when a webhook lesson is in the block
        from cairn.service.webhooks import provenance_labels

        labels = provenance_labels(conn, principal.tenant_id, hooked)
    items = []
    for n, lesson_id in zip(top, ids, strict=True):
        r = rows.get(lesson_id)
        if r is None:
            continue  # erased between the index refresh and this read (same snapshot on SQLite)
        p = pos[n]
        bucket_code = int(arrays.bucket[p])
        items.append(
            core.Item(
                id=lesson_id,
                scope=r["scope"],
                key=r["key"],
                summary=first_line(r["value"], 400),
                score=float(factors["score"][n]),
                trust=r["trust"],
                bucket=bucket_names[bucket_code] if bucket_code >= 0 else None,
                human=bool(arrays.human[p]),
                provenance=labels.get(lesson_id) or _provenance(r["origin"], r["author"]),
                text_words=core.lesson_words(r["key"], r["value"]),
                extra={
                    "tags": json.loads(r["tags"]),
                    "factors": {k: round(float(v[n]), 4) for k, v in factors.items() if k != "score"},
                },
            )
        )
    return items


def _provenance(origin: str, author: str | None) -> str | None:
    """Text the tenant's own agents and people did not write says where it came from."""
    if origin in ("agent", "human", "import", "consolidation"):
        return None
    return f"via {origin} {author}" if author else f"via {origin}"


def _public(item: core.Item) -> dict[str, Any]:
    return {
        "scope": item.scope,
        "key": item.key,
        "trust": item.trust,
        "tags": item.extra.get("tags", []),
        "score": round(item.score, 4),
        "factors": item.extra.get("factors", {}),
        "summary": item.summary[: core.SUMMARY_MAX],
        "bucket": item.bucket,
        "provenance": item.provenance,
    }
