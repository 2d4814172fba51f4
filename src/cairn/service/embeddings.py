"""Embeddings: the queue writes fill, drained into vectors; and the rebuild of every index.

Embeddings are made lazily: writes enqueue (``embed_queue``) and a drain turns the queue into vectors,
re-checking each lesson's content hash under the write transaction so a vector made from text that
changed meanwhile is discarded and the lesson re-queued. Who drains: ``cairn serve`` in the background
(every few seconds), ``cairn import`` before it returns (its progress bar), consolidation and reindex
(they need every vector); a search or recall embeds at most a small slice first (``SEARCH_SLICE``) and
answers from what is embedded plus the full-text arm, saying how many still wait (``pending_embeddings``).

A drain is several transactions by design: reading a batch, embedding it (no transaction held while
the model runs) and writing its vectors. The model runs on a worker thread, one batch ahead: while
batch N's vectors are written, batch N+1 is embedded (onnxruntime and sqlite release the GIL), so the
database side costs the drain little wall time beyond the model's. Batches are read by key order past
the last one read (each is read before the previous one's queue rows are deleted); a lesson re-queued
behind that cursor (edited while embedded) is picked up by one more pass from the start.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from cairn.core.principal import Principal
from cairn.core.timeparse import utcnow
from cairn.service import indexing
from cairn.service.records import active_clause, status
from cairn.service.tx import read_tx, write_tx
from cairn.store import search_index as ix
from cairn.store.engine import Store
from cairn.store.schema import embed_queue, embed_state, lesson_embeddings, lesson_signatures, lessons

DRAIN_BATCH = 256
# Lessons a search or recall embeds before answering: a few of an agent's latest writes (a fraction of
# a second of model time); a bigger queue is the background drain's, and the answer says it waits.
SEARCH_SLICE = 32
FOLLOW_EVERY = 0.5  # seconds between looks at the queue while another drain of this process runs
#: How long an interrupted import waits for its drain thread to finish the batch in hand. A process that
#: exits while that thread is inside the model aborts in onnxruntime's native code instead of exiting.
STOP_WAIT = 60.0

Progress = Callable[[int, int], None]
_LOCKS: weakref.WeakKeyDictionary[Store, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


@dataclass(eq=False, repr=False)
class Embeddings:
    """The tenant's embedding queue and index rebuilds."""

    store: Store

    @property
    def _running(self) -> threading.Lock:
        """One drain at a time per store in this process (the daemon's background round, a forwarded
        import, a search's slice, whichever service object runs it): two would read and embed the same
        batches, spending the model twice."""
        with _LOCKS_GUARD:
            lock = _LOCKS.get(self.store)
            if lock is None:
                lock = _LOCKS[self.store] = threading.Lock()
            return lock

    def drain_embeddings(
        self,
        principal: Principal,
        progress: Progress | None = None,
        *,
        limit: int | None = None,
        wait: bool = True,
        filling: threading.Event | None = None,
        stop: threading.Event | None = None,
    ) -> int:
        """Embed the tenant's queued lessons; returns how many vectors were written.

        ``limit``: handle at most that many queued lessons (a search's slice). ``wait``: when another
        drain of this service is running, follow it (progress from the queue's length) until the queue
        is empty, instead of returning 0 at once; without ``wait`` a queue that fits in ``limit`` is
        still followed (that drain is embedding exactly what this call would have). ``filling``: the
        queue is still being filled (an import writing alongside, ``drain_alongside``); an empty queue
        ends the drain only once it is set. ``stop``: end after the batch being written.
        """

        def probe(c: Connection) -> tuple[str | None, int]:
            state = c.execute(select(embed_state.c.model).where(embed_state.c.tenant_id == principal.tenant_id))
            return state.scalar(), _pending(c, principal.tenant_id)

        # Read first: a search with nothing to embed must not take the write lock (WAL readers never
        # wait for a writer; a write probe on every search made them queue behind imports).
        state, pending = read_tx(self.store, principal, probe)
        if state != indexing.configured_model():
            write_tx(self.store, principal, lambda c, acting: _follow_model(c, acting.tenant_id))
            state, pending = read_tx(self.store, principal, probe)
        if not pending and filling is None:
            return 0
        go = _Run(limit, filling, stop or threading.Event())
        if not self._running.acquire(blocking=False):
            fits = limit is not None and pending <= limit
            return self._follow(principal, pending, progress, go) if wait or fits else 0
        try:
            return self._drain(principal, pending, progress, go)
        finally:
            self._running.release()

    def drain_slice(self, principal: Principal) -> int:
        """What a search or recall embeds before it answers: at most ``SEARCH_SLICE`` queued lessons.

        While another drain of this process (the daemon's background round) is at work, a queue that fits
        in the slice (the lessons just written) is waited for, not embedded twice: that drain is embedding
        them now, and a recall right after a write must find them as it does without a daemon. A longer
        queue (an import) is not waited for: the answer comes from what is embedded and the full text."""
        return self.drain_embeddings(principal, limit=SEARCH_SLICE, wait=False)

    @contextmanager
    def drain_alongside(self, principal: Principal, progress: Progress | None = None) -> Iterator[dict[str, int]]:
        """Embed what a bulk write (an import) queues while it writes: a thread drains the queue as the
        write's transactions commit; leaving the block drains the rest and sets ``["embedded"]``.

        The write is one Python thread, so it leaves a core idle that the model's runs (which release the
        GIL) can use; the store is searchable by meaning sooner than writing first and embedding after.
        An exception in the block (Ctrl-C) ends the drain after the batch it is writing, and waits (at most
        :data:`STOP_WAIT`) for that batch before passing the exception on: the thread must not be inside the
        model when the process exits.
        """
        filling, stop = threading.Event(), threading.Event()
        out: dict[str, int] = {}
        failed: list[BaseException] = []

        def run() -> None:
            try:
                out["embedded"] = self.drain_embeddings(principal, progress, filling=filling, stop=stop)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
                failed.append(exc)

        worker = threading.Thread(target=run, name="cairn-drain", daemon=True)
        worker.start()
        try:
            yield out
            filling.set()
            worker.join()
        except BaseException:
            stop.set()
            filling.set()
            worker.join(STOP_WAIT)
            raise
        if failed:
            raise failed[0]

    def pending_embeddings(self, principal: Principal) -> int:
        """How many of the lessons the caller may see wait for their vector."""
        return read_tx(self.store, principal, lambda c: pending_embeddings(c, principal))

    def _follow(self, principal: Principal, total: int, progress: Progress | None, go: _Run) -> int:
        """Another drain of this service runs: report the queue shrinking until it is empty, and drain
        what is left if that drain stops first. Returns how many left the queue meanwhile."""
        while not self._running.acquire(timeout=FOLLOW_EVERY):
            left = read_tx(self.store, principal, lambda c: _pending(c, principal.tenant_id))
            total = max(total, left)
            if progress:
                progress(max(total - left, 0), total)
            gone = max(total - left, 0)
            if (not left and go.filled()) or go.stop.is_set() or (go.limit is not None and gone >= go.limit):
                return gone
        try:
            left = read_tx(self.store, principal, lambda c: _pending(c, principal.tenant_id))
            gone = max(total - left, 0)
            if left or not go.filled():
                return gone + self._drain(principal, left, progress, go, offset=gone, total=total)
            if progress:
                progress(gone, total)
            return gone
        finally:
            self._running.release()

    def _drain(
        self,
        principal: Principal,
        pending: int,
        progress: Progress | None,
        go: _Run,
        offset: int = 0,
        total: int | None = None,
    ) -> int:
        """The pipelined drain: embed batch N+1 on a worker thread while batch N's vectors are written."""
        from cairn.search.embed import get_embedder

        embedder = get_embedder()
        total = total or pending
        tenant = principal.tenant_id
        handled = offset  # lessons that left the queue (written, or dropped as no longer active)
        written = 0
        taken = 0  # lessons read from the queue, against ``limit``

        def read(after: int | None) -> list[dict[str, Any]]:
            nonlocal taken
            n = DRAIN_BATCH if go.limit is None else min(DRAIN_BATCH, go.limit - taken)
            if n <= 0 or go.stop.is_set():
                return []
            batch = read_tx(self.store, principal, lambda c: _queued(c, tenant, n, after))
            taken += len(batch)
            return batch

        def from_start() -> list[dict[str, Any]]:
            """Lessons re-queued behind the cursor (edited while embedded) or queued meanwhile with a
            lower key; while the queue is still being filled, waits for more."""
            while True:
                filled = go.filled()
                batch = read(None)
                if batch or filled or go.stop.is_set():
                    return batch
                go.wait()

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cairn-embed") as pool:

            def submit(batch: list[dict[str, Any]]) -> Future[Any] | None:
                return pool.submit(_embed_batch, embedder, batch) if batch else None

            batch = from_start()
            job = submit(batch)
            while batch and job is not None:
                # Read the next batch (still queued: nothing of this one is deleted yet) before waiting
                # for this one's vectors, then start the model on it while this one is written.
                following = read(batch[-1]["id"])
                vectors = job.result()
                job = submit(following)

                def write(
                    conn: Connection, acting: Principal, batch: list[dict[str, Any]] = batch, vectors: Any = vectors
                ) -> tuple[int, int]:
                    return _write_vectors(conn, acting.tenant_id, embedder, batch, vectors)

                stored, requeued = write_tx(self.store, principal, write)
                written += stored
                handled += len(batch) - requeued
                if not go.filled():  # the import goes on adding: the total is what is known so far
                    total = max(total, handled + read_tx(self.store, principal, lambda c: _pending(c, tenant)))
                if progress:
                    progress(handled, max(total, handled))
                if not following:  # past the cursor's end; read from the start only now this batch is written
                    following = from_start()
                    job = submit(following)
                batch = following
        return written

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
        # Imported here: a search or recall that drains a slice never needs the paraphrase rules.
        from cairn.service import paraphrase

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


