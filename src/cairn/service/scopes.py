"""The scope map: which scopes the caller's tenant holds lessons in, with counts.

One grouped query over the tenant's lessons (active, candidates, verified; archived counted apart),
filtered to the scopes the principal may see. Surfaces (HTTP ``/v1/scopes``, the MCP ``scopes`` tool)
show it so an agent can pick an existing scope before writing instead of inventing a new one.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.engine import Connection

from cairn.core.principal import READ, Principal
from cairn.core.timeparse import utcnow
from cairn.service.records import active_clause
from cairn.service.tx import read_tx
from cairn.store.engine import Store
from cairn.store.schema import lessons


class Scopes:
    """The scope map."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def scopes(self, principal: Principal) -> dict[str, Any]:
        principal.require(READ)

        def tx(conn: Connection) -> dict[str, Any]:
            now = utcnow()
            active = active_clause(now)
            rows = conn.execute(
                select(
                    lessons.c.scope,
                    func.sum(case((active, 1), else_=0)),
                    func.sum(case((active & (lessons.c.trust == "verified"), 1), else_=0)),
                    func.sum(case((lessons.c.archived_at.is_not(None), 1), else_=0)),
                )
                .where(lessons.c.tenant_id == principal.tenant_id)
                .group_by(lessons.c.scope)
                .order_by(lessons.c.scope)
            ).all()
            out = [
                {"scope": s, "active": int(a or 0), "verified": int(v or 0), "archived": int(r or 0)}
                for s, a, v, r in rows
                if principal.can_see(s) and (a or r)
            ]
            return {"scopes": out, "total_active": sum(x["active"] for x in out)}

        return read_tx(self.store, principal, tx)
