"""The service facade: every surface calls these methods with a principal.

Each method opens exactly one transaction (``Store.run``) and performs one operation; the
operations are grouped by what they hold (``lessons``, ``lifecycle``, ``tombstones``, ``graph``,
``purge``, ``ledger``, ``transfer``) and composed here.
"""

from __future__ import annotations

from sqlalchemy import insert, select

from cairn.core.principal import Principal
from cairn.core.roles import OWNER
from cairn.core.timeparse import utcnow
from cairn.runtime.settings import Settings
from cairn.service.accounts import AccountOps
from cairn.service.browse import BrowseOps
from cairn.service.context import ContextOps
from cairn.service.conversations import ConversationOps
from cairn.service.graph import GraphOps
from cairn.service.ledger import LedgerOps
from cairn.service.lifecycle import LifecycleOps
from cairn.service.purge import PurgeOps
from cairn.service.scopes import ScopeOps
from cairn.service.search import SearchOps
from cairn.service.status import StatusOps
from cairn.service.tombstones import ForgetOps
from cairn.service.transfer import TransferOps
from cairn.service.webhooks import WebhookOps
from cairn.store.engine import Store
from cairn.store.schema import memberships, tenants, users


class Cairn(
    AccountOps,
    ScopeOps,
    BrowseOps,
    ContextOps,
    LifecycleOps,
    ForgetOps,
    GraphOps,
    PurgeOps,
    LedgerOps,
    TransferOps,
    SearchOps,
    StatusOps,
    WebhookOps,
    ConversationOps,
):
    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings or Settings()
        self._tenants_seen: set[str] = set()

    def ensure_tenant(self, principal: Principal, name: str | None = None) -> None:
        """Create the principal's tenant row on first use (the local single-user default)."""
        if principal.tenant_id in self._tenants_seen:
            return

        def exists(conn):  # type: ignore[no-untyped-def]
            return conn.execute(select(tenants.c.id).where(tenants.c.id == principal.tenant_id)).first()

        def create(conn):  # type: ignore[no-untyped-def]
            if not exists(conn):
                now = utcnow()
                conn.execute(
                    insert(tenants).values(id=principal.tenant_id, name=name or principal.tenant_id, created_at=now)
                )
                # The account whose own tenant this is owns it (the local default: "local").
                if principal.user_id is not None and principal.user_id == principal.tenant_id:
                    if not conn.execute(select(users.c.id).where(users.c.id == principal.user_id)).first():
                        conn.execute(
                            insert(users).values(id=principal.user_id, created_at=now, created_by=principal.actor)
                        )
                    conn.execute(
                        insert(memberships).values(
                            tenant_id=principal.tenant_id,
                            user_id=principal.user_id,
                            role=OWNER,
                            created_at=now,
                            created_by=principal.actor,
                        )
                    )

        # Read first: the common case must not take the write lock on every command.
        if not self.store.run(exists, write=False, **principal.db_vars):
            self.store.run(create, write=True, **principal.db_vars)
        self._tenants_seen.add(principal.tenant_id)
