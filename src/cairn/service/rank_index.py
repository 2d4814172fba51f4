"""The ranking index: the features context ranks on, for every active lesson of a tenant, in memory.

Why not rank with one SQL query per session start? At a million lessons, scoring every eligible row
in SQL and counting per scope took more than the whole budget of a session-start hook before any
text is fetched (bench/README.md, "Measurements behind the code"). So the database stays the source
of truth and the ranking *features* (a few numbers per lesson) are kept warm in arrays: scoring half
a million rows in numpy takes milliseconds, and the counts come from the same snapshot the ranking
used, so they are exact and consistent with it.

Staying correct: every change to a lesson writes an audit row with the tenant's next ``seq`` in the
same transaction (``service/mutate.py``), so the audit log is a change feed. Before each use the
index reads the tenant's last ``seq``; if it moved, it re-reads only the lessons named by the new
audit rows (a changed lesson is replaced, an archived/erased one disappears). Time-based eligibility
(``expires_at``) is evaluated at query time. Re-reading by id is idempotent, so a change committed
between the ``seq`` read and the row read is simply read again next time.

The index holds ids and numbers; lesson text is read from the database for the bounded top set.
Search and recall also ask it for each lesson's vector in float16 (``refresh(..., vectors=True)``:
768 bytes a lesson at 384 dimensions), so the vector arm ranks by sign bits and re-ranks the nearest
few thousand by exact cosine without reading a vector from the database. An index that only context
uses never loads them.
What context derives per index version (eligible sets, term matches, the top set's rows) lives in
``memo``, which every change clears before the next read, so nothing a later read must not show (a
forgotten lesson's value) outlives the change that hid it.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import and_, case, func, select
from sqlalchemy.engine import Connection

from cairn.core.keys import NAMESPACE_SEPARATOR
from cairn.store import predicates
from cairn.store.dialect import epoch_seconds
from cairn.store.schema import audit_log, embed_state, lesson_embeddings, lesson_signatures, lessons

NO_EXPIRY = 1e18
LOOP_PREFIX = "loop" + NAMESPACE_SEPARATOR
LOAD_CHUNK = 50_000
FULL_RELOAD_AT = 20_000  # more changed lessons than this since the last look: reload everything
# More changed lessons than this: context's term matches are read again in full rather than patched.
FOLLOW_TERMS_AT = 2_000
# Vectors are made by the embedding drain, in any process, and stamped with its clock; one committed
# late with an older stamp is still found by looking this far behind the newest stamp seen.
EMBED_LOOKBACK_S = 120.0
_COLUMNS = (
    lessons.c.id,
    lessons.c.scope,
    lessons.c.key,
    epoch_seconds(lessons.c.updated_at).label("updated"),
    lessons.c.expires_at,  # a datetime, converted exactly: expiry is compared to the microsecond
    lessons.c.seen_count,
    lessons.c.helped_count,
    lessons.c.not_helped_count,
    (lessons.c.trust == "verified").label("verified"),
    (lessons.c.origin == "human").label("human"),
    # Tags only where they name a loop bucket: most lessons then ship no tags at all.
    case((lessons.c.tags.like('%"loop::%'), lessons.c.tags), else_=None).label("loop_tags"),
    lesson_signatures.c.bits,
)


def _source(model: str, vectors: bool) -> Any:
    """Lessons with their signature (and, with ``vectors``, their float vector) from the configured
    model (none yet: NULL)."""
    source = lessons.outerjoin(
        lesson_signatures,
        and_(lesson_signatures.c.lesson_id == lessons.c.id, lesson_signatures.c.model == model),
    )
    if vectors:
        source = source.outerjoin(
            lesson_embeddings,
            and_(lesson_embeddings.c.lesson_id == lessons.c.id, lesson_embeddings.c.model == model),
        )
    return source


def _columns(vectors: bool) -> tuple[Any, ...]:
    return (*_COLUMNS, lesson_embeddings.c.vector) if vectors else _COLUMNS


def _indexable(tenant_id: str) -> Any:
    """Active apart from expiry (checked per query, because time moves without a write)."""
    return and_(lessons.c.tenant_id == tenant_id, *predicates.unarchived())


def loop_bucket(key: str, tags_json: str) -> str | None:
    """A lesson's loop bucket: its ``loop::NAME`` tag, or ``loop`` for a ``loop::`` key without one."""
    if '"loop::' in tags_json:
        import json

        for tag in json.loads(tags_json):
            if tag.startswith("loop::") and len(tag) > 6:
                return tag[6:]
    if key.startswith("loop" + NAMESPACE_SEPARATOR):
        return "loop"
    return None


