"""Search indexes kept in step with lessons inside the mutating transaction.

``mutate.apply`` calls ``sync`` with every lesson's new state and purge calls ``drop``: a lesson
that leaves the active set leaves the full-text index and the vector index in the same commit.
Embedding itself is deferred (``embed_queue``); see ``service/search.py`` for why and when it runs.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.engine import Connection

from cairn.core.timeparse import utcnow
from cairn.store import search_index as ix
from cairn.store.schema import embed_queue, lesson_embeddings, lesson_signatures

# Built once: every mutation runs them (see records.BY_ADDRESS).
_EMBEDDED = select(lesson_embeddings.c.content_hash, lesson_embeddings.c.dim).where(
    lesson_embeddings.c.lesson_id == bindparam("id"), lesson_embeddings.c.model == bindparam("model")
)
_QUEUED = select(embed_queue.c.lesson_id).where(embed_queue.c.lesson_id == bindparam("id"))
_ENQUEUE = insert(embed_queue)


def configured_model() -> str:
    """The embedding model new vectors are made with, without loading it."""
    from cairn.search.embed import ENV_MODEL, MODEL_NAME

    return os.environ.get(ENV_MODEL, "").strip() or MODEL_NAME


def sync(conn: Connection, row: dict[str, Any], active: bool) -> None:
    if not active:
        drop(conn, row["id"])
        return
    ix.fts_put(conn, row)
    current = conn.execute(_EMBEDDED, {"id": row["id"], "model": configured_model()}).first()
    if current is not None and current.content_hash == row["content_hash"]:
        # Same text, same vector: only the filter columns (scope, trust, expiry) may have changed.
        ix.vec_refresh(conn, ix.vec_table(configured_model(), current.dim), row)
        return
    if conn.execute(_QUEUED, {"id": row["id"]}).first() is None:
        conn.execute(_ENQUEUE, {"lesson_id": row["id"], "tenant_id": row["tenant_id"], "queued_at": utcnow()})


def sync_many(conn: Connection, items: list[tuple[dict[str, Any], bool, bool]]) -> None:
    """``sync`` for several lessons; ``(row, active, fresh)`` where fresh means just created.

    A fresh active lesson has no index entries, vector or queue entry yet, so it needs only two
    inserts, issued once for the whole batch.
    """
    fresh = [row for row, active, new in items if active and new]
    if fresh:
        ix.fts_insert_many(conn, fresh)
        now = utcnow()
        conn.execute(_ENQUEUE, [{"lesson_id": r["id"], "tenant_id": r["tenant_id"], "queued_at": now} for r in fresh])
    for row, active, new in items:
        if not (active and new):
            sync(conn, row, active)


def drop(conn: Connection, lesson_id: int) -> None:
    ix.fts_drop(conn, lesson_id)
    ix.vec_drop(conn, lesson_id)
    conn.execute(delete(lesson_embeddings).where(lesson_embeddings.c.lesson_id == lesson_id))
    conn.execute(delete(lesson_signatures).where(lesson_signatures.c.lesson_id == lesson_id))
    conn.execute(delete(embed_queue).where(embed_queue.c.lesson_id == lesson_id))
