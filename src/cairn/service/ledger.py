"""Reading the audit ledger and verifying its hash chain."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from cairn.core.keys import normalize_key
from cairn.core.lesson import MAX_PAGE
from cairn.core.principal import ADMIN, READ, Principal
from cairn.core.scope import validate_scope
from cairn.errors import CairnError
from cairn.service import audit, state_proof
from cairn.service.records import paged
from cairn.service.tx import read_tx
from cairn.store.engine import Store
from cairn.store.schema import audit_log


@dataclass(eq=False, repr=False)
class Ledger:
    """The audit ledger: reading it and verifying it."""

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
        if not 1 <= limit <= MAX_PAGE:
            raise CairnError("INVALID_INPUT", f"limit must be between 1 and {MAX_PAGE}, got {limit}")
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

        return read_tx(self.store, principal, tx)

    def audit_verify(self, principal: Principal, *, full: bool = True) -> dict[str, Any]:
        """The chain, and (``full``) every lesson, version and tombstone row against the ledger.

        A chain or state that does not hold is refused with ``AUDIT_BROKEN`` here, once, so every
        surface (CLI exit 1, API 409, a remote client) reports the same code and the same message;
        the error's data carries the whole result (``broken_at``: the address of the first mismatch).
        """
        principal.require(ADMIN)
        tenant = principal.tenant_id
        result = read_tx(self.store, principal, lambda conn: verify_all(conn, tenant, full))
        if not result["ok"]:
            raise CairnError("AUDIT_BROKEN", broken_message(result), result)
        return result


def verify_all(conn: Connection, tenant_id: str, full: bool) -> dict[str, Any]:
    """One snapshot: the chain first (a state check against a broken ledger proves nothing), then the state."""
    chain = audit.verify(conn, tenant_id)
    result = {**chain, "full": full, "state": None}
    if chain["ok"] and full:
        state = state_proof.verify_state(conn, tenant_id)
        result.update(ok=state["ok"], state=state["state"], broken_at=state["broken_at"], problem=state["problem"])
    return result


def broken_message(result: dict[str, Any]) -> str:
    """What a person reads when verification fails: where, what, and how far it held."""
    where = result["broken_at"]
    if "table" not in where:
        return (
            f"audit chain broken at row {where['seq']} ({where['action']}): {result['problem']}; "
            f"{result['checked']} row(s) before it verify"
        )
    address = f"{where['table']} id {where['id']}"
    return f"state does not match the audit ledger at {address}: {result['problem']}; the chain itself verifies"
