"""Lesson rows: the lifecycle predicate every read shares, and the public shape of a lesson.

``active_clause`` is the single definition of "may be returned by a read of active lessons"; read,
list, search, context and export all compile it into their SQL, so the negative evals (archived,
expired, rejected, superseded never come back) hold on every path at once.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, or_, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select
from sqlalchemy.sql.elements import ColumnElement

from cairn.core.principal import Principal
from cairn.core.timeparse import format_time
from cairn.store.schema import lessons

KINDS = ("lesson", "fact", "preference", "reference")
TRUST = ("candidate", "verified", "rejected")
ORIGINS = ("agent", "human", "webhook", "import", "consolidation")

# The lesson columns a mutation may change (everything but identity and bookkeeping).
STATE_FIELDS = (
    "scope", "key", "value", "tags", "kind", "source_agent", "trigger", "origin", "author", "url",
    "trust", "seen_count", "helped_count", "not_helped_count", "valid_from", "valid_to",
    "expires_at", "archived_at", "superseded_by", "content_hash",
)  # fmt: skip


def active_clause(now: datetime) -> ColumnElement[bool]:
    return and_(
        lessons.c.trust != "rejected",
        lessons.c.archived_at.is_(None),
        lessons.c.superseded_by.is_(None),
        or_(lessons.c.expires_at.is_(None), lessons.c.expires_at > now),
    )


def status(row: dict[str, Any], now: datetime) -> str:
    if row["trust"] == "rejected":
        return "rejected"
    if row["superseded_by"] is not None:
        return "superseded"
    if row["archived_at"] is not None:
        return "archived"
    if row["expires_at"] is not None and row["expires_at"] <= now:
        return "expired"
    return "active"


def visible_rows(
    conn: Connection, principal: Principal, query: Select[Any], limit: int, *, unscoped_ok: bool = False
) -> list[dict[str, Any]]:
    """Up to ``limit`` rows of an ordered query that the principal may see.

    A scope-limited principal's filter runs after SQL, so a single ``LIMIT`` could be filled with
    rows it may not see and hide the ones it may: pages are read until ``limit`` visible rows are
    found or the query is exhausted. ``unscoped_ok`` admits rows without a scope (audit rows).
    """
    if not principal.scope_limited:
        return [dict(r) for r in conn.execute(query.limit(limit)).mappings()]
    page = max(limit, 200)
    out: list[dict[str, Any]] = []
    offset = 0
    while len(out) < limit:
        batch = conn.execute(query.limit(page).offset(offset)).mappings().all()
        out.extend(
            dict(r)
            for r in batch
            if (r["scope"] is None and unscoped_ok) or (r["scope"] is not None and principal.can_see(r["scope"]))
        )
        if len(batch) < page:
            break
        offset += page
    return out[:limit]


# Hot-path statements are built once: building a SQLAlchemy statement per call (and its cache
# key) cost more than executing it, and bulk import runs these for every record.
_BY_ADDRESS = select(lessons).where(
    lessons.c.tenant_id == bindparam("tenant"), lessons.c.scope == bindparam("scope"), lessons.c.key == bindparam("key")
)
_BY_ID = select(lessons).where(lessons.c.tenant_id == bindparam("tenant"), lessons.c.id == bindparam("id"))


def fetch(conn: Connection, principal: Principal, scope: str, key: str) -> dict[str, Any] | None:
    params = {"tenant": principal.tenant_id, "scope": scope, "key": key}
    row = conn.execute(_BY_ADDRESS, params).mappings().first()
    return dict(row) if row else None


def fetch_id(conn: Connection, principal: Principal, lesson_id: int) -> dict[str, Any] | None:
    row = conn.execute(_BY_ID, {"tenant": principal.tenant_id, "id": lesson_id}).mappings().first()
    return dict(row) if row else None


def _t(value: datetime | None) -> str | None:
    return format_time(value) if value is not None else None


def public(row: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The lesson as every surface shows it (one shape for CLI JSON, API and MCP)."""
    return {
        "scope": row["scope"],
        "key": row["key"],
        "value": row["value"],
        "tags": json.loads(row["tags"]),
        "kind": row["kind"],
        "trust": row["trust"],
        "status": status(row, now),
        "version": row["version"],
        "seen_count": row["seen_count"],
        "helped_count": row["helped_count"],
        "not_helped_count": row["not_helped_count"],
        "source_agent": row["source_agent"],
        "trigger": row["trigger"],
        "origin": row["origin"],
        "author": row["author"],
        "url": row["url"],
        "valid_from": _t(row["valid_from"]),
        "valid_to": _t(row["valid_to"]),
        "expires_at": _t(row["expires_at"]),
        "archived_at": _t(row["archived_at"]),
        "content_hash": row["content_hash"],
        "created_at": _t(row["created_at"]),
        "updated_at": _t(row["updated_at"]),
        "created_by": row["created_by"],
        "updated_by": row["updated_by"],
    }
