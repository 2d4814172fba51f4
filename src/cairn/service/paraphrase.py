"""Tombstones that catch paraphrases: the forgotten text's vector, and the hold a close write gets.

A tombstone refuses its exact text (``content_hash``) and its look-alikes (``identity``) — the check
in ``service/tombstones.py``. The same fact in other words is not refused (a write is not wrong
because it resembles something forgotten: it may be the correction), but it is not silently stored
as an ordinary lesson either: it lands **held** (trust ``held``, ``core/lesson.py``), out of every
read (``store/predicates.py``), in the review queue with the tombstone it resembles, until a person
verifies or rejects it.

* ``forget`` stores the embedding of the forgotten text (``put``), one row per tombstone in
  ``tombstone_vectors``. The text is embedded alone (no key, unlike a lesson's search vector) because
  that is what the decision is calibrated on: ``core/similarity.py: is_tombstone_paraphrase`` takes
  the cosine of two texts embedded each on its own.
* Every write of new content asks ``hold_for``: the nearest live tombstones of the tenant by cosine
  (a matrix product over the tenant's vectors), then the decision on the best ones, with the
  forgotten text read back from the rejected lesson's versions (the negation test needs it).
* The vector is content-derived, so it goes with the content: ``purge`` of the forgotten lesson
  (every sweep, ``erase_forgotten``, an org's deletion, a forgotten conversation's candidates: all
  through ``purge.erase``) deletes it (``erase``), and ``unforget`` deletes it (``drop``).

The tenant's vectors are cached per process, keyed by the tenant's deletion epoch and the number of
its vectors, both read inside the write's transaction: every insert of a vector happens in a
transaction that bumps the epoch (forget does; so does the rebuild in ``reembed``), and every delete
lowers the count, so a cached matrix is exactly the set the transaction sees.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, delete, func, insert, select
from sqlalchemy.engine import Connection

from cairn.core.lesson import HELD_CODE
from cairn.core.principal import Principal
from cairn.errors import CairnError
from cairn.service import epoch, indexing
from cairn.store.dialect import ONE_ROW
from cairn.store.engine import Store
from cairn.store.schema import lesson_versions, tenants, tombstone_vectors, tombstones

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np

# How many tombstones above the threshold are put to the decision, nearest first: the decision
# refuses some close ones (a negation), so the second nearest may be the paraphrase.
CANDIDATES = 8
CACHE_TENANTS = 64


@dataclass(frozen=True)
class Hold:
    """Why a write is held: the tombstone it restates and how close it is."""

    tombstone_id: int
    scope: str
    key: str
    reason: str
    cosine: float

    def detail(self) -> dict[str, Any]:
        """What the audit row of the held version records (ids and a number, no text)."""
        return {"held_by": self.tombstone_id, "cosine": round(self.cosine, 4)}

    def public(self, principal: Principal) -> dict[str, Any]:
        """The ``held`` field of a write result or a review entry. A tombstone in a scope the
        caller may not see is not named (its address and reason are that scope's business)."""
        out: dict[str, Any] = {"code": HELD_CODE, "similarity": round(self.cosine, 4)}
        if principal.can_see(self.scope):
            out.update(tombstone_id=self.tombstone_id, scope=self.scope, key=self.key, reason=self.reason)
        return out


def embed_alone(texts: list[str]) -> np.ndarray:
    """The configured model's vectors of ``texts``, each embedded on its own (rows L2-normalized)."""
    from cairn.search.embed import get_embedder

    return get_embedder().embed(texts)


# -- embedding before the transaction -------------------------------------------------------------
# The model runs for milliseconds per text (and loads for a second on its first use in a process):
# inside a write transaction that is time every other writer of the store waits. So a write embeds
# its text before opening the transaction (``prepare``) when this process last saw the tenant holding
# tombstone vectors, and the transaction takes the vector from here. A wrong guess costs only time:
# the transaction embeds what it finds missing, and an unused vector is dropped when the bounded
# table is full. Keyed by the model and the text's hash.
_READY_MAX = 32
_lock = threading.Lock()  # guards this table and the tenants' matrices below
_ready: OrderedDict[tuple[str, str], Any] = OrderedDict()
_tenants_with_vectors: dict[tuple[str, str, str], bool] = {}


def _text_key(text: str) -> tuple[str, str]:
    import hashlib

    return indexing.configured_model(), hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def prepare(store: Store, principal: Principal, text: str, *, always: bool = False) -> None:
    """Embed ``text`` now, outside any transaction, when the tenant holds tombstone vectors as this
    process last saw it (``always``: whatever it saw, e.g. forget, which stores the vector). The
    first write of a tenant in a process looks once (one count, in a read transaction): a one-shot
    command's model load is then outside the write lock too."""
    model = indexing.configured_model()
    key = (str(store.engine.url), principal.tenant_id, model)
    seen = _tenants_with_vectors.get(key)
    if seen is None and not always:
        from cairn.service.tx import read_tx

        params = {"tenant": principal.tenant_id, "model": model}
        seen = read_tx(store, principal, lambda conn: conn.execute(_STAMP, params).one()[1] > 0)
        _tenants_with_vectors[key] = seen
    if not (always or seen):
        return
    ready = _text_key(text)
    vector = embed_alone([text])[0]
    with _lock:
        _ready[ready] = vector
        _ready.move_to_end(ready)
        while len(_ready) > _READY_MAX:
            _ready.popitem(last=False)


def _vector_of(text: str) -> Any:
    """The text's vector: the one ``prepare`` made, else embedded now."""
    with _lock:
        vector = _ready.pop(_text_key(text), None)
    return vector if vector is not None else embed_alone([text])[0]


def put(conn: Connection, tenant_id: str, tombstone_id: int, text: str, now: datetime) -> str | None:
    """Store the vector of a tombstone's forgotten text. The caller's transaction bumps the tenant's
    deletion epoch (the cache's key, see the module's docstring).

    Returns None, or why no vector could be made (the model is missing or broken: ``SETUP``). Forget
    must not fail for that — taking the text out of every read is the urgent part, and the exact
    refusal stands — so the caller reports it instead."""
    from cairn.search.embed import get_embedder, vector_to_blob

    try:
        embedder = get_embedder()
        vector = _vector_of(text)
    except CairnError as exc:
        if exc.code != "SETUP":
            raise
        return f"no embedding model ({exc.message}): only exact and normalized rewrites are refused"
    conn.execute(delete(tombstone_vectors).where(tombstone_vectors.c.tombstone_id == tombstone_id))
    conn.execute(
        insert(tombstone_vectors).values(
            tombstone_id=tombstone_id,
            tenant_id=tenant_id,
            model=embedder.name,
            dim=embedder.dim,
            vector=vector_to_blob(vector),
            created_at=now,
        )
    )
    return None


def drop(conn: Connection, tenant_id: str, tombstone_id: int) -> None:
    """Delete a tombstone's vector (it was lifted)."""
    conn.execute(
        delete(tombstone_vectors).where(
            tombstone_vectors.c.tenant_id == tenant_id, tombstone_vectors.c.tombstone_id == tombstone_id
        )
    )


def erase(conn: Connection, tenant_id: str, lesson_id: int) -> None:
    """Delete the vectors of every tombstone of a lesson whose content is being erased."""
    of_lesson = select(tombstones.c.id).where(tombstones.c.tenant_id == tenant_id, tombstones.c.lesson_id == lesson_id)
    conn.execute(
        delete(tombstone_vectors).where(
            tombstone_vectors.c.tenant_id == tenant_id, tombstone_vectors.c.tombstone_id.in_(of_lesson)
        )
    )


def reembed(conn: Connection, tenant_id: str, now: datetime) -> int:
    """Rebuild the vector of every live tombstone whose forgotten text the store still holds, with
    the configured model (``cairn reindex``: after a model change, or for tombstones made before
    their vectors were kept). Returns how many were embedded."""
    from cairn.search.embed import get_embedder, vector_to_blob

    embedder = get_embedder()
    live = conn.execute(
        select(tombstones).where(tombstones.c.tenant_id == tenant_id, tombstones.c.lifted_at.is_(None))
    ).all()
    texts = {t.id: _forgotten_text(conn, tenant_id, t) for t in live}
    found = [(tid, text) for tid, text in texts.items() if text is not None]
    conn.execute(delete(tombstone_vectors).where(tombstone_vectors.c.tenant_id == tenant_id))
    epoch.bump(conn, tenant_id)  # the key of every process's cache of this tenant's vectors
    if not found:
        return 0
    vectors = embedder.embed([text for _, text in found])
    conn.execute(
        insert(tombstone_vectors),
        [
            {
                "tombstone_id": tid,
                "tenant_id": tenant_id,
                "model": embedder.name,
                "dim": embedder.dim,
                "vector": vector_to_blob(v),
                "created_at": now,
            }
            for (tid, _), v in zip(found, vectors, strict=True)
        ],
    )
    return len(found)


# -- the lookup ------------------------------------------------------------------------------------

# The tenant's deletion epoch and how many tombstone vectors it holds for the model: what the cached
# matrix is checked against. Columns of their own so a write reads them with its other look-ups
# (``service/write_reads.py``), parameters ``tenant`` and ``model``.
STAMP_COLUMNS = (
    select(tenants.c.deletion_epoch).where(tenants.c.id == bindparam("tenant")).scalar_subquery().label("epoch"),
    select(func.count())
    .select_from(tombstone_vectors)
    .where(tombstone_vectors.c.tenant_id == bindparam("tenant"), tombstone_vectors.c.model == bindparam("model"))
    .scalar_subquery()
    .label("tombstone_vectors"),
)
_STAMP = select(*STAMP_COLUMNS)
_VECTORS = (
    select(tombstone_vectors.c.tombstone_id, tombstone_vectors.c.vector)
    .where(tombstone_vectors.c.tenant_id == bindparam("tenant"), tombstone_vectors.c.model == bindparam("model"))
    .order_by(tombstone_vectors.c.tombstone_id)
)

# (store url, tenant, model) -> ((epoch, count), ids, matrix)
_cache: OrderedDict[tuple[str, str, str], tuple[tuple[int, int], Any, Any]] = OrderedDict()


def _matrix(
    conn: Connection, tenant_id: str, model: str, stamp_row: tuple[Any, Any] | None = None
) -> tuple[Any, Any] | None:
    """The tenant's tombstone ids and their vectors as one matrix, or None when it has none.

    ``stamp_row``: the ``STAMP_COLUMNS`` for this tenant and model, already read in this transaction."""
    params = {"tenant": tenant_id, "model": model}
    row = stamp_row if stamp_row is not None else conn.execute(_STAMP, params).one()
    stamp = (int(row[0] or 0), int(row[1]))
    _tenants_with_vectors[(str(conn.engine.url), tenant_id, model)] = stamp[1] > 0
    if stamp[1] == 0:
        return None  # before numpy: a write to a tenant without tombstone vectors imports none
    import numpy as np

    from cairn.search.embed import blob_to_vector

    key = (str(conn.engine.url), tenant_id, model)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == stamp:
            _cache.move_to_end(key)
            return hit[1], hit[2]
    rows = conn.execute(_VECTORS, params).all()
    if not rows:
        return None
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.vstack([blob_to_vector(r[1]) for r in rows])
    with _lock:
        _cache[key] = (stamp, ids, matrix)
        _cache.move_to_end(key)
        while len(_cache) > CACHE_TENANTS:
            _cache.popitem(last=False)
    return ids, matrix


def _forgotten_text(conn: Connection, tenant_id: str, tomb: Any) -> str | None:
    """The text a tombstone forgot, while the store still holds it (a version of the lesson)."""
    if tomb.lesson_id is None:
        return None
    return conn.execute(
        select(lesson_versions.c.value)
        .where(
            lesson_versions.c.tenant_id == tenant_id,
            lesson_versions.c.lesson_id == tomb.lesson_id,
            lesson_versions.c.content_hash == tomb.content_hash,
        )
        .limit(ONE_ROW)
    ).scalar()


def hold_for(conn: Connection, principal: Principal, text: str, *, stamp: tuple[Any, Any] | None = None) -> Hold | None:
    """The live tombstone of the tenant that ``text`` restates, nearest first; None when none does.

    Costs one small query when the tenant has no tombstone vectors (none when ``stamp``, the
    ``STAMP_COLUMNS`` for the configured model, was read earlier in this transaction); otherwise one
    embedding of ``text`` and a matrix product over the tenant's vectors.
    """
    tenant = principal.tenant_id
    found = _matrix(conn, tenant, indexing.configured_model(), stamp)
    if found is None:
        return None
    import numpy as np

    # Here, not at the top: the wording rules compile their patterns on import, and a tenant with
    # no tombstone vectors (most writes) never compares.
    from cairn.core.similarity import PARAPHRASE_COSINE, is_tombstone_paraphrase

    ids, matrix = found
    vector = _vector_of(text)
    if vector.shape[0] != matrix.shape[1]:
        return None  # vectors of another dimension under the same model name: never compared
    cosines = matrix @ vector
    near = np.flatnonzero(cosines >= PARAPHRASE_COSINE)
    if near.size == 0:
        return None
    near = near[np.argsort(-cosines[near], kind="stable")][:CANDIDATES]
    rows = {
        r.id: r
        for r in conn.execute(
            select(tombstones).where(
                tombstones.c.tenant_id == tenant,
                tombstones.c.id.in_([int(ids[i]) for i in near]),
                tombstones.c.lifted_at.is_(None),
            )
        )
    }
    for i in near:
        tomb = rows.get(int(ids[i]))
        if tomb is None:
            continue
        forgotten = _forgotten_text(conn, tenant, tomb)
        cosine = float(cosines[i])
        if forgotten is not None and is_tombstone_paraphrase(text, forgotten, cosine):
            return Hold(tomb.id, tomb.scope, tomb.key, tomb.reason, cosine)
    return None


def near_any(conn: Connection, principal: Principal, texts: list[str]) -> list[bool]:
    """For a batch of texts (a bulk import), which may restate a live tombstone: cosine at or above
    the threshold to any of the tenant's vectors. A pre-filter: those take the one-by-one write
    path, where ``hold_for`` decides. Embeds nothing when the tenant has no tombstone vectors."""
    found = _matrix(conn, principal.tenant_id, indexing.configured_model())
    if found is None or not texts:
        return [False] * len(texts)
    from cairn.core.similarity import PARAPHRASE_COSINE

    _, matrix = found
    vectors = embed_alone(texts)
    if vectors.shape[1] != matrix.shape[1]:
        return [False] * len(texts)
    return [bool(x) for x in (vectors @ matrix.T).max(axis=1) >= PARAPHRASE_COSINE]


def marks(conn: Connection, principal: Principal, lesson_ids: list[int]) -> dict[int, dict[str, Any]]:
    """For held lessons, the ``held`` field the review queue shows: the tombstone each was held by,
    read from the audit row of the write that held it (the ledger is where the hold is recorded)."""
    import json

    from cairn.store.schema import audit_log

    if not lesson_ids:
        return {}
    tenant = principal.tenant_id
    holds: dict[int, dict[str, Any]] = {}
    for lesson_id, detail in conn.execute(
        select(audit_log.c.lesson_id, audit_log.c.detail)
        .where(
            audit_log.c.tenant_id == tenant,
            audit_log.c.lesson_id.in_(lesson_ids),
            audit_log.c.detail.like('%"held_by"%'),
        )
        .order_by(audit_log.c.seq.desc())
    ):
        if lesson_id not in holds:
            holds[lesson_id] = json.loads(detail)
    tomb_ids = {int(d["held_by"]) for d in holds.values()}
    tombs = {
        r.id: r
        for r in conn.execute(select(tombstones).where(tombstones.c.tenant_id == tenant, tombstones.c.id.in_(tomb_ids)))
    }
    out: dict[int, dict[str, Any]] = {}
    for lesson_id, d in holds.items():
        tomb = tombs.get(int(d["held_by"]))
        if tomb is None:
            continue
        mark = Hold(tomb.id, tomb.scope, tomb.key, tomb.reason, float(d["cosine"])).public(principal)
        if tomb.lifted_at is not None and principal.can_see(tomb.scope):
            mark["tombstone_lifted"] = True
        out[lesson_id] = mark
    return out
