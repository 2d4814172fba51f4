"""Lesson rows: how a read finds them, pages them and shows them.

Which lessons a read may return is ``store/predicates.py`` (``active_clause`` and ``status`` here are
its ``active`` and ``status``), the one definition every read shares.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, or_, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select
from sqlalchemy.sql.elements import ColumnElement

from cairn.core import cursor as cursors
from cairn.core.lesson import PUBLIC_FIELDS, TIME_FIELDS
from cairn.core.principal import Principal
from cairn.core.timeparse import format_time
from cairn.errors import CairnError
from cairn.store import predicates
from cairn.store.predicates import status
from cairn.store.schema import lessons
from cairn.store.types import UTCDateTime


def active_clause(now: datetime) -> ColumnElement[bool]:
    return predicates.active(now)


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


Order = tuple[tuple[ColumnElement[Any], bool], ...]  # (column, descending) pairs; the last is unique


def paged(
    conn: Connection,
    principal: Principal,
    query: Select[Any],
    order: Order,
    limit: int,
    *,
    kind: str,
    cursor: str | None,
    unscoped_ok: bool = False,
    scoped: bool = True,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of ``query`` in ``order`` after ``cursor``, and the cursor of the next page (or None).

    Keyset, not offset (see ``cairn.core.cursor``): rows written between two pages neither repeat
    nor hide rows. One row past the page tells whether another page exists. ``scoped`` rows carry a
    scope and pass the principal's scope filter; account rows (tokens, members) have none.
    """
    if cursor:
        shape = tuple(_shape(col) for col, _ in order)
        position = cursors.decode(kind, cursor, shape)
        query = query.where(_after(order, position))
    ordered = query.order_by(*[col.desc() if desc else col.asc() for col, desc in order])
    if scoped:
        rows = visible_rows(conn, principal, ordered, limit + 1, unscoped_ok=unscoped_ok)
    else:
        rows = [dict(r) for r in conn.execute(ordered.limit(limit + 1)).mappings()]
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], cursors.encode(kind, *[last[col.key] for col, _ in order])  # type: ignore[attr-defined]


def _shape(col: ColumnElement[Any]) -> type:
    if isinstance(col.type, UTCDateTime):
        return datetime
    return int if col.type.python_type is int else str


def _after(order: Order, position: list[Any]) -> ColumnElement[bool]:
    """Strictly after ``position`` in ``order``: (a, b) desc is a < pa OR (a = pa AND b < pb)."""
    (col, desc), value = order[0], position[0]
    beyond = col < value if desc else col > value
    if len(order) == 1:
        return beyond
    return or_(beyond, and_(col == value, _after(order[1:], position[1:])))


# Hot-path statements are built once: building a SQLAlchemy statement per call (and its cache
# key) cost more than executing it, and bulk import runs these for every record.
BY_ADDRESS = select(lessons).where(
    lessons.c.tenant_id == bindparam("tenant"), lessons.c.scope == bindparam("scope"), lessons.c.key == bindparam("key")
)
_BY_ID = select(lessons).where(lessons.c.tenant_id == bindparam("tenant"), lessons.c.id == bindparam("id"))


def lesson_page(
    conn: Connection,
    principal: Principal,
    now: datetime,
    where: ColumnElement[bool],
    scope: str | None,
    order: Order,
    limit: int,
    *,
    kind: str,
    cursor: str | None,
) -> dict[str, Any]:
    """One page of the tenant's lessons matching ``where`` (within ``scope`` when one is given), as
    every surface shows them: ``lessons`` and the ``next_cursor`` that continues (None on the last page)."""
    q = select(lessons).where(lessons.c.tenant_id == principal.tenant_id, where)
    if scope:
        q = q.where(lessons.c.scope == scope)
    rows, after = paged(conn, principal, q, order, limit, kind=kind, cursor=cursor)
    return {"lessons": [public(r, now) for r in rows], "next_cursor": after}


def fetch(conn: Connection, principal: Principal, scope: str, key: str) -> dict[str, Any] | None:
    params = {"tenant": principal.tenant_id, "scope": scope, "key": key}
    row = conn.execute(BY_ADDRESS, params).mappings().first()
    return dict(row) if row else None


def fetch_known(
    conn: Connection,
    principal: Principal,
    scope: str,
    key: str,
    refusal: str | None = None,
    *,
    with_address: bool = False,
) -> dict[str, Any]:
    """The lesson at an address in any state but rejected, or NOT_FOUND: a rejected lesson is gone for
    every read and change (only the audit and its tombstone remember it). ``refusal`` words the error
    where the default ("no lesson at SCOPE KEY") would not say which lesson; ``with_address`` adds the
    address to the error's data."""
    row = fetch(conn, principal, scope, key)
    if row is None or row["trust"] == "rejected":
        data = {"scope": scope, "key": key} if with_address else None
        raise CairnError("NOT_FOUND", refusal or f"no lesson at {scope} {key}", data)
    return row


def fetch_id(conn: Connection, principal: Principal, lesson_id: int) -> dict[str, Any] | None:
    row = conn.execute(_BY_ID, {"tenant": principal.tenant_id, "id": lesson_id}).mappings().first()
    return dict(row) if row else None


def _t(value: datetime | None) -> str | None:
    return format_time(value) if value is not None else None


def shown(row: Any, fields: tuple[str, ...], **given: Any) -> dict[str, Any]:
    """The named fields of a lesson or version row as JSON values, in ``fields``' order: times in
    ISO 8601, tags as a list; ``given`` supplies fields the caller derives (they keep their place)."""
    out: dict[str, Any] = {}
    for name in fields:
        if name in given:
            out[name] = given[name]
        elif name in TIME_FIELDS:
            out[name] = _t(row[name])
        elif name == "tags":
            out[name] = json.loads(row[name])
        else:
            out[name] = row[name]
    return out


def public(row: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The lesson as every surface shows it (one shape for CLI JSON, API and MCP)."""
    # What an import claimed about the lesson and was not granted (origin, author, trust,
    # counters, times): shown as claims, never as the lesson's own provenance.
    claimed = json.loads(row["claimed"]) if row.get("claimed") else None
    return shown(row, PUBLIC_FIELDS, status=status(row, now), claimed=claimed)
