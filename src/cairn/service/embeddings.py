"""Embeddings: the queue writes fill, drained into vectors; and the rebuild of every index.

Embeddings are made lazily: writes enqueue (``embed_queue``) and every search first drains the
tenant's queue with the warm model (``cairn serve`` drains in the background too), re-checking each
lesson's content hash under the write transaction so a vector made from text that changed meanwhile
is discarded. A drain is several transactions by design: reading a batch, embedding it (no
transaction held while the model runs) and writing its vectors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from cairn.core.principal import Principal
from cairn.core.timeparse import utcnow
from cairn.service import indexing, paraphrase
from cairn.service.records import active_clause, status
from cairn.service.tx import read_tx, write_tx
from cairn.store import search_index as ix
from cairn.store.engine import Store
from cairn.store.schema import embed_queue, embed_state, lesson_embeddings, lesson_signatures, lessons

DRAIN_BATCH = 256

Progress = Callable[[int, int], None]


@dataclass(eq=False, repr=False)
class Embeddings:
    """The tenant's embedding queue and index rebuilds."""

    store: Store

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
        state, pending = read_tx(self.store, principal, probe)
        if state != indexing.configured_model():
            write_tx(self.store, principal, lambda c, acting: _follow_model(c, acting.tenant_id))
            state, pending = read_tx(self.store, principal, probe)
        if not pending:
            return 0
        embedder = get_embedder()
        done = 0
        while True:
            batch = read_tx(self.store, principal, lambda c: _queued(c, principal.tenant_id, DRAIN_BATCH))
            if not batch:
                return done
            vectors = embedder.embed([embed_text(r) for r in batch])

            def write(
                conn: Connection, acting: Principal, batch: list[dict[str, Any]] = batch, vectors: Any = vectors
            ) -> int:
                return _write_vectors(conn, acting.tenant_id, embedder, batch, vectors)

            done += write_tx(self.store, principal, write)
            if progress:
                progress(done, pending)

    def reindex(self, principal: Principal, progress: Progress | None = None) -> dict[str, Any]:
        """Rebuild the full-text index and every embedding of the tenant, the tombstones' included (e.g.
        after a model change)."""
        principal.require_account_wide("reindex")
        from cairn.search.embed import get_embedder

        embedder = get_embedder()

        def rebuild(conn: Connection, principal: Principal) -> int:
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

        count = write_tx(self.store, principal, rebuild)
        embedded = self.drain_embeddings(principal, progress)
        # The tombstones' vectors too (service/paraphrase.py): same model as every write compares with.
        tombs = write_tx(
            self.store, principal, lambda conn, acting: paraphrase.reembed(conn, acting.tenant_id, utcnow())
        )
        return {
            "indexed": count,
            "embedded": embedded,
            "tombstones_embedded": tombs,
            "model": embedder.name,
            "dim": embedder.dim,
        }


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


def embed_text(row: dict[str, Any]) -> str:
    """What a lesson's vector represents: its key words and its text (tags add little meaning)."""
    return row["key"].replace("-", " ").replace("::", " ") + ". " + row["value"]


def _table_in_use(conn: Connection, table: str) -> bool:
    models = conn.execute(select(lesson_embeddings.c.model, lesson_embeddings.c.dim).distinct()).all()
    return any(ix.vec_table(m, d) == table for m, d in models)
