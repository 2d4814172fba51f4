"""The one mutation path: lesson row, version row, tags, indexes and audit row, together.

Every operation that changes a lesson ends in ``apply``, inside the transaction its caller opened,
so no path can write a lesson without its version and audit rows, or leave an index behind.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, insert, update
from sqlalchemy.engine import Connection

from cairn.core import history
from cairn.core.lesson import STATE_FIELDS, VERSION_FIELDS, VERSION_STATE
from cairn.core.principal import Principal
from cairn.service import audit, indexing, state_proof
from cairn.service.records import status
from cairn.store.schema import lesson_tags, lesson_versions, lessons

# Built once (see records.BY_ADDRESS for why); sync's apply (``sync_apply.py``) writes with them too.
INSERT_LESSON = insert(lessons)
INSERT_LESSON_RETURNING = insert(lessons).returning(lessons.c.id, sort_by_parameter_order=True)
UPDATE_LESSON = update(lessons).where(lessons.c.tenant_id == bindparam("b_tenant"), lessons.c.id == bindparam("b_id"))
INSERT_VERSION = insert(lesson_versions)
INSERT_TAGS = insert(lesson_tags)
DELETE_TAGS = delete(lesson_tags).where(
    lesson_tags.c.tenant_id == bindparam("b_tenant"), lesson_tags.c.lesson_id == bindparam("b_id")
)


# A write by one of these ends a sync conflict's stay in the review queue (a person decided).
RESOLVING = frozenset({"verify", "forget"})


def new_uid() -> str:
    """A version's global identity (migration 0013): random, so no two stores ever mint the same."""
    return uuid.uuid4().hex


def tips_of(row: dict[str, Any] | None) -> list[str]:
    """The uids a lesson's next version is written on top of: every tip, so a local write after a
    sync conflict merges the diverged histories into one (``core/sync.py``)."""
    if row is None or not row.get("tips"):
        return []
    return list(json.loads(row["tips"]))


@dataclass
class Change:
    """One lesson's next version: ``before`` is None for a create."""

    before: dict[str, Any] | None
    state: dict[str, Any]
    action: str
    detail: dict[str, Any] | None = None


def apply(
    conn: Connection,
    principal: Principal,
    before: dict[str, Any] | None,
    state: dict[str, Any],
    action: str,
    now: datetime,
    *,
    detail: dict[str, Any] | None = None,
    audit_head: tuple[Any, Any] | None = None,
) -> dict[str, Any]:
    """Write ``state`` as the lesson's next version and return the new lesson row.

    ``audit_head``: as ``audit.record_many``'s ``head``."""
    return apply_many(conn, principal, [Change(before, state, action, detail)], now, audit_head=audit_head)[0]


def apply_many(
    conn: Connection,
    principal: Principal,
    changes: list[Change],
    now: datetime,
    *,
    audit_head: tuple[Any, Any] | None = None,
) -> list[dict[str, Any]]:
    """Write several lessons' next versions in one go (same rows as one ``apply`` each).

    Bulk import creates hundreds of lessons per transaction; issuing each statement once per
    batch (executemany) instead of once per lesson is what makes 60,000 records a matter of
    seconds. Callers must not pass two changes to the same lesson in one call. ``audit_head``: as
    ``audit.record_many``'s ``head``.
    """
    who = principal.actor
    rows: list[dict[str, Any]] = []
    creates: list[tuple[int, dict[str, Any]]] = []
    updates: list[dict[str, Any]] = []
    uids: list[str] = []
    for n, ch in enumerate(changes):
        values = {k: ch.state[k] for k in STATE_FIELDS}
        uid = new_uid()
        uids.append(uid)
        values["tips"] = json.dumps([uid])
        resolved = principal.human or ch.action in RESOLVING
        values["conflicted_at"] = None if ch.before is None or resolved else ch.before.get("conflicted_at")
        if ch.before is None:
            values.update(
                tenant_id=principal.tenant_id,
                version=1,
                created_at=now,
                updated_at=now,
                created_by=who,
                updated_by=who,
            )
            creates.append((n, values))
            rows.append(values)
        else:
            values.update(version=ch.before["version"] + 1, updated_at=now, updated_by=who)
            updates.append({**values, "b_tenant": principal.tenant_id, "b_id": ch.before["id"]})
            rows.append({**ch.before, **values})
    if creates:
        if len(creates) == 1:
            ids = [conn.execute(INSERT_LESSON, creates[0][1]).inserted_primary_key[0]]
        else:
            result = conn.execute(INSERT_LESSON_RETURNING, [v for _, v in creates])
            ids = [r[0] for r in result]
        for (n, _), lesson_id in zip(creates, ids, strict=True):
            rows[n] = {"id": lesson_id, **rows[n]}
    if updates:
        conn.execute(UPDATE_LESSON, updates)
    version_rows = [
        {
            "tenant_id": principal.tenant_id,
            "lesson_id": row["id"],
            "version": row["version"],
            "action": ch.action,
            "archived": row["archived_at"] is not None,
            "recorded_at": now,
            "actor": who,
            "session": principal.session,
            "uid": uid,
            "parents": json.dumps(tips_of(ch.before)),
            "human": principal.human,
            **{k: row[k] for k in VERSION_STATE},
        }
        for ch, row, uid in zip(changes, rows, uids, strict=True)
    ]
    conn.execute(INSERT_VERSION, version_rows)
    tag_deletes = [
        {"b_tenant": principal.tenant_id, "b_id": row["id"]}
        for ch, row in zip(changes, rows, strict=True)
        if ch.before is not None and ch.before["tags"] != row["tags"]
    ]
    if tag_deletes:
        conn.execute(DELETE_TAGS, tag_deletes)
    tag_rows = [
        {"tenant_id": principal.tenant_id, "lesson_id": row["id"], "tag": t}
        for ch, row in zip(changes, rows, strict=True)
        if ch.before is None or ch.before["tags"] != row["tags"]
        for t in json.loads(row["tags"])
    ]
    if tag_rows:
        conn.execute(INSERT_TAGS, tag_rows)
    indexing.sync_many(
        conn, [(row, status(row, now) == "active", ch.before is None) for ch, row in zip(changes, rows, strict=True)]
    )
    audit.record_many(
        conn,
        principal,
        [
            {
                "action": ch.action,
                "lesson_id": row["id"],
                "scope": row["scope"],
                "key": row["key"],
                "version_before": ch.before["version"] if ch.before else None,
                "version_after": row["version"],
                "hash_before": ch.before["content_hash"] if ch.before else None,
                "hash_after": row["content_hash"],
                "detail": ch.detail,
                "at": now,
                "state_hash": state_proof.lesson_hash(row),
                "versions_hash": state_proof.versions_hash([version]),
            }
            for ch, row, version in zip(changes, rows, version_rows, strict=True)
        ],
        audit_head,
    )
    return rows


