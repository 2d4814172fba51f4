"""The success bodies of the account operations (tokens, orgs, limits), as the OpenAPI document
shows them; the rest are in ``outputs.py`` (``catalog.output_model`` looks in both)."""

from __future__ import annotations

from cairn.service.catalog.outputs import Open


# -- tokens ----------------------------------------------------------------------------------------
class Token(Open):
    id: int
    prefix: str
    name: str
    user: str
    org: str | None = None
    tenant: str
    perm: str
    scope_patterns: list[str]
    created_at: str
    expires_at: str | None = None
    state: str  # active | expired | revoked


class NewToken(Token):
    token: str  # the secret: shown in this answer only, stored as a hash
    token_id: int


class TokenPage(Open):
    tokens: list[Token]
    next_cursor: str | None = None


class TokenRevoked(Open):
    token_id: int
    revoked: bool
    note: str | None = None


# -- orgs ------------------------------------------------------------------------------------------
class OrgCreated(Open):
    org: str
    tenant: str
    name: str
    role: str


class OrgEntry(Open):
    org: str
    name: str
    role: str


class Orgs(Open):
    orgs: list[OrgEntry]


class OrgRenamed(Open):
    org: str
    name: str
    was: str


class OrgDeleted(Open):
    org: str
    deleted: bool
    lessons_erased: int


class NewInvite(Open):
    org: str
    invite_id: int
    role: str
    code: str  # the secret: shown in this answer only, stored as a hash
    expires_at: str


class Invite(Open):
    id: int
    role: str
    created_by: str
    created_at: str
    expires_at: str
    state: str  # open | expired | revoked | accepted by USER


class Invites(Open):
    org: str
    invites: list[Invite]


class InviteRevoked(Open):
    org: str
    invite_id: int
    revoked: bool


class Joined(Open):
    org: str
    role: str


class Member(Open):
    user: str
    role: str
    since: str


class MemberPage(Open):
    org: str
    members: list[Member]
    next_cursor: str | None = None
    can_manage: bool = False  # the caller may change roles and remove members (below them) there


class RoleChanged(Open):
    org: str
    user: str
    role: str
    was: str


class MemberRemoved(Open):
    org: str
    user: str
    removed: bool


class Left(Open):
    org: str
    left: bool


class Bindings(Open):
    org: str
    bindings: list[str]


class Binding(Open):
    org: str
    pattern: str
    bound: bool


# -- limits ----------------------------------------------------------------------------------------
class LimitValues(Open):
    """``None``: no limit."""

    max_lessons: int | None = None
    max_value_bytes: int | None = None
    writes_per_minute: int | None = None


class Limits(Open):
    tenant: str
    limits: LimitValues
    sources: dict[str, str]  # per limit: "tenant" (an override) or where the setting came from
    lessons: int
