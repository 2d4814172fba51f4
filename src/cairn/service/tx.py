"""How an operation opens its one transaction: ``read_tx`` and ``write_tx``.

Every service operation is one transaction (``Store.run``), opened by the module that holds the
operation; every write goes through ``write_tx``. They tell the database who the caller is (row
security on Postgres reads it), and ``write_tx`` routes a lesson write into the org that bound its
scope. Reads made before the caller's tenant is known (a token by its hash, an invite by its code)
name what they look up instead (``Store.run`` with ``token=`` / ``invite=``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from cairn.core import roles
from cairn.core.principal import WRITE, Principal
from cairn.core.scope import scope_matches, validate_scope
from cairn.store.engine import Store, enter_tenant
from cairn.store.schema import memberships, scope_bindings

T = TypeVar("T")

# Built once: every lesson write runs it, and building a select costs more than running this one.
_BINDINGS = (
    select(scope_bindings.c.tenant_id, scope_bindings.c.pattern, memberships.c.role)
    .join(
        memberships,
        (memberships.c.tenant_id == scope_bindings.c.tenant_id) & (memberships.c.user_id == bindparam("user")),
    )
    .order_by(func.length(scope_bindings.c.pattern).desc(), scope_bindings.c.pattern)
)


def read_tx(store: Store, principal: Principal, fn: Callable[[Connection], T]) -> T:
    """Run ``fn(conn)`` as one read transaction in the principal's tenant."""
    return store.run(fn, write=False, **principal.db_vars)


def write_tx(
    store: Store,
    principal: Principal,
    fn: Callable[[Connection, Principal], T],
    *,
    route: str | None = None,
    **more: str | None,
) -> T:
    """Run ``fn(conn, acting)`` as one write transaction; ``acting`` is the principal the write acts as.

    Without ``route`` that is ``principal`` in its own tenant. With ``route`` (a lesson's scope) it
    is the principal in the org whose binding covers that scope, if any: for its members who may
    write, and only for a principal acting in its account's own tenant (an org token already acts in
    its org); the routed principal keeps the caller's level and scope patterns, capped by the role
    there, and the result (a dict) says ``routed_to``. ``more``: what else row security needs to know
    before the caller is a member (an invite's hash, for its acceptance).

    The binding is read inside the write's own transaction (a separate read would cost a round trip
    on every write); when it routes, the transaction switches to the org's tenant and, on Postgres,
    also takes the org's write lock (always after the caller's own: no two writers can wait on each
    other in the opposite order).
    """
    if route is None:
        return store.run(lambda conn: fn(conn, principal), write=True, **principal.db_vars, **more)

    def tx(conn: Connection) -> T:
        target = bound_principal(conn, principal, route)
        if target.tenant_id != principal.tenant_id:
            enter_tenant(conn, target.tenant_id)
        out = fn(conn, target)
        if target.tenant_id != principal.tenant_id and isinstance(out, dict):
            out["routed_to"] = target.tenant_id
        return out

    return store.run(tx, write=True, **principal.db_vars, **more)


def bound_principal(conn: Connection, principal: Principal, scope: str) -> Principal:
    """The principal in the org whose binding covers ``scope`` (longest pattern first), or unchanged."""
    return route_by(principal, bindings_of(conn, principal), scope)


def bindings_of(conn: Connection, principal: Principal) -> list[Any]:
    """The scope bindings that may route this principal's writes: ``(tenant, pattern, role)``, longest first.

    Read once per transaction by a writer of many lessons (``route_by`` then answers per scope)."""
    if principal.user_id is None or principal.tenant_id != principal.user_id:
        return []
    return list(conn.execute(_BINDINGS, {"user": principal.user_id}).all())


def route_by(principal: Principal, bindings: list[Any], scope: str) -> Principal:
    """``bound_principal`` over bindings already read (``bindings_of``)."""
    if not bindings:
        return principal
    canonical = validate_scope(scope)
    for tenant, pattern, role in bindings:
        if scope_matches(canonical, pattern):
            perms = roles.effective(principal.level, role)
            if WRITE in perms:
                return principal.with_tenant(tenant, perms)
    return principal
