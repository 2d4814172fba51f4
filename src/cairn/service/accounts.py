"""Accounts: who may act, and as whom; the checks and records the account services share.

The services are ``auth`` (resolving a token, creating accounts), ``orgs`` (orgs, invites,
members, scope bindings), ``tokens`` and ``limits`` (per-tenant overrides); this module holds what
they share.

Every request resolves to a ``Principal`` here or in ``runtime/local.local_principal``; nothing
trusts a caller-supplied account or tenant id (naming another tenant must never reach it). A token
resolves by the SHA-256 of the secret the caller presents, and its permissions are recomputed from
the account's *current* role on every request. Org changes (membership, roles, invites, bindings,
tokens) are written to the org's own audit chain, like lesson changes.

Capabilities are in ``core/roles.py``; this module applies them inside the transaction that makes
the change, so a role read and a change made on it cannot be split by a concurrent demotion (the
write runs under the tenant's write lock).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import Connection

from cairn.core import roles
from cairn.core.lesson import MAX_PAGE
from cairn.core.principal import ADMIN, LOCAL_USER, Principal
from cairn.core.scope import normalize_pattern, validate_scope
from cairn.core.timeparse import format_time, parse_ttl, utcnow
from cairn.errors import CairnError
from cairn.store.schema import memberships, tenants, tokens

TOKEN_PREFIX = "cairn_"  # noqa: S105 - a prefix, not a secret
# LoreKit's CLI reads a token's permission from its prefix (and warns on any other): a token made
# for it (``token_create(style="lorekit")``) is spelled its way. Same random part, same hash at rest,
# same lookup; the prefix only names the level (read: ro, write and admin: rw).
LOREKIT_PREFIXES = {"read": "lk_ro_", "write": "lk_rw_", "admin": "lk_rw_"}
TOKEN_PREFIXES = (TOKEN_PREFIX, *sorted(set(LOREKIT_PREFIXES.values())))
INVITE_PREFIX = "cairn-invite-"
DEFAULT_TOKEN_TTL = "90d"  # noqa: S105 - a duration
DEFAULT_INVITE_TTL = "7d"
MAX_PATTERNS = 32


def secret_hash(secret: str) -> str:
    """SHA-256 hex: tokens and invite codes carry 256 random bits, so a fast hash is enough."""
    return hashlib.sha256(secret.encode()).hexdigest()


def check_patterns(raw: list[str] | None) -> list[str]:
    out: list[str] = []
    for p in raw or []:
        p = p.strip()
        if not p:
            continue
        probe = p.replace("*", "x")
        try:
            validate_scope(probe)
        except CairnError as exc:
            raise CairnError("INVALID_SCOPE", f"scope pattern {p!r}: {exc.message}", exc.data) from None
        out.append(normalize_pattern(p))
    if len(out) > MAX_PATTERNS:
        raise CairnError("INVALID_INPUT", f"at most {MAX_PATTERNS} scope patterns, got {len(out)}")
    return sorted(set(out))


def expiry(raw: str | None, default: str) -> datetime | None:
    text = (raw or default).strip().lower()
    if text in ("never", "none", "0"):
        return None
    return utcnow() + parse_ttl(text)


def check_page_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise CairnError("INVALID_INPUT", f"limit must be between 1 and {MAX_PAGE}, got {limit}")


def operator_only(principal: Principal, what: str) -> None:
    if principal.token_id is not None or principal.user_id != LOCAL_USER:
        raise CairnError(
            "FORBIDDEN",
            f"{what} is for the operator (Cairn run with the database's own credentials, no token)",
        )


def account_level(principal: Principal, what: str, *, level: str | None = ADMIN, tenant: str | None = None) -> None:
    """Account-level actions need an unrestricted credential of the account itself.

    A scope-limited token, or one made for a different tenant than its account's own (or the org
    acted on), cannot manage memberships or mint tokens: that would let a narrow CI token widen itself.
    """
    if principal.user_id is None:
        raise CairnError("FORBIDDEN", f"{what} needs an account")
    if principal.scope_limited:
        raise CairnError("FORBIDDEN", f"{what} acts on the whole account; a scope-limited token may not")
    if principal.tenant_id not in (principal.user_id, tenant):
        raise CairnError("FORBIDDEN", f"{what}: this token belongs to another tenant ({principal.tenant_id})")
    if level is not None:
        principal.require(level)


def in_tenant(principal: Principal, tenant: str) -> Principal:
    """The caller as recorded in another tenant's audit chain."""
    return principal.with_tenant(tenant, principal.permissions)


def role_of(conn: Connection, tenant: str, user: str) -> str | None:
    return conn.execute(
        select(memberships.c.role).where(memberships.c.tenant_id == tenant, memberships.c.user_id == user)
    ).scalar()


def owner_count(conn: Connection, tenant: str) -> int:
    return conn.execute(
        select(func.count()).where(memberships.c.tenant_id == tenant, memberships.c.role == roles.OWNER)
    ).scalar_one()


def is_deleted(conn: Connection, tenant: str) -> bool:
    row = conn.execute(select(tenants.c.deleted_at).where(tenants.c.id == tenant)).first()
    return row is None or row[0] is not None


def drop_member(conn: Connection, principal: Principal, tenant: str, user: str) -> None:
    """A member leaves with their org tokens revoked (their role no longer backs them anyway)."""
    conn.execute(delete(memberships).where(memberships.c.tenant_id == tenant, memberships.c.user_id == user))
    conn.execute(
        update(tokens)
        .where(tokens.c.tenant_id == tenant, tokens.c.user_id == user, tokens.c.revoked_at.is_(None))
        .values(revoked_at=utcnow(), revoked_by=principal.actor)
    )


def new_token(
    user: str,
    tenant: str,
    name: str,
    perm: str,
    patterns: list[str],
    expires_at: datetime | None,
    prefix: str = TOKEN_PREFIX,
) -> tuple[str, dict[str, Any]]:
    secret = prefix + secrets.token_urlsafe(32)
    return secret, {
        "token_hash": secret_hash(secret),
        "prefix": secret[:14],
        "user_id": user,
        "tenant_id": tenant,
        "name": name,
        "perm": perm,
        "scope_patterns": json.dumps(patterns),
        "created_at": utcnow(),
        "expires_at": expires_at,
    }


def token_public(row: Any, tid: int, now: datetime | None = None) -> dict[str, Any]:
    now = now or utcnow()
    expires = row["expires_at"]
    revoked = row.get("revoked_at") if hasattr(row, "get") else None
    state = "revoked" if revoked else ("expired" if expires is not None and expires <= now else "active")
    tenant = row["tenant_id"]
    return {
        "id": tid,
        "prefix": row["prefix"],
        "name": row["name"],
        "user": row["user_id"],
        "org": tenant.removeprefix(roles.ORG_PREFIX) if tenant.startswith(roles.ORG_PREFIX) else None,
        "tenant": tenant,
        "perm": row["perm"],
        "scope_patterns": json.loads(row["scope_patterns"]),
        "created_at": format_time(row["created_at"]),
        "expires_at": format_time(expires) if expires else None,
        "state": state,
    }


def invite_public(row: Any, now: datetime) -> dict[str, Any]:
    if row["accepted_at"]:
        state = f"accepted by {row['accepted_by']}"
    elif row["revoked_at"]:
        state = "revoked"
    elif row["expires_at"] <= now:
        state = "expired"
    else:
        state = "open"
    return {
        "id": row["id"],
        "role": row["role"],
        "created_by": row["created_by"],
        "created_at": format_time(row["created_at"]),
        "expires_at": format_time(row["expires_at"]),
        "state": state,
    }
