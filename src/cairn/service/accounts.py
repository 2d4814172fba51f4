"""Accounts, orgs, invites, scope bindings, tokens and limits: who may act, and as whom.

Every request resolves to a ``Principal`` here or in ``core/principal.local_principal``; nothing
trusts a caller-supplied account or tenant id (seed 000's hole). A token resolves by the SHA-256 of
the secret the caller presents, and its permissions are recomputed from the account's *current*
role on every request. Org changes (membership, roles, invites, bindings, tokens) are written to
the org's own audit chain, like lesson changes.

Capabilities are in ``core/roles.py``; this module applies them inside the transaction that makes
the change, so a role read and a change made on it cannot be split by a concurrent demotion (the
write runs under the tenant's write lock).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from cairn.core import roles
from cairn.core.principal import ADMIN, LOCAL_USER, WRITE, Principal
from cairn.core.scope import normalize_pattern, scope_matches, validate_scope
from cairn.core.timeparse import format_time, parse_ttl, utcnow
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.service import audit, limits
from cairn.service.records import paged
from cairn.store.engine import Store, enter_tenant, set_caller
from cairn.store.schema import (
    invites,
    lessons,
    memberships,
    scope_bindings,
    tenant_limits,
    tenants,
    tokens,
    users,
    webhook_deliveries,
    webhooks,
)

TOKEN_PREFIX = "cairn_"  # noqa: S105 - a prefix, not a secret
# LoreKit's CLI reads a token's permission from its prefix (and warns on any other): a token made
# for it (``token_create(style="lorekit")``) is spelled its way. Same random part, same hash at rest,
# same lookup; the prefix only names the level (read: ro, write and admin: rw).
LOREKIT_PREFIXES = {"read": "lk_ro_", "write": "lk_rw_", "admin": "lk_rw_"}
TOKEN_STYLES = ("cairn", "lorekit")
_PREFIXES = (TOKEN_PREFIX, *sorted(set(LOREKIT_PREFIXES.values())))
INVITE_PREFIX = "cairn-invite-"
DEFAULT_TOKEN_TTL = "90d"  # noqa: S105 - a duration
DEFAULT_INVITE_TTL = "7d"
MAX_PATTERNS = 32


def secret_hash(secret: str) -> str:
    """SHA-256 hex: tokens and invite codes carry 256 random bits, so a fast hash is enough."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _patterns(raw: list[str] | None) -> list[str]:
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


def _expiry(raw: str | None, default: str) -> datetime | None:
    text = (raw or default).strip().lower()
    if text in ("never", "none", "0"):
        return None
    return utcnow() + parse_ttl(text)


