"""The tenant's deletion epoch: one counter every erasure bumps, for work that must not outlive one.

Background work (a streaming gateway request recording its turn, an extraction job, any later job)
reads its inputs in one transaction and writes in another. If the tenant's memory was erased in
between — a lesson forgotten or purged, a conversation forgotten, everything reset — what it computed
may carry erased text back in. So the job snapshots ``current`` when it reads, and its write
transaction calls ``unchanged``: when the epoch moved, the job writes nothing (and says so in the
audit). Erasures call ``bump`` inside their own transaction, so the two cannot interleave unseen.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from cairn.store.schema import tenants

GUARD = "deletion_epoch"  # the name the audit gives this guard when it fires


def current(conn: Connection, tenant_id: str) -> int:
    value = conn.execute(select(tenants.c.deletion_epoch).where(tenants.c.id == tenant_id)).scalar()
    return int(value or 0)


def bump(conn: Connection, tenant_id: str) -> None:
    """Called inside the erasing transaction (the write lock is held, so no increment is lost)."""
    conn.execute(update(tenants).where(tenants.c.id == tenant_id).values(deletion_epoch=tenants.c.deletion_epoch + 1))


def unchanged(conn: Connection, tenant_id: str, snapshot: int) -> bool:
    return current(conn, tenant_id) == snapshot