@dataclass
class _Run:
    """How one drain runs: at most ``limit`` lessons; while ``filling`` is not set, an empty queue means
    "wait for more"; ``stop`` ends it after the batch it is writing."""

    limit: int | None
    filling: threading.Event | None
    stop: threading.Event

    def filled(self) -> bool:
        return self.filling is None or self.filling.is_set()

    def wait(self) -> None:
        if self.filling is not None:
            self.filling.wait(FOLLOW_EVERY)


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


def _write_vectors(
    conn: Connection, tenant_id: str, embedder: Any, batch: list[dict[str, Any]], vectors: Any
) -> tuple[int, int]:
    """Store a drained batch's vectors; returns how many were written and how many were re-queued.

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
        return 0, len(changed)
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
    return len(keep), len(changed)


def _queued(conn: Connection, tenant_id: str, n: int, after: int | None = None) -> list[dict[str, Any]]:
    """The next ``n`` queued lessons of the tenant in key order, past ``after`` when given."""
    where = [embed_queue.c.tenant_id == tenant_id]
    if after is not None:
        where.append(embed_queue.c.lesson_id > after)
    rows = (
        conn.execute(
            select(lessons.c.id, lessons.c.key, lessons.c.value, lessons.c.content_hash)
            .join(embed_queue, embed_queue.c.lesson_id == lessons.c.id)
            .where(*where)
            .order_by(embed_queue.c.lesson_id)
            .limit(n)
        )
        .mappings()
        .all()
    )
    # Queue entries whose lesson is gone are cleaned by the drop path; skip them here.
    return [dict(r) for r in rows]


def _pending(conn: Connection, tenant_id: str) -> int:
    """How many of the tenant's lessons wait for their vector (found by words only until then)."""
    count = select(func.count()).select_from(embed_queue).where(embed_queue.c.tenant_id == tenant_id)
    return int(conn.execute(count).scalar_one())