class AccountOps:
    store: Store
    settings: Settings

    # -- resolving a request ----------------------------------------------------------------
    def resolve_token(self, secret: str, *, session: str | None = None, human: bool = False) -> Principal:
        """The principal a bearer token stands for; UNAUTHENTICATED when the credential itself is
        the problem (malformed, unknown, revoked, expired, its account gone). Reads only; never
        trusts input ids."""
        secret = (secret or "").strip()
        if not secret.startswith(_PREFIXES) or len(secret) > 200:
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
            role = _role(conn, row["tenant_id"], row["user_id"])
            if role is None or _deleted(conn, row["tenant_id"]):
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

    def routed_write(self, principal: Principal, scope: str, fn: Callable[[Connection, Principal], dict[str, Any]]):  # type: ignore[no-untyped-def]
        """Run ``fn(conn, target)`` as one write transaction, in the org that bound ``scope`` if any.

        Routing: an org whose binding covers the scope, for its members who may write, and only for
        a principal acting in its account's own tenant (an org token already acts in its org); the
        routed principal keeps the caller's level and scope patterns, capped by the role there.

        The binding is read inside the write's own transaction (a separate read cost ~0.5 ms a write
        on SQLite); when it routes, the transaction switches to the org's tenant and, on Postgres,
        also takes the org's write lock (always after the caller's own: no two writers can wait on
        each other in the opposite order).
        """

        def tx(conn: Connection) -> dict[str, Any]:
            target = _bound(conn, principal, scope)
            if target.tenant_id != principal.tenant_id:
                enter_tenant(conn, target.tenant_id)
            out = fn(conn, target)
            if target.tenant_id != principal.tenant_id:
                out["routed_to"] = target.tenant_id
            return out

        return self.store.run(tx, write=True, **principal.db_vars)

    # -- accounts (the operator) -------------------------------------------------------------
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
        _operator(principal, "creating accounts")
        user = roles.check_name(name, "account name")
        if user == LOCAL_USER:
            raise CairnError("CONFLICT", f"{LOCAL_USER!r} is the operator's own account")
        secret, token_row = _new_token(user, user, "initial", ADMIN, [], _expiry(None, DEFAULT_TOKEN_TTL))
        now = utcnow()

        def tx(conn: Connection) -> dict[str, Any]:
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
            as_user = Principal(user, principal.actor, principal.session, user_id=user)
            audit.record(conn, as_user, "account.create", detail={"account": user, "token": tid}, at=now)
            return {"user": user, "tenant": user, "token": secret, "token_id": tid, **_token_public(token_row, tid)}

        return self.store.run(tx, write=True, tenant=user, user=user, actor=principal.actor)

    # -- orgs ---------------------------------------------------------------------------------
    def org_create(self, principal: Principal, slug: str, name: str | None = None) -> dict[str, Any]:
        _account(principal, "creating an org")
        tenant = roles.org_tenant(slug)
        now = utcnow()

        def tx(conn: Connection) -> dict[str, Any]:
            if conn.execute(select(tenants.c.id).where(tenants.c.id == tenant)).first():
                raise CairnError("CONFLICT", f"the org {slug!r} exists (org names are never reused)")
            conn.execute(insert(tenants).values(id=tenant, name=name or slug, created_at=now, kind="org"))
            conn.execute(
                insert(memberships).values(
                    tenant_id=tenant,
                    user_id=principal.user_id,
                    role=roles.OWNER,
                    created_at=now,
                    created_by=principal.actor,
                )
            )
            audit.record(conn, _in(principal, tenant), "org.create", detail={"org": slug, "name": name or slug}, at=now)
            return {"org": slug, "tenant": tenant, "name": name or slug, "role": roles.OWNER}

        return self.store.run(tx, write=True, tenant=tenant, user=principal.user_id, actor=principal.actor)

    def org_list(self, principal: Principal) -> dict[str, Any]:
        _account(principal, "listing orgs", level=None)

        def tx(conn: Connection) -> dict[str, Any]:
            rows = conn.execute(
                select(tenants.c.id, tenants.c.name, memberships.c.role)
                .join(memberships, memberships.c.tenant_id == tenants.c.id)
                .where(
                    memberships.c.user_id == principal.user_id, tenants.c.kind == "org", tenants.c.deleted_at.is_(None)
                )
                .order_by(tenants.c.id)
            ).all()
            return {"orgs": [{"org": t.removeprefix(roles.ORG_PREFIX), "name": n, "role": r} for t, n, r in rows]}

        return self.store.run(tx, write=False, **principal.db_vars)

    def org_rename(self, principal: Principal, slug: str, name: str) -> dict[str, Any]:
        name = (name or "").strip()
        if not name or len(name) > 200:
            raise CairnError("INVALID_INPUT", "an org's display name is 1-200 characters")

        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.ADMIN_ROLE, "renaming the org")
            old = conn.execute(select(tenants.c.name).where(tenants.c.id == tenant)).scalar_one()
            conn.execute(update(tenants).where(tenants.c.id == tenant).values(name=name))
            audit.record(conn, _in(principal, tenant), "org.rename", detail={"from": old, "to": name})
            return {"org": slug, "name": name, "was": old}

        return self._in_org(principal, slug, "renaming the org", tx)

    def org_delete(self, principal: Principal, slug: str, confirm: str | None) -> dict[str, Any]:
        """Erase the org's lessons and close it: members, invites, bindings and tokens go; the audit chain stays."""
        if confirm != slug:
            raise CairnError(
                "INVALID_INPUT",
                f"deleting an org erases all its lessons; confirm with --confirm {slug}",
            )

        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            from cairn.service.purge import erase

            roles.require_role(role, roles.OWNER, "deleting the org")
            org_p = _in(principal, tenant)
            now = utcnow()
            ids = list(conn.execute(select(lessons.c.id).where(lessons.c.tenant_id == tenant)).scalars())
            for lesson_id in ids:
                erase(conn, org_p, lesson_id)
            conn.execute(
                update(tokens)
                .where(tokens.c.tenant_id == tenant, tokens.c.revoked_at.is_(None))
                .values(revoked_at=now, revoked_by=principal.actor)
            )
            conn.execute(
                update(invites)
                .where(invites.c.tenant_id == tenant, invites.c.accepted_at.is_(None), invites.c.revoked_at.is_(None))
                .values(revoked_at=now, revoked_by=principal.actor)
            )
            conn.execute(delete(scope_bindings).where(scope_bindings.c.tenant_id == tenant))
            # Its webhook secrets go too: a deleted org receives no more deliveries.
            conn.execute(delete(webhook_deliveries).where(webhook_deliveries.c.tenant_id == tenant))
            conn.execute(delete(webhooks).where(webhooks.c.tenant_id == tenant))
            conn.execute(delete(memberships).where(memberships.c.tenant_id == tenant))
            conn.execute(update(tenants).where(tenants.c.id == tenant).values(deleted_at=now))
            audit.record(conn, org_p, "org.delete", detail={"org": slug, "lessons_erased": len(ids)}, at=now)
            return {"org": slug, "deleted": True, "lessons_erased": len(ids)}

        return self._in_org(principal, slug, "deleting the org", tx)

    # -- invites ------------------------------------------------------------------------------
    def org_invite(
        self, principal: Principal, slug: str, role: str = roles.MEMBER, expires: str | None = None
    ) -> dict[str, Any]:
        role = roles.check_role(role)
        code = INVITE_PREFIX + secrets.token_urlsafe(24)
        until = _expiry(expires, DEFAULT_INVITE_TTL) or utcnow() + parse_ttl("365d")

        def tx(conn: Connection, tenant: str, my_role: str | None) -> dict[str, Any]:
            roles.require_manage(my_role, roles.VIEWER, role, "inviting")
            now = utcnow()
            iid = conn.execute(
                insert(invites)
                .values(
                    tenant_id=tenant,
                    code_hash=secret_hash(code),
                    role=role,
                    created_at=now,
                    created_by=principal.actor,
                    expires_at=until,
                )
                .returning(invites.c.id)
            ).scalar_one()
            audit.record(conn, _in(principal, tenant), "org.invite", detail={"invite": iid, "role": role}, at=now)
            return {"org": slug, "invite_id": iid, "role": role, "code": code, "expires_at": format_time(until)}

        return self._in_org(principal, slug, "inviting", tx)

    def org_invites(self, principal: Principal, slug: str) -> dict[str, Any]:
        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.ADMIN_ROLE, "listing invites")
            rows = conn.execute(select(invites).where(invites.c.tenant_id == tenant).order_by(invites.c.id)).mappings()
            now = utcnow()
            return {"org": slug, "invites": [_invite_public(r, now) for r in rows]}

        return self._in_org(principal, slug, "listing invites", tx, write=False)

    def org_accept(self, principal: Principal, code: str) -> dict[str, Any]:
        """Join the org an invite code was made for (single use; the code is compared by hash)."""
        _account(principal, "accepting an invite")
        digest = secret_hash((code or "").strip())

        def find(conn: Connection) -> dict[str, Any]:
            row = conn.execute(select(invites).where(invites.c.code_hash == digest)).mappings().first()
            if row is None:
                raise CairnError("NOT_FOUND", "no such invite code")
            return dict(row)

        invite = self.store.run(find, write=False, invite=digest, user=principal.user_id)

        def tx(conn: Connection) -> dict[str, Any]:
            row = conn.execute(select(invites).where(invites.c.code_hash == digest)).mappings().first()
            now = utcnow()
            if row is None:
                raise CairnError("NOT_FOUND", "no such invite code")
            if row["revoked_at"] is not None:
                raise CairnError("FORBIDDEN", "this invite was revoked")
            if row["accepted_at"] is not None:
                raise CairnError("CONFLICT", "this invite was already used (invites are single-use)")
            if row["expires_at"] <= now:
                raise CairnError(
                    "FORBIDDEN", f"this invite expired at {format_time(row['expires_at'])}; ask for a new one"
                )
            if _deleted(conn, row["tenant_id"]):
                raise CairnError("NOT_FOUND", "the org of this invite was deleted")
            if _role(conn, row["tenant_id"], principal.user_id) is not None:
                raise CairnError("CONFLICT", "you are already a member of this org")
            conn.execute(
                update(invites).where(invites.c.id == row["id"]).values(accepted_at=now, accepted_by=principal.user_id)
            )
            conn.execute(
                insert(memberships).values(
                    tenant_id=row["tenant_id"],
                    user_id=principal.user_id,
                    role=row["role"],
                    created_at=now,
                    created_by=principal.actor,
                )
            )
            audit.record(
                conn,
                _in(principal, row["tenant_id"]),
                "org.join",
                detail={"invite": row["id"], "role": row["role"]},
                at=now,
            )
            return {"org": row["tenant_id"].removeprefix(roles.ORG_PREFIX), "role": row["role"]}

        return self.store.run(
            tx, write=True, tenant=invite["tenant_id"], user=principal.user_id, actor=principal.actor, invite=digest
        )

    def org_revoke_invite(self, principal: Principal, slug: str, invite_id: int) -> dict[str, Any]:
        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.ADMIN_ROLE, "revoking an invite")
            row = (
                conn.execute(select(invites).where(invites.c.tenant_id == tenant, invites.c.id == invite_id))
                .mappings()
                .first()
            )
            if row is None:
                raise CairnError("NOT_FOUND", f"no invite {invite_id} in org {slug!r}")
            if row["accepted_at"] is not None or row["revoked_at"] is not None:
                raise CairnError(
                    "CONFLICT", f"invite {invite_id} was already {'used' if row['accepted_at'] else 'revoked'}"
                )
            conn.execute(
                update(invites).where(invites.c.id == invite_id).values(revoked_at=utcnow(), revoked_by=principal.actor)
            )
            audit.record(conn, _in(principal, tenant), "org.uninvite", detail={"invite": invite_id})
            return {"org": slug, "invite_id": invite_id, "revoked": True}

        return self._in_org(principal, slug, "revoking an invite", tx)

    # -- members ------------------------------------------------------------------------------
    def org_members(
        self, principal: Principal, slug: str, *, limit: int = 1000, cursor: str | None = None
    ) -> dict[str, Any]:
        """The org's members by name, a page at a time (``next_cursor`` continues)."""
        _page_limit(limit)

        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.VIEWER, "listing members")
            q = select(memberships.c.user_id, memberships.c.role, memberships.c.created_at).where(
                memberships.c.tenant_id == tenant
            )
            order = ((memberships.c.user_id, False),)
            rows, after = paged(conn, principal, q, order, limit, kind="members", cursor=cursor, scoped=False)
            members = [{"user": r["user_id"], "role": r["role"], "since": format_time(r["created_at"])} for r in rows]
            return {"org": slug, "members": members, "next_cursor": after}

        return self._in_org(principal, slug, "listing members", tx, write=False)

    def member_role(self, principal: Principal, slug: str, user: str, role: str) -> dict[str, Any]:
        role = roles.check_role(role)

        def tx(conn: Connection, tenant: str, my_role: str | None) -> dict[str, Any]:
            target = _role(conn, tenant, user)
            if target is None:
                raise CairnError("NOT_FOUND", f"{user!r} is not a member of org {slug!r}")
            roles.require_manage(my_role, target, role, "changing a role")
            if target == roles.OWNER and role != roles.OWNER and _owners(conn, tenant) <= 1:
                raise CairnError("FORBIDDEN", "the last owner cannot be demoted; make someone else owner first")
            conn.execute(
                update(memberships)
                .where(memberships.c.tenant_id == tenant, memberships.c.user_id == user)
                .values(role=role)
            )
            audit.record(conn, _in(principal, tenant), "member.role", detail={"user": user, "from": target, "to": role})
            return {"org": slug, "user": user, "role": role, "was": target}

        return self._in_org(principal, slug, "changing a role", tx)

    def member_remove(self, principal: Principal, slug: str, user: str) -> dict[str, Any]:
        def tx(conn: Connection, tenant: str, my_role: str | None) -> dict[str, Any]:
            target = _role(conn, tenant, user)
            if target is None:
                raise CairnError("NOT_FOUND", f"{user!r} is not a member of org {slug!r}")
            if user == principal.user_id:
                raise CairnError("INVALID_INPUT", f"to leave an org use: cairn org leave {slug}")
            roles.require_manage(my_role, target, None, "removing a member")
            if target == roles.OWNER and _owners(conn, tenant) <= 1:
                raise CairnError("FORBIDDEN", "the last owner cannot be removed")
            _drop_member(conn, principal, tenant, user)
            audit.record(conn, _in(principal, tenant), "member.remove", detail={"user": user, "role": target})
            return {"org": slug, "user": user, "removed": True}

        return self._in_org(principal, slug, "removing a member", tx)

    def org_leave(self, principal: Principal, slug: str) -> dict[str, Any]:
        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.VIEWER, "leaving")
            if role == roles.OWNER and _owners(conn, tenant) <= 1:
                raise CairnError(
                    "FORBIDDEN", "the last owner cannot leave; make someone else owner first, or delete the org"
                )
            _drop_member(conn, principal, tenant, principal.user_id or "")
            audit.record(conn, _in(principal, tenant), "member.leave", detail={"user": principal.user_id, "role": role})
            return {"org": slug, "left": True}

        return self._in_org(principal, slug, "leaving", tx, level=None)

    # -- bindings -----------------------------------------------------------------------------
    def org_bind(self, principal: Principal, slug: str, pattern: str) -> dict[str, Any]:
        (pat,) = _patterns([pattern]) or [""]
        if not pat:
            raise CairnError("INVALID_SCOPE", "give a scope or pattern to bind, e.g. repo::acme/*")

        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.ADMIN_ROLE, "binding a scope")
            if conn.execute(select(scope_bindings.c.id).where(scope_bindings.c.pattern == pat)).first():
                raise CairnError("CONFLICT", f"{pat} is already bound to this org")
            try:
                with conn.begin_nested():
                    conn.execute(
                        insert(scope_bindings).values(
                            tenant_id=tenant, pattern=pat, created_at=utcnow(), created_by=principal.actor
                        )
                    )
            except IntegrityError:
                raise CairnError("CONFLICT", f"{pat} is bound to another org") from None
            audit.record(conn, _in(principal, tenant), "org.bind", detail={"pattern": pat})
            return {"org": slug, "pattern": pat, "bound": True}

        return self._in_org(principal, slug, "binding a scope", tx)

    def org_unbind(self, principal: Principal, slug: str, pattern: str) -> dict[str, Any]:
        (pat,) = _patterns([pattern]) or [""]

        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.ADMIN_ROLE, "unbinding a scope")
            n = conn.execute(
                delete(scope_bindings).where(scope_bindings.c.tenant_id == tenant, scope_bindings.c.pattern == pat)
            ).rowcount
            if not n:
                raise CairnError("NOT_FOUND", f"{pat} is not bound to org {slug!r}")
            audit.record(conn, _in(principal, tenant), "org.unbind", detail={"pattern": pat})
            return {"org": slug, "pattern": pat, "bound": False}

        return self._in_org(principal, slug, "unbinding a scope", tx)

    def org_bindings(self, principal: Principal, slug: str) -> dict[str, Any]:
        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.VIEWER, "listing bindings")
            rows = conn.execute(
                select(scope_bindings.c.pattern)
                .where(scope_bindings.c.tenant_id == tenant)
                .order_by(scope_bindings.c.pattern)
            ).scalars()
            return {"org": slug, "bindings": list(rows)}

        return self._in_org(principal, slug, "listing bindings", tx, write=False)

    # -- tokens -------------------------------------------------------------------------------
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
        patterns = _patterns(scope_patterns)
        _account(principal, "creating a token")
        tenant = roles.org_tenant(org) if org else principal.user_id or ""
        label = (name or "").strip()[:100] or f"{level} token"
        prefix = LOREKIT_PREFIXES[level] if style == "lorekit" else TOKEN_PREFIX
        secret, row = _new_token(
            principal.user_id or "", tenant, label, level, patterns, _expiry(expires, DEFAULT_TOKEN_TTL), prefix
        )

        def tx(conn: Connection) -> dict[str, Any]:
            role = _role(conn, tenant, principal.user_id or "")
            if role is None or _deleted(conn, tenant):
                raise CairnError("NOT_FOUND", f"no org {org!r} that you belong to" if org else "no such tenant")
            allowed = roles.ROLE_LEVEL[role]
            if roles.effective(level, role) != roles.permissions_for(level):
                raise CairnError(
                    "FORBIDDEN", f"your role there is {role}: tokens you create there can be at most {allowed}"
                )
            tid = conn.execute(insert(tokens).values(**row).returning(tokens.c.id)).scalar_one()
            audit.record(
                conn,
                _in(principal, tenant),
                "token.create",
                detail={"token": tid, "name": label, "perm": level, "scope_patterns": patterns},
            )
            return {"token": secret, "token_id": tid, **_token_public(row, tid)}

        return self.store.run(tx, write=True, tenant=tenant, user=principal.user_id, actor=principal.actor)

    def token_list(
        self, principal: Principal, org: str | None = None, *, limit: int = 1000, cursor: str | None = None
    ) -> dict[str, Any]:
        """Your own tokens; with ``org``, every token of the org (admins and owners). Paged by id."""
        _account(principal, "listing tokens", level=None)
        tenant = roles.org_tenant(org) if org else None
        _page_limit(limit)

        def tx(conn: Connection) -> dict[str, Any]:
            q = select(tokens)
            if tenant is not None:
                roles.require_role(
                    _role(conn, tenant, principal.user_id or ""), roles.ADMIN_ROLE, "listing an org's tokens"
                )
                q = q.where(tokens.c.tenant_id == tenant)
            else:
                q = q.where(tokens.c.user_id == principal.user_id)
            now = utcnow()
            rows, after = paged(
                conn, principal, q, ((tokens.c.id, False),), limit, kind="tokens", cursor=cursor, scoped=False
            )
            return {"tokens": [_token_public(r, r["id"], now) for r in rows], "next_cursor": after}

        return self.store.run(tx, write=False, tenant=tenant, user=principal.user_id, actor=principal.actor)

    def token_revoke(self, principal: Principal, token_id: int) -> dict[str, Any]:
        """Revoke one of your tokens, or (admins/owners) a token of your org held by someone below you."""
        _account(principal, "revoking a token", level=None)

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

        def tx(conn: Connection) -> dict[str, Any]:
            row = conn.execute(select(tokens).where(tokens.c.id == token_id)).mappings().first()
            if row is None:
                raise CairnError("NOT_FOUND", f"no token {token_id} that you can see")
            if row["user_id"] != principal.user_id:
                owner_role = _role(conn, tenant, row["user_id"]) or roles.VIEWER
                roles.require_manage(
                    _role(conn, tenant, principal.user_id or ""), owner_role, None, "revoking another member's token"
                )
            if row["revoked_at"] is not None:
                return {"token_id": token_id, "revoked": True, "note": "already revoked"}
            conn.execute(
                update(tokens).where(tokens.c.id == token_id).values(revoked_at=utcnow(), revoked_by=principal.actor)
            )
            audit.record(conn, _in(principal, tenant), "token.revoke", detail={"token": token_id, "of": row["user_id"]})
            return {"token_id": token_id, "revoked": True}

        return self.store.run(tx, write=True, tenant=tenant, user=principal.user_id, actor=principal.actor)

    # -- limits -------------------------------------------------------------------------------
    def limits_show(self, principal: Principal, tenant: str | None = None) -> dict[str, Any]:
        target = tenant or principal.tenant_id
        if target != principal.tenant_id:
            _operator(principal, "reading another tenant's limits")

        def tx(conn: Connection) -> dict[str, Any]:
            lim, sources = limits.effective(conn, self.settings, target)
            held = conn.execute(select(func.count()).where(lessons.c.tenant_id == target)).scalar_one()
            return {"tenant": target, "limits": lim.public(), "sources": sources, "lessons": held}

        return self.store.run(tx, write=False, tenant=target, user=principal.user_id, actor=principal.actor)

    def limits_set(self, principal: Principal, tenant: str, **values: int | None) -> dict[str, Any]:
        """Override the configured limits for one tenant (operator only); 0 clears an override."""
        _operator(principal, "setting limits")
        given = {k: v for k, v in values.items() if v is not None}
        unknown = set(given) - set(limits.FIELDS)
        if unknown or not given:
            raise CairnError("INVALID_INPUT", f"give at least one of: {', '.join(limits.FIELDS)}")
        for k, v in given.items():
            if v < 0 or (k == "max_value_bytes" and v > 65536):
                raise CairnError(
                    "INVALID_INPUT",
                    f"{k} must be 0 (no override) or positive{' and ≤ 65536' if k == 'max_value_bytes' else ''}",
                )
        cleaned = {k: (v or None) for k, v in given.items()}

        def tx(conn: Connection) -> dict[str, Any]:
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
            audit.record(conn, _in(principal, tenant), "limits.set", detail=cleaned, at=now)
            lim, sources = limits.effective(conn, self.settings, tenant)
            return {"tenant": tenant, "limits": lim.public(), "sources": sources}

        return self.store.run(tx, write=True, tenant=tenant, user=principal.user_id, actor=principal.actor)

    # -- helpers ------------------------------------------------------------------------------
    def _in_org(self, principal: Principal, slug: str, what: str, fn, *, write: bool = True, level: str | None = ADMIN):  # type: ignore[no-untyped-def]
        """Run ``fn(conn, tenant, my_role)`` in the org's tenant; a non-member learns nothing about it."""
        tenant = roles.org_tenant(slug)
        _account(principal, what, level=level if write else None, tenant=tenant)

        def tx(conn: Connection) -> Any:
            role = _role(conn, tenant, principal.user_id or "")
            if role is None or _deleted(conn, tenant):
                raise CairnError("NOT_FOUND", f"no org {slug!r} that you belong to")
            return fn(conn, tenant, role)

        return self.store.run(tx, write=write, tenant=tenant, user=principal.user_id, actor=principal.actor)