def _identities(versions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each version's uid, parents and author kind: as exported, or a fresh chain for an older file."""
    if all(v.get("uid") for v in versions):
        return [{"uid": v["uid"], "parents": v["parents"], "human": v.get("human")} for v in versions]
    out: list[dict[str, Any]] = []
    for _ in versions:
        out.append({"uid": new_uid(), "parents": [out[-1]["uid"]] if out else [], "human": None})
    return out


def replay(
    conn: Connection,
    principal: Principal,
    lesson: dict[str, Any],
    versions: list[dict[str, Any]],
    now: datetime,
) -> dict[str, Any]:
    """Recreate a lesson with its whole history, as exported (an admin's restore import).

    History rows keep their original record times and actors; one ``import`` audit row, flagged
    ``restore``, records that they arrived and that they were granted as written, because the audit
    is this store's ledger, not the exporter's.
    """
    return replay_many(conn, principal, [(lesson, versions)], now)[0]


def replay_many(
    conn: Connection,
    principal: Principal,
    items: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    now: datetime,
) -> list[dict[str, Any]]:
    """``replay`` for several new lessons at once: the same rows, each statement once per call.

    A restore import of a large store (``cairn import --from lorekit``) creates hundreds of lessons
    per transaction; one statement per table per batch instead of per lesson is most of its time.
    The ledger's state hashes are still read back from what the database stored (``read_back_many``),
    as the values come from a file. Callers pass only lessons whose address is free.
    """
    tenant = principal.tenant_id
    rows: list[dict[str, Any]] = []
    # A restored history keeps the identities it was exported with; an older export's is a chain,
    # each version written on top of the one before it.
    chains = [_identities(versions) for _, versions in items]
    for (lesson, versions), chain in zip(items, chains, strict=True):
        last = versions[-1]
        values = {k: last.get(k) for k in STATE_FIELDS}
        values.update(
            scope=lesson["scope"],
            key=lesson["key"],
            origin=lesson["origin"],
            author=lesson.get("author"),
            url=lesson.get("url"),
            archived_at=lesson.get("archived_at"),
            superseded_by=None,
            claimed=lesson.get("claimed"),
            tenant_id=tenant,
            version=last["version"],
            created_at=lesson["created_at"],
            created_by=lesson["created_by"],
            updated_at=last["recorded_at"],
            updated_by=last["actor"],
            tips=json.dumps(history.tips(chain)),
            conflicted_at=None,
        )
        rows.append(values)
    if len(rows) == 1:
        ids = [conn.execute(INSERT_LESSON, rows[0]).inserted_primary_key[0]]
    else:
        ids = [r[0] for r in conn.execute(INSERT_LESSON_RETURNING, rows)]
    rows = [{"id": lesson_id, **values} for lesson_id, values in zip(ids, rows, strict=True)]
    conn.execute(
        INSERT_VERSION,
        [
            {
                "tenant_id": tenant,
                "lesson_id": row["id"],
                "scope": row["scope"],
                "key": row["key"],
                **{k: v[k] for k in VERSION_FIELDS},
                "uid": ident["uid"],
                "parents": json.dumps(ident["parents"]),
                "human": ident["human"],
            }
            for row, (_, versions), chain in zip(rows, items, chains, strict=True)
            for v, ident in zip(versions, chain, strict=True)
        ],
    )
    tag_rows = [
        {"tenant_id": tenant, "lesson_id": row["id"], "tag": t} for row in rows for t in json.loads(row["tags"])
    ]
    if tag_rows:
        conn.execute(INSERT_TAGS, tag_rows)
    indexing.sync_many(conn, [(row, status(row, now) == "active", True) for row in rows])
    proofs = state_proof.read_back_many(conn, tenant, ids)
    audit.record_many(
        conn,
        principal,
        [
            {
                "action": "import",
                "lesson_id": row["id"],
                "scope": row["scope"],
                "key": row["key"],
                "version_after": row["version"],
                "hash_after": row["content_hash"],
                "detail": {"versions": len(versions), "restore": True},
                "at": now,
                **proofs[row["id"]],
            }
            for row, (_, versions) in zip(rows, items, strict=True)
        ],
    )
    return rows
