"""Roles in a tenant and what each may do: the capability table, as pure functions.

owner  : everything, including deleting the org and managing other owners and admins
admin  : hard-delete (purge), invite, change roles and remove members below admin, bind scopes
member : write, archive, restore, forget, feedback (the ``write`` permission)
viewer : read

A token carries a permission level too (read < write < admin); what a request may do is the lower
of the token's level and the account's role *now*, so demoting or removing someone disarms their
tokens on the next request. The service asks these functions; the database's row-level security
only decides which rows a tenant can reach, not who in it may do what.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from cairn.core.principal import ADMIN, LEVELS, READ, WRITE
from cairn.errors import CairnError

Role = Literal["viewer", "member", "admin", "owner"]
ROLES: tuple[str, ...] = get_args(Role)
VIEWER, MEMBER, ADMIN_ROLE, OWNER = ROLES
ROLE_LEVEL = {VIEWER: READ, MEMBER: WRITE, ADMIN_ROLE: ADMIN, OWNER: ADMIN}

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,38}$")
ORG_PREFIX = "org:"


def check_role(role: str) -> str:
    r = (role or "").strip().lower()
    if r not in ROLES:
        raise CairnError("INVALID_INPUT", f"unknown role {role!r}; use one of: {', '.join(ROLES)}")
    return r


def check_level(level: str) -> str:
    p = (level or "").strip().lower()
    if p not in LEVELS:
        raise CairnError("INVALID_INPUT", f"unknown permission {level!r}; use one of: {', '.join(LEVELS)}")
    return p


def check_name(name: str, what: str) -> str:
    """Account names and org slugs: lowercase letters, digits, '.', '_', '-'; 1-39 characters."""
    n = (name or "").strip()
    if not NAME_RE.fullmatch(n):
        lowered = re.sub(r"[^a-z0-9._-]+", "-", n.lower()).strip("-._")[:39]
        hint = f"; try {lowered!r}" if lowered and NAME_RE.fullmatch(lowered) else ""
        raise CairnError(
            "INVALID_INPUT",
            f"{what} {name!r} is not valid: 1-39 lowercase letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit{hint}",
        )
    return n


def org_tenant(slug: str) -> str:
    return ORG_PREFIX + check_name(slug.removeprefix(ORG_PREFIX), "org")


def permissions_for(level: str) -> frozenset[str]:
    """A level and everything below it."""
    return frozenset(LEVELS[: LEVELS.index(level) + 1])


def effective(level: str, role: str) -> frozenset[str]:
    """What a credential of ``level`` may do for an account holding ``role``: the lower of the two."""
    role_level = ROLE_LEVEL[role]
    return permissions_for(min(level, role_level, key=LEVELS.index))


def require_role(role: str | None, at_least: str, what: str) -> None:
    if role is None:
        raise CairnError("FORBIDDEN", f"{what}: you are not a member of this org")
    if ROLES.index(role) < ROLES.index(at_least):
        raise CairnError("FORBIDDEN", f"{what} needs the {at_least} role or above; you are {role}")


def may_manage(role: str | None) -> bool:
    """Whether ``role`` manages members at all: admins those below them, owners everyone (``require_manage``)."""
    return role is not None and ROLES.index(role) >= ROLES.index(ADMIN_ROLE)


def require_manage(actor_role: str | None, target_role: str, new_role: str | None, what: str) -> None:
    """May someone with ``actor_role`` change a member holding ``target_role`` (to ``new_role``)?

    Admins manage viewers and members only, and cannot make anyone admin or owner; owners manage
    everyone. (The last owner is protected by the caller, which knows the count.)
    """
    require_role(actor_role, ADMIN_ROLE, what)
    if actor_role == OWNER:
        return
    if target_role in (ADMIN_ROLE, OWNER):
        raise CairnError("FORBIDDEN", f"{what}: an admin cannot act on an {target_role}; ask an owner")
    if new_role in (ADMIN_ROLE, OWNER):
        raise CairnError("FORBIDDEN", f"{what}: only an owner can make someone {new_role}")