def pending_embeddings(conn: Connection, principal: Principal) -> int:
    """The queue's length as ``principal`` may see it: a scope-limited caller counts only its scopes."""
    if not principal.scope_limited:
        return _pending(conn, principal.tenant_id)
    queued = conn.execute(
        select(lessons.c.scope, func.count())
        .select_from(embed_queue.join(lessons, lessons.c.id == embed_queue.c.lesson_id))
        .where(embed_queue.c.tenant_id == principal.tenant_id)
        .group_by(lessons.c.scope)
    ).all()
    return sum(n for scope, n in queued if principal.can_see(scope))


def _embed_batch(embedder: Any, batch: list[dict[str, Any]]) -> Any:
    """The batch's vectors, each distinct text embedded once (an import often repeats a text)."""
    texts = [embed_text(r) for r in batch]
    unique = list(dict.fromkeys(texts))
    vectors = embedder.embed(unique)
    if len(unique) == len(texts):
        return vectors
    at = {t: i for i, t in enumerate(unique)}
    return vectors[[at[t] for t in texts]]


def embed_text(row: dict[str, Any]) -> str:
    """What a lesson's vector represents: its key words and its text (tags add little meaning)."""
    return row["key"].replace("-", " ").replace("::", " ") + ". " + row["value"]


def _table_in_use(conn: Connection, table: str) -> bool:
    models = conn.execute(select(lesson_embeddings.c.model, lesson_embeddings.c.dim).distinct()).all()
    return any(ix.vec_table(m, d) == table for m, d in models)
