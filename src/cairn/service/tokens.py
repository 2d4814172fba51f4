"""Bearer tokens: minting (returned once, stored as a hash), listing and revoking.

A token's level may not exceed what its account may do where it acts; an org's admins and owners
see and revoke the org's tokens held by members below them. Each change is on the tenant's chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from cairn.core import roles
from cairn.core.principal import TOKEN_STYLES, Principal
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.service import audit
from cairn.service.accounts import (
    DEFAULT_TOKEN_TTL,
    LOREKIT_PREFIXES,
    TOKEN_PREFIX,
    account_level,
    check_page_limit,
    check_patterns,
    expiry,
    in_tenant,
    is_deleted,
    new_token,
    role_of,
    token_public,
)
from cairn.service.records import paged
from cairn.service.tx import write_tx
from cairn.store.engine import Store, set_caller
from cairn.store.schema import memberships, tokens


@dataclass(eq=False, repr=False)
class Tokens:
    """Your tokens, and an org's for its admins."""

    store: Store

    def token_create(
        self,
        principal: Principal,
        *,
        perm: str,
        scope_patterns: list[str] | None = None,
        org: str | None = None,
        expires: str | None = None,
        name: str | None = None,
        style: str = "cairn",
    ) -> dict[str, Any]:
        """A new bearer token, returned once. Its level may not exceed what its account may do there.

        ``style="lorekit"`` spells it as LoreKit's clients expect (``lk_rw_…``/``lk_ro_…``)."""
        level = roles.check_level(perm)
        if style not in TOKEN_STYLES:
            raise CairnError("INVALID_INPUT", f"token style must be one of {', '.join(TOKEN_STYLES)}; got {style!r}")
        patterns = check_patterns(scope_patterns)
        account_level(principal, "creating a token")
        tenant = roles.org_tenant(org) if org else principal.user_id or ""
        label = (name or "").strip()[:100] or f"{level} token"
        prefix = LOREKIT_PREFIXES[level] if style == "lorekit" else TOKEN_PREFIX
        secret, row = new_token(
            principal.user_id or "", tenant, label, level, patterns, expiry(expires, DEFAULT_TOKEN_TTL), prefix
        )

        def tx(conn: Connection, acting: Principal) -> dict[str, Any]:
            role = role_of(conn, tenant, principal.user_id or "")
            if role is None or is_deleted(conn, tenant):
                raise CairnError("NOT_FOUND", f"no org {org!r} that you belong to" if org else "no such tenant")
            allowed = roles.ROLE_LEVEL[role]
            if roles.effective(level, role) != roles.permissions_for(level):
                raise CairnError(
                    "FORBIDDEN", f"your role there is {role}: tokens you create there can be at most {allowed}"
                )
            tid = conn.execute(insert(tokens).values(**row).returning(tokens.c.id)).scalar_one()
            audit.record(
                conn,
                in_tenant(principal, tenant),
                "token.create",
                detail={"token": tid, "name": label, "perm": level, "scope_patterns": patterns},
            )
            return {"token": secret, "token_id": tid, **token_public(row, tid)}

        return write_tx(self.store, in_tenant(principal, tenant), tx)

    def token_list(
        self, principal: Principal, org: str | None = None, *, limit: int = 1000, cursor: str | None = None
    ) -> dict[str, Any]:
        """Your own tokens; with ``org``, every token of the org (admins and owners). Paged by id."""
        account_level(principal, "listing tokens", level=None)
        tenant = roles.org_tenant(org) if org else None
        check_page_limit(limit)

        def tx(conn: Connection) -> dict[str, Any]:
            q = select(tokens)
            if tenant is not None:
                roles.require_role(
                    role_of(conn, tenant, principal.user_id or ""), roles.ADMIN_ROLE, "listing an org's tokens"
                )
                q = q.where(tokens.c.tenant_id == tenant)
            else:
                q = q.where(tokens.c.user_id == principal.user_id)
            now = utcnow()
            rows, after = paged(
                conn, principal, q, ((tokens.c.id, False),), limit, kind="tokens", cursor=cursor, scoped=False
            )
            return {"tokens": [token_public(r, r["id"], now) for r in rows], "next_cursor": after}

        return self.store.run(tx, write=False, tenant=tenant, user=principal.user_id, actor=principal.actor)

    def token_revoke(self, principal: Principal, token_id: int) -> dict[str, Any]:
        """Revoke one of your tokens, or (admins/owners) a token of your org held by someone below you."""
        account_level(principal, "revoking a token", level=None)

        def locate(conn: Connection) -> str:
            # Only tokens the caller may act on are looked for, with explicit predicates, so both
            # databases answer alike and an outsider cannot tell "exists" from "does not".
            own = conn.execute(
                select(tokens.c.tenant_id).where(tokens.c.id == token_id, tokens.c.user_id == principal.user_id)
            ).first()
            if own is not None:
                return str(own[0])
            managed = conn.execute(
                select(memberships.c.tenant_id).where(
                    memberships.c.user_id == principal.user_id,
                    memberships.c.role.in_([roles.ADMIN_ROLE, roles.OWNER]),
                )
            ).scalars()
            for tenant in list(managed):
                set_caller(conn, tenant=tenant, user=principal.user_id)
                found = conn.execute(
                    select(tokens.c.tenant_id).where(tokens.c.id == token_id, tokens.c.tenant_id == tenant)
                ).first()
                if found is not None:
                    return str(found[0])
            raise CairnError("NOT_FOUND", f"no token {token_id} that you can revoke")

        tenant = self.store.run(locate, write=False, user=principal.user_id)

        def tx(conn: Connection, acting: Principal) -> dict[str, Any]:
            row = conn.execute(select(tokens).where(tokens.c.id == token_id)).mappings().first()
            if row is None:
                raise CairnError("NOT_FOUND", f"no token {token_id} that you can see")
            if row["user_id"] != principal.user_id:
                owner_role = role_of(conn, tenant, row["user_id"]) or roles.VIEWER
                roles.require_manage(
                    role_of(conn, tenant, principal.user_id or ""), owner_role, None, "revoking another member's token"
                )
            if row["revoked_at"] is not None:
                return {"token_id": token_id, "revoked": True, "note": "already revoked"}
            conn.execute(
                update(tokens).where(tokens.c.id == token_id).values(revoked_at=utcnow(), revoked_by=principal.actor)
            )
            audit.record(
                conn, in_tenant(principal, tenant), "token.revoke", detail={"token": token_id, "of": row["user_id"]}
            )
            return {"token_id": token_id, "revoked": True}

        return write_tx(self.store, in_tenant(principal, tenant), tx)
