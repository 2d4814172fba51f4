"""Resolving a request to a principal, and the accounts themselves (the operator's).

Every request resolves to a ``Principal`` here or in ``runtime/local.local_principal``; nothing
trusts a caller-supplied account or tenant id. A token resolves by the SHA-256 of the secret the
caller presents, and its permissions are recomputed from the account's *current* role on every
request.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from cairn.core import roles
from cairn.core.principal import ADMIN, LOCAL_USER, Principal
from cairn.core.timeparse import format_time, utcnow
from cairn.errors import CairnError
from cairn.service import audit
from cairn.service.accounts import (
    DEFAULT_TOKEN_TTL,
    TOKEN_PREFIX,
    TOKEN_PREFIXES,
    expiry,
    is_deleted,
    new_token,
    operator_only,
    role_of,
    secret_hash,
    token_public,
)
from cairn.service.tx import read_tx, write_tx
from cairn.store.engine import Store, set_caller
from cairn.store.schema import memberships, tenants, tokens, users


class Auth:
    """Tokens to principals, ``whoami``, account creation and the local tenant's first use."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._tenants_seen: set[str] = set()

    def resolve_token(self, secret: str, *, session: str | None = None, human: bool = False) -> Principal:
        """The principal a bearer token stands for; UNAUTHENTICATED when the credential itself is
        the problem (malformed, unknown, revoked, expired, its account gone). Reads only; never
        trusts input ids."""
        secret = (secret or "").strip()
        if not secret.startswith(TOKEN_PREFIXES) or len(secret) > 200:
            raise CairnError("UNAUTHENTICATED", f"not a Cairn token (they start with {TOKEN_PREFIX!r})")
        digest = secret_hash(secret)

        def tx(conn: Connection) -> Principal:
            row = conn.execute(select(tokens).where(tokens.c.token_hash == digest)).mappings().first()
            if row is None:
                raise CairnError("UNAUTHENTICATED", "unknown token")
            if row["revoked_at"] is not None:
                raise CairnError(
                    "UNAUTHENTICATED", f"token {row['prefix']}… was revoked at {format_time(row['revoked_at'])}"
                )
            if row["expires_at"] is not None and row["expires_at"] <= utcnow():
                raise CairnError(
                    "UNAUTHENTICATED",
                    f"token {row['prefix']}… expired at {format_time(row['expires_at'])}; create a new one",
                )
            # Now the caller is known: let row security show its tenant's membership.
            set_caller(conn, tenant=row["tenant_id"], user=row["user_id"], token="")
            role = role_of(conn, row["tenant_id"], row["user_id"])
            if role is None or is_deleted(conn, row["tenant_id"]):
                raise CairnError("UNAUTHENTICATED", f"token {row['prefix']}…: its account is no longer a member there")
            return Principal(
                tenant_id=row["tenant_id"],
                actor=row["user_id"],
                session=session,
                permissions=roles.effective(row["perm"], role),
                scope_patterns=tuple(json.loads(row["scope_patterns"])),
                human=human,
                user_id=row["user_id"],
                token_id=row["id"],
            )

        return self.store.run(tx, write=False, token=digest)

    def whoami(self, principal: Principal) -> dict[str, Any]:
        """Who a request acts as: account, store (tenant), effective permission and scope limits.

        Answers from the principal the token resolved to, so it reads nothing more and tells a
        caller (a remote CLI, an MCP client) what the server will let it do before it tries.
        """
        return {
            "user": principal.user_id,
            "tenant": principal.tenant_id,
            "actor": principal.actor,
            "permission": principal.level,
            "scope_patterns": list(principal.scope_patterns),
            "token_id": principal.token_id,
        }

    def create_user(self, principal: Principal, name: str) -> dict[str, Any]:
        """A new account with its personal tenant and a first admin token (shown once).

        Only the operator -- whoever runs Cairn with the database's own credentials -- creates
        accounts; a token cannot, whatever its level.
        """
        operator_only(principal, "creating accounts")
        user = roles.check_name(name, "account name")
        if user == LOCAL_USER:
            raise CairnError("CONFLICT", f"{LOCAL_USER!r} is the operator's own account")
        secret, token_row = new_token(user, user, "initial", ADMIN, [], expiry(None, DEFAULT_TOKEN_TTL))
        now = utcnow()

        def tx(conn: Connection, as_user: Principal) -> dict[str, Any]:
            if (
                conn.execute(select(users.c.id).where(users.c.id == user)).first()
                or conn.execute(select(tenants.c.id).where(tenants.c.id == user)).first()
            ):
                raise CairnError("CONFLICT", f"an account named {user!r} exists")
            conn.execute(insert(users).values(id=user, created_at=now, created_by=principal.actor))
            conn.execute(insert(tenants).values(id=user, name=user, created_at=now, kind="personal"))
            conn.execute(
                insert(memberships).values(
                    tenant_id=user, user_id=user, role=roles.OWNER, created_at=now, created_by=principal.actor
                )
            )
            tid = conn.execute(insert(tokens).values(**token_row).returning(tokens.c.id)).scalar_one()
            audit.record(conn, as_user, "account.create", detail={"account": user, "token": tid}, at=now)
            return {"user": user, "tenant": user, "token": secret, "token_id": tid, **token_public(token_row, tid)}

        return write_tx(self.store, Principal(user, principal.actor, principal.session, user_id=user), tx)

    def ensure_tenant(self, principal: Principal, name: str | None = None) -> None:
        """Create the principal's tenant row on first use (the local single-user default)."""
        if principal.tenant_id in self._tenants_seen:
            return

        def exists(conn: Connection) -> bool:
            return conn.execute(select(tenants.c.id).where(tenants.c.id == principal.tenant_id)).first() is not None

        def create(conn: Connection, principal: Principal) -> None:
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
                            role=roles.OWNER,
                            created_at=now,
                            created_by=principal.actor,
                        )
                    )

        # Read first: the common case must not take the write lock on every command.
        if not read_tx(self.store, principal, exists):
            write_tx(self.store, principal, create)
        self._tenants_seen.add(principal.tenant_id)
