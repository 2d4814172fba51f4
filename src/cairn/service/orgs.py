"""Orgs: creating, renaming and deleting them, invites, members and roles, scope bindings.

Org changes are written to the org's own audit chain, like lesson changes. Capabilities are in
``core/roles.py``; they are applied inside the transaction that makes the change, so a role read
and a change made on it cannot be split by a concurrent demotion (the write runs under the
tenant's write lock).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from cairn.core import roles
from cairn.core.principal import ADMIN, Principal
from cairn.core.timeparse import format_time, parse_ttl, utcnow
from cairn.errors import CairnError
from cairn.service import audit, rank_cache
from cairn.service.accounts import (
    DEFAULT_INVITE_TTL,
    INVITE_PREFIX,
    account_level,
    check_page_limit,
    check_patterns,
    drop_member,
    expiry,
    in_tenant,
    invite_public,
    is_deleted,
    owner_count,
    role_of,
    secret_hash,
)
from cairn.service.records import paged
from cairn.service.tx import read_tx, write_tx
from cairn.store.engine import Store
from cairn.store.schema import (
    invites,
    lessons,
    memberships,
    scope_bindings,
    tenants,
    tokens,
    webhook_deliveries,
    webhooks,
)

OrgTx = Callable[[Connection, str, str | None], dict[str, Any]]


@dataclass(eq=False, repr=False)
class Orgs:
    """Orgs and their members, invites and bindings; each change is checked against the caller's role there."""

    store: Store

    def org_create(self, principal: Principal, slug: str, name: str | None = None) -> dict[str, Any]:
        account_level(principal, "creating an org")
        tenant = roles.org_tenant(slug)
        now = utcnow()

        def tx(conn: Connection, acting: Principal) -> dict[str, Any]:
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
            audit.record(
                conn, in_tenant(principal, tenant), "org.create", detail={"org": slug, "name": name or slug}, at=now
            )
            return {"org": slug, "tenant": tenant, "name": name or slug, "role": roles.OWNER}

        return write_tx(self.store, in_tenant(principal, tenant), tx)

    def org_list(self, principal: Principal) -> dict[str, Any]:
        account_level(principal, "listing orgs", level=None)

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
            audit.record(conn, in_tenant(principal, tenant), "org.rename", detail={"from": old, "to": name})
            return {"org": slug, "name": name, "was": old}

        return self.in_org(principal, slug, "renaming the org", tx)

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
            org_p = in_tenant(principal, tenant)
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

        result = self.in_org(principal, slug, "deleting the org", tx)
        if result["lessons_erased"]:  # no kept ranking index outlives an erased lesson
            rank_cache.discard(self.store.url)
        return result

    # -- invites ------------------------------------------------------------------------------
    def org_invite(
        self, principal: Principal, slug: str, role: str = roles.MEMBER, expires: str | None = None
    ) -> dict[str, Any]:
        role = roles.check_role(role)
        code = INVITE_PREFIX + secrets.token_urlsafe(24)
        until = expiry(expires, DEFAULT_INVITE_TTL) or utcnow() + parse_ttl("365d")

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
            audit.record(conn, in_tenant(principal, tenant), "org.invite", detail={"invite": iid, "role": role}, at=now)
            return {"org": slug, "invite_id": iid, "role": role, "code": code, "expires_at": format_time(until)}

        return self.in_org(principal, slug, "inviting", tx)

    def org_invites(self, principal: Principal, slug: str) -> dict[str, Any]:
        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.ADMIN_ROLE, "listing invites")
            rows = conn.execute(select(invites).where(invites.c.tenant_id == tenant).order_by(invites.c.id)).mappings()
            now = utcnow()
            return {"org": slug, "invites": [invite_public(r, now) for r in rows]}

        return self.in_org(principal, slug, "listing invites", tx, write=False)

    def org_accept(self, principal: Principal, code: str) -> dict[str, Any]:
        """Join the org an invite code was made for (single use; the code is compared by hash)."""
        account_level(principal, "accepting an invite")
        digest = secret_hash((code or "").strip())

        def find(conn: Connection) -> dict[str, Any]:
            row = conn.execute(select(invites).where(invites.c.code_hash == digest)).mappings().first()
            if row is None:
                raise CairnError("NOT_FOUND", "no such invite code")
            return dict(row)

        invite = self.store.run(find, write=False, invite=digest, user=principal.user_id)

        def tx(conn: Connection, acting: Principal) -> dict[str, Any]:
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
            if is_deleted(conn, row["tenant_id"]):
                raise CairnError("NOT_FOUND", "the org of this invite was deleted")
            if role_of(conn, row["tenant_id"], principal.user_id) is not None:
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
                in_tenant(principal, row["tenant_id"]),
                "org.join",
                detail={"invite": row["id"], "role": row["role"]},
                at=now,
            )
            return {"org": row["tenant_id"].removeprefix(roles.ORG_PREFIX), "role": row["role"]}

        return write_tx(self.store, in_tenant(principal, invite["tenant_id"]), tx, invite=digest)

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
            audit.record(conn, in_tenant(principal, tenant), "org.uninvite", detail={"invite": invite_id})
            return {"org": slug, "invite_id": invite_id, "revoked": True}

        return self.in_org(principal, slug, "revoking an invite", tx)

    # -- members ------------------------------------------------------------------------------
    def org_members(
        self, principal: Principal, slug: str, *, limit: int = 1000, cursor: str | None = None
    ) -> dict[str, Any]:
        """The org's members by name, a page at a time (``next_cursor`` continues).

        ``can_manage`` says whether the caller may change roles and remove members there (each change
        is still checked against the member's role), so a surface offers those actions without
        deciding who may take them."""
        check_page_limit(limit)

        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.VIEWER, "listing members")
            q = select(memberships.c.user_id, memberships.c.role, memberships.c.created_at).where(
                memberships.c.tenant_id == tenant
            )
            order = ((memberships.c.user_id, False),)
            rows, after = paged(conn, principal, q, order, limit, kind="members", cursor=cursor, scoped=False)
            members = [{"user": r["user_id"], "role": r["role"], "since": format_time(r["created_at"])} for r in rows]
            return {"org": slug, "members": members, "next_cursor": after, "can_manage": roles.may_manage(role)}

        return self.in_org(principal, slug, "listing members", tx, write=False)

    def member_role(self, principal: Principal, slug: str, user: str, role: str) -> dict[str, Any]:
        role = roles.check_role(role)

        def tx(conn: Connection, tenant: str, my_role: str | None) -> dict[str, Any]:
            target = role_of(conn, tenant, user)
            if target is None:
                raise CairnError("NOT_FOUND", f"{user!r} is not a member of org {slug!r}")
            roles.require_manage(my_role, target, role, "changing a role")
            if target == roles.OWNER and role != roles.OWNER and owner_count(conn, tenant) <= 1:
                raise CairnError("FORBIDDEN", "the last owner cannot be demoted; make someone else owner first")
            conn.execute(
                update(memberships)
                .where(memberships.c.tenant_id == tenant, memberships.c.user_id == user)
                .values(role=role)
            )
            audit.record(
                conn, in_tenant(principal, tenant), "member.role", detail={"user": user, "from": target, "to": role}
            )
            return {"org": slug, "user": user, "role": role, "was": target}

        return self.in_org(principal, slug, "changing a role", tx)

    def member_remove(self, principal: Principal, slug: str, user: str) -> dict[str, Any]:
        def tx(conn: Connection, tenant: str, my_role: str | None) -> dict[str, Any]:
            target = role_of(conn, tenant, user)
            if target is None:
                raise CairnError("NOT_FOUND", f"{user!r} is not a member of org {slug!r}")
            if user == principal.user_id:
                raise CairnError("INVALID_INPUT", f"to leave an org use: cairn org leave {slug}")
            roles.require_manage(my_role, target, None, "removing a member")
            if target == roles.OWNER and owner_count(conn, tenant) <= 1:
                raise CairnError("FORBIDDEN", "the last owner cannot be removed")
            drop_member(conn, principal, tenant, user)
            audit.record(conn, in_tenant(principal, tenant), "member.remove", detail={"user": user, "role": target})
            return {"org": slug, "user": user, "removed": True}

        return self.in_org(principal, slug, "removing a member", tx)

    def org_leave(self, principal: Principal, slug: str) -> dict[str, Any]:
        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.VIEWER, "leaving")
            if role == roles.OWNER and owner_count(conn, tenant) <= 1:
                raise CairnError(
                    "FORBIDDEN", "the last owner cannot leave; make someone else owner first, or delete the org"
                )
            drop_member(conn, principal, tenant, principal.user_id or "")
            audit.record(
                conn, in_tenant(principal, tenant), "member.leave", detail={"user": principal.user_id, "role": role}
            )
            return {"org": slug, "left": True}

        return self.in_org(principal, slug, "leaving", tx, level=None)

    # -- bindings -----------------------------------------------------------------------------
    def org_bind(self, principal: Principal, slug: str, pattern: str) -> dict[str, Any]:
        (pat,) = check_patterns([pattern]) or [""]
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
            audit.record(conn, in_tenant(principal, tenant), "org.bind", detail={"pattern": pat})
            return {"org": slug, "pattern": pat, "bound": True}

        return self.in_org(principal, slug, "binding a scope", tx)

    def org_unbind(self, principal: Principal, slug: str, pattern: str) -> dict[str, Any]:
        (pat,) = check_patterns([pattern]) or [""]

        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.ADMIN_ROLE, "unbinding a scope")
            n = conn.execute(
                delete(scope_bindings).where(scope_bindings.c.tenant_id == tenant, scope_bindings.c.pattern == pat)
            ).rowcount
            if not n:
                raise CairnError("NOT_FOUND", f"{pat} is not bound to org {slug!r}")
            audit.record(conn, in_tenant(principal, tenant), "org.unbind", detail={"pattern": pat})
            return {"org": slug, "pattern": pat, "bound": False}

        return self.in_org(principal, slug, "unbinding a scope", tx)

    def org_bindings(self, principal: Principal, slug: str) -> dict[str, Any]:
        def tx(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
            roles.require_role(role, roles.VIEWER, "listing bindings")
            rows = conn.execute(
                select(scope_bindings.c.pattern)
                .where(scope_bindings.c.tenant_id == tenant)
                .order_by(scope_bindings.c.pattern)
            ).scalars()
            return {"org": slug, "bindings": list(rows)}

        return self.in_org(principal, slug, "listing bindings", tx, write=False)

    def in_org(
        self, principal: Principal, slug: str, what: str, fn: OrgTx, *, write: bool = True, level: str | None = ADMIN
    ) -> dict[str, Any]:
        """Run ``fn(conn, tenant, my_role)`` in the org's tenant; a non-member learns nothing about it."""
        tenant = roles.org_tenant(slug)
        account_level(principal, what, level=level if write else None, tenant=tenant)

        def tx(conn: Connection) -> dict[str, Any]:
            role = role_of(conn, tenant, principal.user_id or "")
            if role is None or is_deleted(conn, tenant):
                raise CairnError("NOT_FOUND", f"no org {slug!r} that you belong to")
            return fn(conn, tenant, role)

        acting = in_tenant(principal, tenant)
        if write:
            return write_tx(self.store, acting, lambda conn, _acting: tx(conn))
        return read_tx(self.store, acting, tx)
