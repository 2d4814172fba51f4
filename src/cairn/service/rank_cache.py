"""The ranking index kept on disk, so a process without the daemon does not rebuild it from every row.

Why: building a tenant's index reads every active lesson (seconds at tens of thousands of lessons),
and a command run without ``cairn serve`` is a fresh process each time. The index's state — its
arrays, the scope and bucket names its codes point into, and how far it has followed the change feed
(the audit ``seq`` and the embedding watermark) — is written next to the SQLite database, and a new
process starts from that state instead of from nothing. It then follows the change feed exactly as a
long-running daemon's index does (``RankIndex.refresh``), so it shows every change committed since.

Never stale, never trusted blindly. A file is used only when it is for this tenant, this embedding
model, this schema head and this file layout, and when the audit row at the file's ``seq`` is still
in the database with the same ``row_hash`` (the database is the one the file was made from, not a
restored backup or another store at the same path). A file that fails any check, or cannot be read
at all (truncated, corrupted, another format), is ignored and replaced by the next full build. No
lesson text is stored: ids, numbers, key hashes, scope names, sign bits and (for search) vectors, the
same as the database beside it holds, owner-only; an erasure (``service/purge.py``) removes the files,
so an erased lesson's vector does not outlive it here. A process whose read began before an erasure
committed must not write the erased lesson back after that removal: ``save`` compares the tenant's
deletion epoch in its own snapshot with the latest committed one, before and after writing, and
writes nothing (or removes what it wrote) when they differ.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from cairn.service import epoch
from cairn.store.schema import audit_log

if TYPE_CHECKING:
    from cairn.service.rank_index import RankIndex

FORMAT = 1  # bump when the arrays' meaning changes (a new field is caught by the field check anyway)
# Changed lessons a process applies on top of a loaded file before it writes the file again: below
# this, the next process re-reads them too (milliseconds); above it, rewriting the file is cheaper.
SAVE_AFTER = 1_000


def cache_dir(url: str) -> Path | None:
    """Where a SQLite database's ranking indexes are kept (``cairn.db.rank/`` beside it), or None:
    Postgres and in-memory databases keep none, nor does ``CAIRN_RANK_CACHE=0``."""
    if os.environ.get("CAIRN_RANK_CACHE", "").strip() == "0" or not url.startswith("sqlite"):
        return None
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    path = Path(database)
    return path.with_name(path.name + ".rank")


def discard(url: str) -> None:
    """Remove every kept index of a database: after an erasure, so no file keeps an erased lesson's
    numbers or vector until it is next rewritten (the next process builds afresh)."""
    directory = cache_dir(url)
    if directory is None:
        return
    for path in directory.glob("*.npz"):
        with contextlib.suppress(OSError):
            path.unlink()


def _file(directory: Path, idx: RankIndex, vectors: bool) -> Path:
    name = hashlib.sha256(f"{idx.tenant_id}\0{idx.model}\0{int(vectors)}".encode()).hexdigest()[:32]
    return directory / f"{name}.npz"


def _latest_epoch(conn: Connection, tenant_id: str) -> int:
    """The tenant's deletion epoch as last committed (a fresh connection: ``conn``'s read
    transaction sees its own snapshot)."""
    with conn.engine.connect() as fresh:
        return epoch.current(fresh, tenant_id)


def _head_hash(conn: Connection, tenant_id: str, seq: int) -> str | None:
    return conn.execute(
        select(audit_log.c.row_hash).where(audit_log.c.tenant_id == tenant_id, audit_log.c.seq == seq)
    ).scalar()


def load(idx: RankIndex, conn: Connection, directory: Path, vectors: bool) -> bool:
    """Fill a never-loaded ``idx`` from its file when the file is valid for this database; False (and
    ``idx`` untouched) otherwise."""
    import numpy as np

    from cairn.service.rank_index import _DTYPES, _FIELDS, Arrays
    from cairn.store.migrations import HEAD

    path = _file(directory, idx, vectors)
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(bytes(data["meta"]).decode())
            if (meta.get("format"), meta.get("head"), meta.get("tenant"), meta.get("model"), meta.get("vectors")) != (
                FORMAT, HEAD, idx.tenant_id, idx.model, vectors,
            ):  # fmt: skip
                return False
            parts = [data[f] for f in _FIELDS]
        seq, words, dim = int(meta["seq"]), int(meta["words"]), int(meta["dim"])
        scopes, buckets = [str(s) for s in meta["scopes"]], [str(b) for b in meta["buckets"]]
        n = len(parts[0])
        for f, dt, a in zip(_FIELDS, _DTYPES, parts, strict=True):
            width = {"bits": words, "half": dim if vectors else 0}.get(f)
            shape = (n,) if width is None else (n, width)
            if a.dtype != np.dtype(dt) or a.shape != shape:
                return False
        arrays = Arrays(*parts)
        if n and (
            arrays.scope.min() < 0
            or arrays.scope.max() >= len(scopes)
            or arrays.bucket.min() < -1
            or arrays.bucket.max() >= len(buckets)
        ):
            return False
        if seq <= 0 or _head_hash(conn, idx.tenant_id, seq) != meta["row_hash"]:
            return False  # another database, a restored backup, or a pruned log: build afresh
        embed_seen = {(int(i), float(t)) for i, t in meta["embed_seen"]}
        embed_mark, embed_gen = float(meta["embed_mark"]), meta["embed_gen"]
        embed_looked = float(meta.get("embed_looked", 0.0))
    except Exception:  # unreadable in any way (truncated, corrupted, not ours): the build replaces it
        return False
    idx.arrays, idx.seq, idx.words, idx.dim, idx.vectors = arrays, seq, words, dim, vectors
    idx.scopes, idx.buckets = scopes, buckets
    idx._scope_codes = {s: i for i, s in enumerate(scopes)}
    idx._bucket_codes = {b: i for i, b in enumerate(buckets)}
    idx.embed_mark, idx.embed_gen, idx.embed_seen = embed_mark, embed_gen, embed_seen
    idx.embed_looked = embed_looked
    return True


def save(idx: RankIndex, conn: Connection, directory: Path) -> None:
    """Write ``idx``'s state (atomically: a reader sees the old file or the new one). A failure to
    write (read-only directory, full disk) leaves the index working, only uncached."""
    import numpy as np

    from cairn.service.rank_index import _FIELDS, EMBED_LOOKBACK_S
    from cairn.store.migrations import HEAD

    row_hash = _head_hash(conn, idx.tenant_id, idx.seq) if idx.seq > 0 else None
    if row_hash is None:
        return  # nothing in the change feed to validate the file against
    meta = {
        "format": FORMAT, "head": HEAD, "tenant": idx.tenant_id, "model": idx.model, "vectors": idx.vectors,
        "seq": idx.seq, "row_hash": row_hash, "words": idx.words, "dim": idx.dim,
        "scopes": idx.scopes, "buckets": idx.buckets,
        "embed_mark": idx.embed_mark, "embed_gen": idx.embed_gen, "embed_looked": idx.embed_looked,
        # the window is kept only while it can still be compared (RankIndex._new_vectors)
        "embed_seen": sorted(idx.embed_seen) if idx.embed_looked - idx.embed_mark <= EMBED_LOOKBACK_S else [],
    }  # fmt: skip
    seen_epoch = epoch.current(conn, idx.tenant_id)  # the epoch of the snapshot the arrays come from
    if _latest_epoch(conn, idx.tenant_id) != seen_epoch:
        return  # an erasure committed after this snapshot was read: its lessons may be in the arrays
    arrays: dict[str, Any] = {f: getattr(idx.arrays, f) for f in _FIELDS}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    tmp = None
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")  # created owner-only (0600)
        with os.fdopen(fd, "wb") as out:
            np.savez(out, **arrays)
        target = _file(directory, idx, idx.vectors)
        os.replace(tmp, target)
        tmp = None
        if _latest_epoch(conn, idx.tenant_id) != seen_epoch:
            # The erasure committed while the file was written; its own discard may have run before
            # the file appeared, so the file is removed here.
            target.unlink(missing_ok=True)
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
