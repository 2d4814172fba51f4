"""The one mutation path: lesson row, version row, tags, indexes and audit row, together.

Every operation that changes a lesson ends in ``apply``, inside the transaction its caller opened,
so no path can write a lesson without its version and audit rows, or leave an index behind.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, update
from sqlalchemy.engine import Connection

from cairn.core.principal import Principal
from cairn.service import audit, indexing
from cairn.service.records import STATE_FIELDS, status
from cairn.store.schema import lesson_tags, lesson_versions, lessons


def apply(
    conn: Connection,
    principal: Principal,
    before: dict[str, Any] | None,
    state: dict[str, Any],
    action: str,
    now: datetime,
    *,
    detail: dict[str, Any] | None = None,
    recorded_at: datetime | None = None,
    actor: str | None = None,
) -> dict[str, Any]:
    """Write ``state`` as the lesson's next version and return the new lesson row.

    ``recorded_at``/``actor`` are only given by a lossless import, which replays history with its
    original record times; every live mutation records ``now`` and the principal.
    """
    at = recorded_at or now
    who = actor or principal.actor
    values = {k: state[k] for k in STATE_FIELDS}
    if before is None:
        values.update(
            tenant_id=principal.tenant_id,
            version=1,
            created_at=at,
            updated_at=at,
            created_by=who,
            updated_by=who,
        )
        lesson_id = conn.execute(insert(lessons).values(**values)).inserted_primary_key[0]
        row = {"id": lesson_id, **values}
    else:
        lesson_id = before["id"]
        values.update(version=before["version"] + 1, updated_at=at, updated_by=who)
        conn.execute(
            update(lessons)
            .where(lessons.c.tenant_id == principal.tenant_id, lessons.c.id == lesson_id)
            .values(**values)
        )
        row = {**before, **values}

    conn.execute(
        insert(lesson_versions).values(
            tenant_id=principal.tenant_id,
            lesson_id=lesson_id,
            version=row["version"],
            action=action,
            scope=row["scope"],
            key=row["key"],
            value=row["value"],
            content_hash=row["content_hash"],
            tags=row["tags"],
            kind=row["kind"],
            source_agent=row["source_agent"],
            trigger=row["trigger"],
            trust=row["trust"],
            archived=row["archived_at"] is not None,
            seen_count=row["seen_count"],
            helped_count=row["helped_count"],
            not_helped_count=row["not_helped_count"],
            valid_from=row["valid_from"],
            valid_to=row["valid_to"],
            expires_at=row["expires_at"],
            recorded_at=at,
            actor=who,
            session=principal.session,
        )
    )
    if before is None or before["tags"] != row["tags"]:
        _sync_tags(conn, principal, lesson_id, json.loads(row["tags"]), fresh=before is None)
    indexing.sync(conn, row, status(row, now) == "active")
    audit.record(
        conn,
        principal,
        action,
        lesson_id=lesson_id,
        scope=row["scope"],
        key=row["key"],
        version_before=before["version"] if before else None,
        version_after=row["version"],
        hash_before=before["content_hash"] if before else None,
        hash_after=row["content_hash"],
        detail=detail,
        at=now,
    )
    return row


def _sync_tags(conn: Connection, principal: Principal, lesson_id: int, tags: list[str], fresh: bool) -> None:
    if not fresh:
        conn.execute(
            delete(lesson_tags).where(
                lesson_tags.c.tenant_id == principal.tenant_id, lesson_tags.c.lesson_id == lesson_id
            )
        )
    if tags:
        conn.execute(
            insert(lesson_tags),
            [{"tenant_id": principal.tenant_id, "lesson_id": lesson_id, "tag": t} for t in tags],
        )


def replay(
    conn: Connection,
    principal: Principal,
    lesson: dict[str, Any],
    versions: list[dict[str, Any]],
    now: datetime,
) -> dict[str, Any]:
    """Recreate a lesson with its whole history, as exported (lossless import).

    History rows keep their original record times and actors; one ``import`` audit row records
    that they arrived, because the audit is this store's ledger, not the exporter's.
    """
    last = versions[-1]
    values = {k: last.get(k) for k in STATE_FIELDS if k in last}
    values.update(
        scope=lesson["scope"],
        key=lesson["key"],
        origin=lesson["origin"],
        author=lesson.get("author"),
        url=lesson.get("url"),
        archived_at=lesson.get("archived_at"),
        superseded_by=None,
        tenant_id=principal.tenant_id,
        version=last["version"],
        created_at=lesson["created_at"],
        created_by=lesson["created_by"],
        updated_at=last["recorded_at"],
        updated_by=last["actor"],
    )
    lesson_id = conn.execute(insert(lessons).values(**values)).inserted_primary_key[0]
    row = {"id": lesson_id, **values}
    conn.execute(
        insert(lesson_versions),
        [
            {
                "tenant_id": principal.tenant_id,
                "lesson_id": lesson_id,
                "scope": lesson["scope"],
                "key": lesson["key"],
                **{k: v[k] for k in _VERSION_FIELDS},
            }
            for v in versions
        ],
    )
    _sync_tags(conn, principal, lesson_id, json.loads(row["tags"]), fresh=True)
    indexing.sync(conn, row, status(row, now) == "active")
    audit.record(
        conn,
        principal,
        "import",
        lesson_id=lesson_id,
        scope=row["scope"],
        key=row["key"],
        version_after=row["version"],
        hash_after=row["content_hash"],
        detail={"versions": len(versions)},
        at=now,
    )
    return row


_VERSION_FIELDS = (
    "version", "action", "value", "content_hash", "tags", "kind", "source_agent", "trigger", "trust",
    "archived", "seen_count", "helped_count", "not_helped_count", "valid_from", "valid_to", "expires_at",
    "recorded_at", "actor", "session",
)  # fmt: skip
