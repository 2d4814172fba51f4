"""Setting and reading a tenant's limits (the operator's); the checks themselves are ``limits``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection

from cairn.core.lesson import MAX_VALUE_BYTES
from cairn.core.principal import Principal
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.service import audit, limits
from cairn.service.accounts import in_tenant, operator_only
from cairn.service.tx import write_tx
from cairn.store.engine import Store
from cairn.store.schema import lessons, tenant_limits, tenants


@dataclass(eq=False, repr=False)
class TenantLimits:
    """The operator's per-tenant overrides of the configured limits."""

    store: Store
    settings: Settings

    def limits_show(self, principal: Principal, tenant: str | None = None) -> dict[str, Any]:
        target = tenant or principal.tenant_id
        if target != principal.tenant_id:
            operator_only(principal, "reading another tenant's limits")

        def tx(conn: Connection) -> dict[str, Any]:
            lim, sources = limits.effective(conn, self.settings, target)
            held = conn.execute(select(func.count()).where(lessons.c.tenant_id == target)).scalar_one()
            return {"tenant": target, "limits": lim.public(), "sources": sources, "lessons": held}

        return self.store.run(tx, write=False, tenant=target, user=principal.user_id, actor=principal.actor)

    def limits_set(self, principal: Principal, tenant: str, **values: int | None) -> dict[str, Any]:
        """Override the configured limits for one tenant (operator only); 0 clears an override."""
        operator_only(principal, "setting limits")
        given = {k: v for k, v in values.items() if v is not None}
        unknown = set(given) - set(limits.FIELDS)
        if unknown or not given:
            raise CairnError("INVALID_INPUT", f"give at least one of: {', '.join(limits.FIELDS)}")
        for k, v in given.items():
            if v < 0 or (k == "max_value_bytes" and v > MAX_VALUE_BYTES):
                raise CairnError(
                    "INVALID_INPUT",
                    f"{k} must be 0 (no override) or positive"
                    + (f" and ≤ {MAX_VALUE_BYTES}" if k == "max_value_bytes" else ""),
                )
        cleaned = {k: (v or None) for k, v in given.items()}

        def tx(conn: Connection, acting: Principal) -> dict[str, Any]:
            if conn.execute(select(tenants.c.id).where(tenants.c.id == tenant)).first() is None:
                raise CairnError("NOT_FOUND", f"no tenant {tenant!r} (accounts are named, orgs are org:NAME)")
            now = utcnow()
            exists = conn.execute(select(tenant_limits.c.tenant_id).where(tenant_limits.c.tenant_id == tenant)).first()
            if exists:
                conn.execute(
                    update(tenant_limits)
                    .where(tenant_limits.c.tenant_id == tenant)
                    .values(**cleaned, updated_at=now, updated_by=principal.actor)
                )
            else:
                conn.execute(
                    insert(tenant_limits).values(
                        tenant_id=tenant, **cleaned, updated_at=now, updated_by=principal.actor
                    )
                )
            audit.record(conn, in_tenant(principal, tenant), "limits.set", detail=cleaned, at=now)
            lim, sources = limits.effective(conn, self.settings, tenant)
            return {"tenant": tenant, "limits": lim.public(), "sources": sources}

        return write_tx(self.store, in_tenant(principal, tenant), tx)