def key_hash(key: str) -> int:
    """A key as 64 bits, the same in every process (``hash`` is salted per process, and the index's
    arrays outlive it on disk: ``rank_cache``)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little", signed=True)


@dataclass
class Arrays:
    ids: np.ndarray
    scope: np.ndarray  # int32 codes into RankIndex.scopes
    key: np.ndarray  # int64 hash of the key (shadowing compares keys across rungs)
    updated: np.ndarray  # float64 epoch seconds
    expires: np.ndarray
    seen: np.ndarray
    helped: np.ndarray
    not_helped: np.ndarray
    verified: np.ndarray  # bool
    bucket: np.ndarray  # int32 codes into RankIndex.buckets, -1 = none
    human: np.ndarray  # bool
    bits: np.ndarray  # (n, words) uint64 sign bits of the lesson's vector; rows of 0 when it has none
    has_vec: np.ndarray  # bool
    half: np.ndarray  # (n, dim) float16 vectors when the index holds them, else (n, 0); rows of 0 without one

    @staticmethod
    def empty(words: int = 0, dim: int = 0) -> Arrays:
        parts = [np.empty(0, dtype=t) for t in _DTYPES]
        parts[_FIELDS.index("bits")] = np.zeros((0, words), dtype=np.uint64)
        parts[_FIELDS.index("half")] = np.zeros((0, dim), dtype=np.float16)
        return Arrays(*parts)

    def take(self, index: np.ndarray) -> Arrays:
        return Arrays(*(getattr(self, f)[index] for f in _FIELDS))

    @staticmethod
    def concat(parts: list[Arrays]) -> Arrays:
        if not parts:
            return Arrays.empty()
        return Arrays(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))


_FIELDS = (
    "ids", "scope", "key", "updated", "expires", "seen", "helped", "not_helped", "verified", "bucket", "human",
    "bits", "has_vec", "half",
)  # fmt: skip
# The columns that say where a row is on a ladder (its rung, its key, until when it is eligible).
_PLACE_FIELDS = ("ids", "scope", "key", "expires")
_DTYPES = (
    np.int64, np.int32, np.int64, np.float64, np.float64, np.int32, np.int32, np.int32, bool, np.int32, bool,
    np.uint64, bool, np.float16,
)  # fmt: skip


@dataclass
class RankIndex:
    tenant_id: str
    model: str = ""  # whose signatures the index holds (the configured embedding model)
    seq: int = -1
    embed_mark: float = 0.0  # newest embedded_at seen (epoch seconds)
    embed_gen: int | None = None  # embed_state.generation when the index last looked at vectors
    embed_seen: set[tuple[int, float]] = field(default_factory=set)  # the lookback window already read
    embed_looked: float = 0.0  # when (the service's clock, epoch seconds) the vectors were last looked at
    arrays: Arrays = field(default_factory=Arrays.empty)
    scopes: list[str] = field(default_factory=list)
    buckets: list[str] = field(default_factory=list)
    version: int = 0  # bumped on every change, for memoized per-ladder work
    words: int = 0  # uint64 words per signature (dimension / 64), known once a vector is seen
    vectors: bool = False  # whether ``arrays.half`` holds the float16 vectors (search asks; context does not)
    dim: int = 0  # their dimension, known once a vector is seen
    lock: threading.Lock = field(default_factory=threading.Lock)
    persist: Path | None = None  # where the index's state is kept between processes (``rank_cache``)
    unsaved: int = 0  # lessons changed since the state was last loaded or written
    _scope_codes: dict[str, int] = field(default_factory=dict)
    _bucket_codes: dict[str, int] = field(default_factory=dict)
    memo: dict[Any, Any] = field(default_factory=dict)
    _room: dict[str, np.ndarray] = field(default_factory=dict)  # each column's buffer (``_append``)

    def scope_code(self, scope: str) -> int:
        code = self._scope_codes.get(scope)
        if code is None:
            code = self._scope_codes[scope] = len(self.scopes)
            self.scopes.append(scope)
        return code

    def bucket_code(self, bucket: str | None) -> int:
        if bucket is None:
            return -1
        code = self._bucket_codes.get(bucket)
        if code is None:
            code = self._bucket_codes[bucket] = len(self.buckets)
            self.buckets.append(bucket)
        return code

    def codes_of(self, scopes: list[str]) -> list[int]:
        return [self._scope_codes[s] for s in scopes if s in self._scope_codes]

    # -- loading ------------------------------------------------------------------------------
    def _rows_to_arrays(self, rows: list[Any]) -> Arrays:
        """Columns to arrays with as little per-row Python as possible (a million rows at warm-up)."""
        n = len(rows)
        if not n:
            return Arrays.empty(self.words, self.dim)
        cols = list(zip(*rows, strict=True))
        has_vec = np.array([b is not None for b in cols[11]], dtype=bool)
        if self.vectors:  # a lesson counts as having a vector when both forms of it are there
            has_vec &= np.array([v is not None for v in cols[12]], dtype=bool)
        if has_vec.any() and not self.words:
            self.words = len(next(b for b, h in zip(cols[11], has_vec, strict=True) if h)) // 8
        bits = np.zeros((n, self.words), dtype=np.uint64)
        if has_vec.any():
            raw = b"".join(b for b, h in zip(cols[11], has_vec, strict=True) if h)
            bits[has_vec] = np.frombuffer(raw, dtype=np.uint64).reshape(-1, self.words)
        half = np.zeros((n, 0), dtype=np.float16)
        if self.vectors:
            if has_vec.any() and not self.dim:
                self.dim = len(next(v for v, h in zip(cols[12], has_vec, strict=True) if h)) // 4
            half = np.zeros((n, self.dim), dtype=np.float16)
            if has_vec.any():
                raw = b"".join(bytes(v) for v, h in zip(cols[12], has_vec, strict=True) if h)
                half[has_vec] = np.frombuffer(raw, dtype="<f4").reshape(-1, self.dim)
        codes = self._scope_codes
        scope = np.array([codes[s] if s in codes else self.scope_code(s) for s in cols[1]], dtype=np.int32)
        expires = np.full(n, NO_EXPIRY, dtype=np.float64)
        for i, e in enumerate(cols[4]):
            if e is not None:
                expires[i] = e.timestamp()
        bucket = np.full(n, -1, dtype=np.int32)
        for i, (k, t) in enumerate(zip(cols[2], cols[10], strict=True)):
            if t is not None or k.startswith(LOOP_PREFIX):
                bucket[i] = self.bucket_code(loop_bucket(k, t or ""))
        return Arrays(
            ids=np.array(cols[0], dtype=np.int64),
            scope=scope,
            key=np.fromiter(map(key_hash, cols[2]), dtype=np.int64, count=n),
            updated=np.array(cols[3], dtype=np.float64),
            expires=expires,
            seen=np.array(cols[5], dtype=np.int32),
            helped=np.array(cols[6], dtype=np.int32),
            not_helped=np.array(cols[7], dtype=np.int32),
            verified=np.array(cols[8], dtype=bool),
            bucket=bucket,
            human=np.array(cols[9], dtype=bool),
            bits=bits,
            has_vec=has_vec,
            half=half,
        )

    def _load_all(self, conn: Connection) -> None:
        self._room = {}
        parts = []
        result = conn.execution_options(yield_per=LOAD_CHUNK).execute(
            select(*_columns(self.vectors))
            .select_from(_source(self.model, self.vectors))
            .where(_indexable(self.tenant_id))
        )
        for chunk in result.partitions(LOAD_CHUNK):
            parts.append(self._rows_to_arrays(chunk))
        self.arrays = Arrays.concat(parts)

    def _reload_ids(self, conn: Connection, ids: list[int]) -> np.ndarray | None:
        """Re-read the changed lessons. Returns the positions of the rows that came (new lessons,
        after every row that kept its place), or None when rows went or a row moved on the ladders.

        The arrays are never written in place (a reader that took them before this refresh goes on
        ranking its own snapshot): when every changed lesson is still held and only its numbers
        changed (feedback, a recurrence, an edit, a new vector), only the columns that differ are
        copied and patched, and the rows keep their places, so what context derived from where
        rows are (``_eligible``) stays valid or is extended by the new rows. Otherwise the rows are
        rebuilt once.
        """
        fresh = []
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            fresh.extend(
                conn.execute(
                    select(*_columns(self.vectors))
                    .select_from(_source(self.model, self.vectors))
                    .where(_indexable(self.tenant_id), lessons.c.id.in_(batch))
                ).all()
            )
        new = self._rows_to_arrays(fresh)
        old = self.arrays
        if old.bits.shape[1] != self.words:
            # The first vectors just arrived: until now no lesson had one, so zero bits are exact.
            old = replace(old, bits=np.zeros((len(old.ids), self.words), dtype=np.uint64))
        if old.half.shape[1] != new.half.shape[1]:  # likewise for the first float vectors
            old = replace(old, half=np.zeros((len(old.ids), new.half.shape[1]), dtype=np.float16))
        held = np.nonzero(np.isin(old.ids, np.asarray(ids, dtype=np.int64)))[0]
        slot = {int(i): n for n, i in enumerate(new.ids)}
        if all(int(i) in slot for i in old.ids[held]):  # nothing left: values changed, rows may have come
            source = np.fromiter((slot[int(i)] for i in old.ids[held]), dtype=np.int64, count=len(held))
            patched: dict[str, np.ndarray] = {}
            for f in _FIELDS:
                column, values = getattr(old, f), getattr(new, f)[source]
                if not np.array_equal(column[held], values):
                    column = column.copy()
                    column[held] = values
                    patched[f] = column
            self.arrays = replace(old, **patched)
            if any(f in patched for f in _PLACE_FIELDS):
                return None
            came = np.ones(len(new.ids), dtype=bool)
            came[source] = False
            if came.any():  # new lessons go after the rows that keep their places
                self.arrays = self._append(self.arrays, new.take(np.nonzero(came)[0]))
            return np.arange(len(old.ids), len(self.arrays.ids))
        keep = np.ones(len(old.ids), dtype=bool)
        keep[held] = False
        self.arrays = Arrays.concat([old.take(np.nonzero(keep)[0]), new])
        self._room = {}  # the old buffers: nothing will append to them again
        return None

    def _append(self, a: Arrays, extra: Arrays) -> Arrays:
        """``a`` with ``extra``'s rows after its own.

        Each column is a view of the start of a larger buffer; new rows are written into the room
        after it (no reader holds a view that reaches there) and the view is widened, so a new lesson
        costs its own row, not a copy of every column (hundreds of MB at a million lessons once
        search has loaded the vectors). A column without room (or replaced since) moves to a new
        buffer with room to spare.
        """
        n, k = len(a.ids), len(extra.ids)
        columns: dict[str, np.ndarray] = {}
        for f in _FIELDS:
            column, rows = getattr(a, f), getattr(extra, f)
            buffer = self._room.get(f)
            if (
                buffer is None
                or column.base is not buffer
                or column.ctypes.data != buffer.ctypes.data
                or (len(buffer) < n + k)
            ):
                buffer = np.empty((n + k + max(1024, (n + k) // 16), *column.shape[1:]), dtype=column.dtype)
                buffer[:n] = column
                self._room[f] = buffer
            buffer[n : n + k] = rows
            columns[f] = buffer[: n + k]
        return Arrays(**columns)

    def refresh(self, conn: Connection, model: str, vectors: bool = False) -> None:
        """Bring the index up to the tenant's last audit row and newest vectors (in a read transaction).

        ``vectors``: hold the float16 vectors too (from now on; the first such call reloads everything).
        """
        if model != self.model:  # the configured embedding model changed: start over
            self.model, self.seq, self.words, self.embed_mark, self.embed_seen = model, -1, 0, 0.0, set()
            self.embed_looked = 0.0
            self.dim = 0
        if vectors and not self.vectors:
            self.vectors, self.seq = True, -1
        if self.seq < 0:
            self._room = {}
        if self.seq < 0 and self.persist is not None:  # a fresh process: start from the kept state
            from cairn.service import rank_cache

            rank_cache.load(self, conn, self.persist, self.vectors)
        last = conn.execute(
            select(func.coalesce(func.max(audit_log.c.seq), 0)).where(audit_log.c.tenant_id == self.tenant_id)
        ).scalar_one()
        if self.seq < 0:  # start the vector watermark at the newest vector: the full load reads them all
            newest = conn.execute(
                select(func.max(lesson_signatures.c.embedded_at)).where(lesson_signatures.c.tenant_id == self.tenant_id)
            ).scalar()
            self.embed_mark = newest.timestamp() if newest is not None else 0.0
        gen = conn.execute(select(embed_state.c.generation).where(embed_state.c.tenant_id == self.tenant_id)).scalar()
        fresh_vectors = self._new_vectors(conn) if gen != self.embed_gen else []
        self.embed_gen = gen
        if last == self.seq and not fresh_vectors:
            return
        if self.seq < 0 or last < self.seq:  # first use, or the log was replaced (a restored backup)
            self._load_all(conn)
            self.unsaved = FULL_RELOAD_AT  # a whole build: keep it
            self.memo.clear()
        else:
            changed = set(fresh_vectors)
            if last != self.seq:
                changed.update(
                    conn.execute(
                        select(audit_log.c.lesson_id)
                        .where(
                            audit_log.c.tenant_id == self.tenant_id,
                            audit_log.c.seq > self.seq,
                            audit_log.c.seq <= last,
                            audit_log.c.lesson_id.is_not(None),
                        )
                        .distinct()
                    ).scalars()
                )
            came: np.ndarray | None = np.empty(0, dtype=np.int64)  # nothing of a lesson changed
            if len(changed) > FULL_RELOAD_AT:
                came = None
                self._load_all(conn)
            elif changed:
                came = self._reload_ids(conn, sorted(changed))
            self.unsaved += len(changed)
            self._follow(conn, changed, came)
        self.seq = last
        self.version += 1
        if self.persist is not None:
            from cairn.service import rank_cache

            if self.unsaved >= rank_cache.SAVE_AFTER:
                rank_cache.save(self, conn, self.persist)
                self.unsaved = 0

    def _follow(self, conn: Connection, changed: set[int], came: np.ndarray | None) -> None:
        """Bring what context memoized for the last version up to this one, for the changed lessons only.

        The top sets' rows (``texts``) lose the changed lessons (a forgotten lesson's text is never
        served again); each term's matches (``terms``) are asked again for the changed lessons only;
        eligible sets depend on where rows are: they stay while rows only kept their places, gain
        the rows that ``came`` (``_extend_eligible``), and are dropped when rows went or moved
        (``came`` None). Anything else memoized is dropped. New objects, not edits of the old ones:
        a reader that took them before this refresh keeps its snapshot.
        """
        from cairn.store import search_index as ix

        kept: dict[Any, Any] = {}
        gone = np.fromiter(changed, dtype=np.int64, count=len(changed))
        texts = self.memo.get("texts")
        if texts:
            kept["texts"] = {i: row for i, row in texts.items() if i not in changed}
        terms = self.memo.get("terms")
        if terms and len(changed) <= FOLLOW_TERMS_AT:
            ids = sorted(changed)
            kept["terms"] = {
                term: np.concatenate(
                    [matches[~np.isin(matches, gone)], np.asarray(ix.fts_rowids(conn, term, among=ids), dtype=np.int64)]
                )
                for term, matches in terms.items()
            }
        if came is not None and not len(came):
            kept.update((k, v) for k, v in self.memo.items() if isinstance(k, tuple) or k == "id_order")
        elif came is not None:
            from cairn.core.timeparse import utcnow

            now_ts = utcnow().timestamp()
            for k, v in self.memo.items():
                if isinstance(k, tuple):
                    extended = self._extend_eligible(list(k), v, came, now_ts)
                    if extended is not None:
                        kept[k] = extended
        self.memo.clear()
        self.memo.update(kept)

    def _extend_eligible(self, visible: list[str], memo: tuple[Any, ...], came: np.ndarray, now_ts: float) -> Any:
        """A ladder's eligible set (``service/context.py``'s ``_eligible``) with new rows added, or None
        when it is simpler to compute it again (a shadowing it cannot decide alone).

        A new row on the ladder, not expired, is eligible unless a row of the same key on a narrower
        rung is; it takes the place of one on a broader rung. Its expiry bounds the set's validity,
        as every ladder row's does. ``now_ts`` is read before the context call's own clock, so a row
        expiring in between makes the set stale at that call, which then computes it again.
        """
        valid_until, pos, rung, id_order = memo
        a = self.arrays
        rung_by_scope = {scope: n for n, scope in enumerate(visible)}
        drop: list[int] = []
        add_pos: list[int] = []
        add_rung: list[int] = []
        for p in came:
            g = rung_by_scope.get(self.scopes[a.scope[p]], -1)
            expires = float(a.expires[p])
            if g < 0 or expires <= now_ts:
                continue
            valid_until = min(valid_until, expires)
            key = a.key[p]
            same = [int(i) for i in np.nonzero(a.key[pos] == key)[0] if int(i) not in drop]
            same_new = [n for n, q in enumerate(add_pos) if a.key[q] == key]
            if same_new:
                return None  # two new rows of one key: leave it to a full computation
            if same:
                g0 = int(rung[same[0]])
                if g0 < g:
                    continue  # a narrower rung holds this key
                if g0 == g:
                    return None
                drop.extend(same)
            add_pos.append(int(p))
            add_rung.append(g)
        if not add_pos and not drop:
            return valid_until, pos, rung, id_order
        if drop:
            keep = np.ones(len(pos), dtype=bool)
            keep[drop] = False
            pos, rung = pos[keep], rung[keep]
        before = len(pos)
        pos = np.concatenate([pos, np.asarray(add_pos, dtype=pos.dtype)])
        rung = np.concatenate([rung, np.asarray(add_rung, dtype=rung.dtype)])
        ids = a.ids[pos]
        if drop or (before and ids[before:].min() <= ids[:before].max()):
            id_order = np.argsort(ids, kind="stable")
        else:  # the new lessons have the newest ids: they sort last, in the order they came
            tail = np.arange(before, len(pos))
            id_order = np.concatenate([id_order, tail[np.argsort(ids[before:], kind="stable")]])
        return valid_until, pos, rung, id_order

    def id_order(self) -> np.ndarray:
        """``arrays.ids``' sorting permutation, for :func:`rows_of` (memoized per version: call under ``lock``)."""
        order = self.memo.get("id_order")
        if order is None:
            order = self.memo["id_order"] = np.argsort(self.arrays.ids, kind="stable")
        return order

    def _new_vectors(self, conn: Connection) -> list[int]:
        """Lessons embedded since the last look (the drain writes vectors without an audit row).

        The look-back window (vectors stamped up to ``EMBED_LOOKBACK_S`` before the newest one seen)
        catches a vector committed after a newer one. After a bulk embedding the window holds tens of
        thousands of rows, and a process that starts from the kept index would read them all only to
        find them seen. So the part of the window up to the newest stamp seen is first compared in SQL
        (how many rows, and the sum of their ids) with what was read there: only a difference (a late
        commit, a re-embedded or erased lesson) reads it again; what is stamped later is always read.
        When the last look was already more than the look-back after the newest stamp, nothing stamped
        up to it can still arrive within the look-back, and the window is not compared at all.
        """
        from cairn.core.timeparse import utcnow

        looked, self.embed_looked = self.embed_looked, utcnow().timestamp()  # the clock vectors are stamped by
        sig = lesson_signatures.c
        since, cut = self.embed_mark - EMBED_LOOKBACK_S, self.embed_mark
        at = epoch_seconds(sig.embedded_at)
        where = (sig.tenant_id == self.tenant_id, sig.model == self.model, sig.embedded_at > _from_epoch(since))
        if looked - cut > EMBED_LOOKBACK_S:
            known, matched = [], True
        else:
            known = [(i, t) for i, t in self.embed_seen if since < t <= cut]
            count, total = conn.execute(
                select(func.count(), func.coalesce(func.sum(sig.lesson_id), 0)).where(*where, at <= cut)
            ).one()
            matched = bool(known) and (int(count), int(total)) == (len(known), sum(i for i, _ in known))
        if matched:
            # What was read is still all there is up to ``cut``: only what is stamped later is new.
            later = [(int(i), float(t)) for i, t in conn.execute(select(sig.lesson_id, at).where(*where, at > cut))]
            if later:
                self.embed_mark = max(cut, max(t for _, t in later))
            floor = self.embed_mark - EMBED_LOOKBACK_S
            if later or len(known) != len(self.embed_seen):
                self.embed_seen = {p for p in known if p[1] > floor} | {p for p in later if p[1] > floor}
            return [i for i, _ in later] if self.seq >= 0 else []
        rows = conn.execute(select(sig.lesson_id, at).where(*where)).all()
        window = {(int(i), float(t)) for i, t in rows}
        new = [i for i, t in window if (i, t) not in self.embed_seen]
        if window:
            self.embed_mark = max(self.embed_mark, max(t for _, t in window))
        self.embed_seen = {(i, t) for i, t in window if t > self.embed_mark - EMBED_LOOKBACK_S}
        return new if self.seq >= 0 else []


def rows_of(arrays: Arrays, order: np.ndarray, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``arrays`` holding ``ids`` (``order``: its :meth:`RankIndex.id_order`), and a mask of
    the ``ids`` it holds at all."""
    keys = np.asarray(ids, dtype=np.int64)
    if not len(order):
        return np.zeros(0, dtype=np.int64), np.zeros(len(keys), dtype=bool)
    sorted_ids = arrays.ids[order]
    at = np.minimum(np.searchsorted(sorted_ids, keys), len(sorted_ids) - 1)
    found = sorted_ids[at] == keys
    return order[at[found]], found


def _from_epoch(seconds: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(max(seconds, 0.0), UTC)
