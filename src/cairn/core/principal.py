"""Who is calling: every service call takes a Principal and trusts nothing else.

A surface resolves the principal (the CLI from the local user, later the API from a hashed token)
and the service checks it; no operation accepts a caller-supplied tenant or user id (a store that trusts one lets any
caller read another tenant by naming it). Scope patterns limit a principal to part of its tenant's store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from cairn.core.scope import scope_matches
from cairn.errors import CairnError

Level = Literal["read", "write", "admin"]  # cumulative: a write token may read, an admin token may write
LEVELS: tuple[str, ...] = get_args(Level)
READ, WRITE, ADMIN = LEVELS
# How a token's secret is spelled: Cairn's own prefix, or LoreKit's (its CLI reads the level from it).
TokenStyle = Literal["cairn", "lorekit"]
TOKEN_STYLES: tuple[str, ...] = get_args(TokenStyle)
LOCAL_TENANT = "local"
LOCAL_USER = "local"  # the account of whoever runs Cairn with the database's own credentials
MAX_TENANT_CHARS = 64
MAX_SESSION_CHARS = 200


@dataclass(frozen=True)
class Principal:
    tenant_id: str
    actor: str
    session: str | None = None
    permissions: frozenset[str] = field(default_factory=lambda: frozenset({READ, WRITE, ADMIN}))
    scope_patterns: tuple[str, ...] = ()  # empty: every scope of the tenant
    human: bool = False  # a person is acting (dashboard, --by-human): writes start verified
    user_id: str | None = None  # the account (users.id); None only for principals built in tests
    token_id: int | None = None  # the token the request presented; None: database credentials

    def __post_init__(self) -> None:
        # The store keeps a tenant id in 64 characters and a session id in 200 (sightings count
        # distinct sessions). Postgres enforces column lengths and SQLite does not, so the limits
        # are checked here, once, with the same answer on both databases.
        if not self.tenant_id or len(self.tenant_id) > MAX_TENANT_CHARS:
            raise CairnError("INVALID_INPUT", f"a tenant id is 1-{MAX_TENANT_CHARS} characters")
        if self.session is not None and len(self.session) > MAX_SESSION_CHARS:
            raise CairnError(
                "INVALID_INPUT", f"session id is {len(self.session)} characters; the limit is {MAX_SESSION_CHARS}"
            )
        for name, value in (("tenant id", self.tenant_id), ("actor", self.actor), ("session id", self.session)):
            if value is not None and "\x00" in value:
                raise CairnError("INVALID_INPUT", f"{name} contains a NUL character")

    def with_tenant(self, tenant_id: str, permissions: frozenset[str]) -> Principal:
        """The same caller acting in another tenant (an org), with that tenant's permissions."""
        from dataclasses import replace

        return replace(self, tenant_id=tenant_id, permissions=permissions)

    def can_see(self, scope: str) -> bool:
        return not self.scope_patterns or any(scope_matches(scope, p) for p in self.scope_patterns)

    @property
    def scope_limited(self) -> bool:
        return bool(self.scope_patterns)

    def require(self, permission: str, scope: str | None = None) -> None:
        if permission not in self.permissions:
            raise CairnError("FORBIDDEN", f"this principal lacks the {permission!r} permission")
        if scope is not None and not self.can_see(scope):
            raise CairnError("FORBIDDEN", f"scope {scope!r} is outside this principal's scopes")

    @property
    def db_vars(self) -> dict[str, str | None]:
        """What a transaction tells the database about its caller (row-level security reads it)."""
        return {"tenant": self.tenant_id, "user": self.user_id, "actor": self.actor}

    @property
    def level(self) -> str:
        """The highest permission held: read < write < admin."""
        return max(self.permissions, key=LEVELS.index, default=READ)

    def require_account_wide(self, what: str) -> None:
        """Purge and export-of-everything act on the whole tenant: refused to scope-limited callers."""
        self.require(ADMIN)
        if self.scope_limited:
            raise CairnError("FORBIDDEN", f"{what} acts on the whole store; a scope-limited token may not")
