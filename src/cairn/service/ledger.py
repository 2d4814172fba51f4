"""Reading the audit ledger and verifying its hash chain."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from cairn.core.keys import normalize_key
from cairn.core.principal import ADMIN, READ, Principal
from cairn.core.scope import validate_scope
from cairn.errors import CairnError
from cairn.service import audit
from cairn.service.records import paged
from cairn.store.engine import Store
from cairn.store.schema import audit_log


class LedgerOps:
    store: Store

    def audit(
        self,
        principal: Principal,
        *,
        scope: str | None = None,
        key: str | None = None,
        since: datetime | None = None,
        limit: int = 200,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """The newest ``limit`` entries, oldest first within the page; ``next_cursor`` pages back in time."""
        principal.require(READ)
        if (scope is None) != (key is None):
            raise CairnError("INVALID_INPUT", "--lesson takes both SCOPE and KEY")
        if not 1 <= limit <= 100_000:
            raise CairnError("INVALID_INPUT", "limit must be between 1 and 100000")
        if scope is not None:
            scope, key = validate_scope(scope), normalize_key(key or "")
            principal.require(READ, scope)

        def tx(conn: Connection) -> dict[str, Any]:
            q = select(audit_log).where(audit_log.c.tenant_id == principal.tenant_id)
            if scope is not None:
                q = q.where(audit_log.c.scope == scope, audit_log.c.key == key)
            if since is not None:
                q = q.where(audit_log.c.at >= since)
            order = ((audit_log.c.seq, True),)
            rows, after = paged(conn, principal, q, order, limit, kind="audit", cursor=cursor, unscoped_ok=True)
            return {"entries": [audit.public(r) for r in reversed(rows)], "next_cursor": after}

        return self.store.run(tx, write=False, **principal.db_vars)

    def audit_verify(self, principal: Principal) -> dict[str, Any]:
        principal.require(ADMIN)
        return self.store.run(lambda conn: audit.verify(conn, principal.tenant_id), write=False, **principal.db_vars)
