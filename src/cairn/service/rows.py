"""One row of a tenant's table, found by equal columns: the read every by-id (or by-thread) lookup
repeats, with the tenant always in the predicate so no lookup can reach another tenant's row."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, select
from sqlalchemy.engine import Connection

from cairn.core.principal import Principal


def tenant_row(conn: Connection, principal: Principal, table: Table, **match: Any) -> dict[str, Any] | None:
    """The caller's tenant's row of ``table`` whose columns equal ``match`` (e.g. ``id=7``), or None."""
    q = select(table).where(table.c.tenant_id == principal.tenant_id, *(table.c[k] == v for k, v in match.items()))
    row = conn.execute(q).mappings().first()
    return dict(row) if row else None