# -- module helpers ------------------------------------------------------------------------------


def _bound(conn: Connection, principal: Principal, scope: str) -> Principal:
    """The principal in the org whose binding covers ``scope`` (longest pattern first), or unchanged."""
    if principal.user_id is None or principal.tenant_id != principal.user_id:
        return principal
    canonical = validate_scope(scope)
    rows = conn.execute(
        select(scope_bindings.c.tenant_id, scope_bindings.c.pattern, memberships.c.role)
        .join(
            memberships,
            (memberships.c.tenant_id == scope_bindings.c.tenant_id) & (memberships.c.user_id == principal.user_id),
        )
        .order_by(func.length(scope_bindings.c.pattern).desc(), scope_bindings.c.pattern)
    ).all()
    for tenant, pattern, role in rows:
        if scope_matches(canonical, pattern):
            perms = roles.effective(principal.level, role)
            if WRITE in perms:
                return principal.with_tenant(tenant, perms)
    return principal


def _page_limit(limit: int) -> None:
    if not 1 <= limit <= 10_000:
        raise CairnError("INVALID_INPUT", f"limit must be between 1 and 10000, got {limit}")


def _operator(principal: Principal, what: str) -> None:
    if principal.token_id is not None or principal.user_id != LOCAL_USER:
        raise CairnError(
            "FORBIDDEN",
            f"{what} is for the operator (Cairn run with the database's own credentials, no token)",
        )


