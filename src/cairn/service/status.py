"""What ``cairn status`` reports about the store: how many lessons are active, and how many wait for
their embedding (a lesson in the queue is found by words only until the daemon, an import or a
search's slice embeds it). One read transaction; counts only what the caller may see."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from cairn.core.principal import READ, Principal
from cairn.core.timeparse import utcnow
from cairn.service import indexing
from cairn.service.embeddings import pending_embeddings
from cairn.service.records import active_clause
from cairn.service.tx import read_tx
from cairn.store.engine import Store
from cairn.store.schema import lessons


@dataclass(eq=False, repr=False)
class Status:
    """Counts for ``cairn status``."""

    store: Store

    def status(self, principal: Principal) -> dict[str, Any]:
        principal.require(READ)
        now = utcnow()

        def tx(conn: Connection) -> dict[str, Any]:
            by_scope = conn.execute(
                select(lessons.c.scope, func.count())
                .where(lessons.c.tenant_id == principal.tenant_id, active_clause(now))
                .group_by(lessons.c.scope)
            ).all()
            # Per scope, so a scope-limited caller counts only the scopes it may read.
            active = sum(n for scope, n in by_scope if principal.can_see(scope))
            return {"active_lessons": active, "pending_embeddings": pending_embeddings(conn, principal)}

        counts = read_tx(self.store, principal, tx)
        return {**counts, "embedding_model": indexing.configured_model()}
