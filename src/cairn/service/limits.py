"""Per-tenant limits: how many lessons, how large a value, how many writes a minute.

Defaults come from the settings (``[limits]`` in config.toml or ``CAIRN_LIMITS_*``; 0 means no
limit); an operator overrides them per tenant (``cairn limits set``, table ``tenant_limits``). The
checks run inside the write's own transaction, after the tenant's write lock, so two writers cannot
both squeeze under a limit; a refusal is ``LIMIT`` with the limit, the current figure and what to
do, and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from cairn.core.principal import Principal
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.store.schema import audit_log, lessons, tenant_limits

FIELDS = ("max_lessons", "max_value_bytes", "writes_per_minute")
# Built once: every write reads the tenant's overrides. As columns of their own too (NULL when the
# tenant has no override row), so a write reads them with its other look-ups (``service/write_reads.py``).
_OVERRIDES = select(*(tenant_limits.c[f] for f in FIELDS)).where(tenant_limits.c.tenant_id == bindparam("tenant"))
OVERRIDE_COLUMNS = tuple(
    select(tenant_limits.c[f]).where(tenant_limits.c.tenant_id == bindparam("tenant")).scalar_subquery().label(f)
    for f in FIELDS
)


@dataclass(frozen=True)
class Limits:
    max_lessons: int = 0
    max_value_bytes: int = 0
    writes_per_minute: int = 0

    def public(self) -> dict[str, Any]:
        return {f: (getattr(self, f) or None) for f in FIELDS}


def effective(
    conn: Connection, settings: Settings, tenant: str, overrides: Mapping[str, Any] | None = None
) -> tuple[Limits, dict[str, str]]:
    """The tenant's limits and where each came from (tenant override, or settings).

    ``overrides``: the ``OVERRIDE_COLUMNS`` already read in this transaction (a NULL is no override)."""
    row = overrides if overrides is not None else conn.execute(_OVERRIDES, {"tenant": tenant}).mappings().first()
    values: dict[str, int] = {}
    sources: dict[str, str] = {}
    for f in FIELDS:
        override = row[f] if row else None
        if override is not None:
            values[f], sources[f] = int(override), "tenant"
        else:
            values[f], sources[f] = int(getattr(settings, f"limit_{f}")), settings.source(f"limit_{f}")
    return Limits(**values), sources


def check_value(
    conn: Connection, settings: Settings, principal: Principal, value: str, overrides: Mapping[str, Any] | None = None
) -> None:
    """Only the value-size limit (imports: the restore path is not rate-limited)."""
    lim, _ = effective(conn, settings, principal.tenant_id, overrides)
    _value_size(lim, value)


def _value_size(lim: Limits, value: str) -> None:
    if lim.max_value_bytes:
        size = len(value.encode())
        if size > lim.max_value_bytes:
            raise CairnError(
                "LIMIT",
                f"the value is {size} bytes; this store's limit is {lim.max_value_bytes} bytes per lesson. "
                "Shorten the lesson, or ask the operator to raise limits.max_value_bytes",
                {"limit": "max_value_bytes", "allowed": lim.max_value_bytes, "got": size},
            )


def check_write(
    conn: Connection,
    settings: Settings,
    principal: Principal,
    value: str,
    *,
    creating: bool,
    count: int = 1,
    overrides: Mapping[str, Any] | None = None,
) -> None:
    """Refuse a write that would break one of the tenant's limits (inside the write transaction).

    ``overrides``: as for ``effective``."""
    lim, _ = effective(conn, settings, principal.tenant_id, overrides)
    _value_size(lim, value)
    if lim.writes_per_minute:
        since = utcnow() - timedelta(minutes=1)
        recent = conn.execute(
            select(func.count()).where(
                audit_log.c.tenant_id == principal.tenant_id,
                audit_log.c.at > since,
                audit_log.c.lesson_id.is_not(None),  # lesson changes; org and token events do not count
            )
        ).scalar_one()
        if recent + count > lim.writes_per_minute:
            raise CairnError(
                "LIMIT",
                f"{recent} writes in the last minute; this store allows {lim.writes_per_minute} a minute. "
                "Retry in a minute",
                {"limit": "writes_per_minute", "allowed": lim.writes_per_minute, "got": recent, "retry_after": 60},
            )
    if creating and lim.max_lessons:
        held = conn.execute(select(func.count()).where(lessons.c.tenant_id == principal.tenant_id)).scalar_one()
        if held + count > lim.max_lessons:
            raise CairnError(
                "LIMIT",
                f"this store holds {held} lessons and its limit is {lim.max_lessons}. Archive and purge "
                "lessons you no longer need (cairn purge --archived), or ask the operator to raise limits.max_lessons",
                {"limit": "max_lessons", "allowed": lim.max_lessons, "got": held},
            )
