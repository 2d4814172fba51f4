"""Accounts, orgs and tokens; limits; row-level security on Postgres.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Why the model looks like this (roles per tenant, enforced in the database too; no SECURITY DEFINER
function trusts a caller-supplied id):

* A **tenant** is a store that lessons belong to: either one account's own (``kind = 'personal'``;
  its id is the account's name, and ``local`` is the account of whoever holds the database's own
  credentials) or an org's (``kind = 'org'``, id ``org:<slug>``). ``tenants`` gains ``kind`` and
  ``deleted_at``; an org is deleted by erasing its lessons and keeping the row, so its audit chain
  (which can never be deleted) still names a tenant.
* **users** are accounts; **memberships** give an account a role in a tenant: owner, admin,
  member or viewer (capabilities in ``core/roles.py``). Every tenant has at least one owner, the
  personal one's being its account: permissions are computed the same way for both kinds.
* **invites** are single-use codes; only the SHA-256 of a code is stored, like a token's.
* **scope_bindings** route writes on scopes matching a pattern to an org (for its members who may
  write). A pattern is bound to at most one org: two orgs cannot both claim ``repo::acme/*``.
* **tokens** are bearer credentials: a random secret shown once, stored as its SHA-256 (the
  secret has 256 bits of entropy, so a slow hash would add nothing but latency to every request),
  with a permission level, optional scope patterns (JSON), an expiry and a revocation time. A token
  acts for its account in its tenant; its effective permission is the lower of its own level and
  the account's current role there, so removing a member disarms their tokens at once.
* **tenant_limits** holds per-tenant overrides of the configured limits (lessons, value size,
  writes per minute); a missing row or NULL column means the configured default.

On Postgres this migration also turns on row-level security for every table (``store/rls.py``
holds the role, grants and policies, and ``Store.upgrade`` re-applies them after every upgrade).
Existing tenants become personal tenants whose account (of the same name) is their owner.
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.types import IdType, UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _tenant() -> sa.Column:
    return sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False)


def upgrade() -> None:
    # Plain ADD COLUMN on both databases (no SQLite table rebuild: other tables reference tenants).
    op.add_column("tenants", sa.Column("kind", sa.String(16), nullable=False, server_default="personal"))
    op.add_column("tenants", sa.Column("deleted_at", UTCDateTime))
    op.create_table(
        "users",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
    )
    op.create_table(
        "memberships",
        _tenant(),
        sa.Column("user_id", sa.String(64), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "user_id", name="pk_memberships"),
    )
    op.create_index("ix_memberships_user", "memberships", ["user_id"])
    op.create_table(
        "invites",
        sa.Column("id", IdType, sa.Identity(), primary_key=True, autoincrement=True),
        _tenant(),
        sa.Column("code_hash", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=False),
        sa.Column("accepted_at", UTCDateTime),
        sa.Column("accepted_by", sa.String(64)),
        sa.Column("revoked_at", UTCDateTime),
        sa.Column("revoked_by", sa.Text),
        sa.UniqueConstraint("code_hash", name="uq_invites_code"),
    )
    op.create_index("ix_invites_tenant", "invites", ["tenant_id"])
    op.create_table(
        "scope_bindings",
        sa.Column("id", IdType, sa.Identity(), primary_key=True, autoincrement=True),
        _tenant(),
        sa.Column("pattern", sa.String(300), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.UniqueConstraint("pattern", name="uq_bindings_pattern"),
    )
    op.create_index("ix_bindings_tenant", "scope_bindings", ["tenant_id"])
    op.create_table(
        "tokens",
        sa.Column("id", IdType, sa.Identity(), primary_key=True, autoincrement=True),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("user_id", sa.String(64), sa.ForeignKey("users.id"), nullable=False),
        _tenant(),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("perm", sa.String(8), nullable=False),
        sa.Column("scope_patterns", sa.Text, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("expires_at", UTCDateTime),
        sa.Column("revoked_at", UTCDateTime),
        sa.Column("revoked_by", sa.Text),
        sa.UniqueConstraint("token_hash", name="uq_tokens_hash"),
    )
    op.create_index("ix_tokens_user", "tokens", ["user_id"])
    op.create_index("ix_tokens_tenant", "tokens", ["tenant_id"])
    op.create_table(
        "tenant_limits",
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("max_lessons", sa.Integer),
        sa.Column("max_value_bytes", sa.Integer),
        sa.Column("writes_per_minute", sa.Integer),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("updated_by", sa.Text, nullable=False),
    )
    # Every existing tenant was a single-user store: it becomes that account's personal tenant.
    op.execute("INSERT INTO users (id, created_at, created_by) SELECT id, created_at, 'migration 0004' FROM tenants")
    op.execute(
        "INSERT INTO memberships (tenant_id, user_id, role, created_at, created_by) "
        "SELECT id, id, 'owner', created_at, 'migration 0004' FROM tenants"
    )
    # Row-level security itself is applied by Store.upgrade (store/rls.py) after every upgrade,
    # so a later migration's table is covered the moment it is listed there.


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        from cairn.store import rls

        rls.remove(bind)  # policies reference these tables
    for name in ("tenant_limits", "tokens", "scope_bindings", "invites", "memberships", "users"):
        op.drop_table(name)
    op.execute("ALTER TABLE tenants DROP COLUMN deleted_at")  # SQLite 3.35+ drops in place
    op.execute("ALTER TABLE tenants DROP COLUMN kind")