def _account(principal: Principal, what: str, *, level: str | None = ADMIN, tenant: str | None = None) -> None:
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


def _in(principal: Principal, tenant: str) -> Principal:
    """The caller as recorded in another tenant's audit chain."""
    return principal.with_tenant(tenant, principal.permissions)


def _role(conn: Connection, tenant: str, user: str) -> str | None:
    return conn.execute(
        select(memberships.c.role).where(memberships.c.tenant_id == tenant, memberships.c.user_id == user)
    ).scalar()


def _owners(conn: Connection, tenant: str) -> int:
    return conn.execute(
        select(func.count()).where(memberships.c.tenant_id == tenant, memberships.c.role == roles.OWNER)
    ).scalar_one()


def _deleted(conn: Connection, tenant: str) -> bool:
    row = conn.execute(select(tenants.c.deleted_at).where(tenants.c.id == tenant)).first()
    return row is None or row[0] is not None


def _drop_member(conn: Connection, principal: Principal, tenant: str, user: str) -> None:
    """A member leaves with their org tokens revoked (their role no longer backs them anyway)."""
    conn.execute(delete(memberships).where(memberships.c.tenant_id == tenant, memberships.c.user_id == user))
    conn.execute(
        update(tokens)
        .where(tokens.c.tenant_id == tenant, tokens.c.user_id == user, tokens.c.revoked_at.is_(None))
        .values(revoked_at=utcnow(), revoked_by=principal.actor)
    )


def _new_token(
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


def _token_public(row: Any, tid: int, now: datetime | None = None) -> dict[str, Any]:
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


def _invite_public(row: Any, now: datetime) -> dict[str, Any]:
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
