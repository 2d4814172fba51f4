"""The scope map: which scopes the caller's tenant holds lessons in, with counts.

One grouped query over the tenant's lessons (active, candidates, verified; archived counted apart),
filtered to the scopes the principal may see. An index holds every column it reads (migration
0010), so the counts come from the index, not from the lesson rows and their text. Surfaces (HTTP
``/v1/scopes``, the MCP ``scopes`` tool) show it so an agent can pick an existing scope before
writing instead of inventing a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, case, func, select
from sqlalchemy.engine import Connection

from cairn.core.principal import READ, Principal
from cairn.core.timeparse import utcnow
from cairn.service.records import active_clause
from cairn.service.tx import read_tx
from cairn.store.engine import Store
from cairn.store.schema import lessons


def counts_query(tenant_id: str, now: datetime) -> Select[Any]:
    """Per scope of the tenant, in scope order: active, active-and-verified, archived counts.

    It reads only columns of ``ix_lessons_tenant_scope_state``; a column added here belongs in that
    index too, or the map goes back to reading every lesson row (``tests/service/test_scopes.py``
    checks SQLite's plan)."""
    active = active_clause(now)
    return (
        select(
            lessons.c.scope,
            func.sum(case((active, 1), else_=0)),
            func.sum(case((active & (lessons.c.trust == "verified"), 1), else_=0)),
            func.sum(case((lessons.c.archived_at.is_not(None), 1), else_=0)),
        )
        .where(lessons.c.tenant_id == tenant_id)
        .group_by(lessons.c.scope)
        .order_by(lessons.c.scope)
    )


@dataclass(eq=False, repr=False)
class Scopes:
    """The scope map."""

    store: Store

    def scopes(self, principal: Principal) -> dict[str, Any]:
        principal.require(READ)

        def tx(conn: Connection) -> dict[str, Any]:
            rows = conn.execute(counts_query(principal.tenant_id, utcnow())).all()
            out = [
                {"scope": s, "active": int(a or 0), "verified": int(v or 0), "archived": int(r or 0)}
                for s, a, v, r in rows
                if principal.can_see(s) and (a or r)
            ]
            return {"scopes": out, "total_active": sum(x["active"] for x in out)}

        return read_tx(self.store, principal, tx)
