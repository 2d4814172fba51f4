"""The lesson store: lessons, their versions, tombstones, links and the hash-chained audit log.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Why the model looks like this (DESIGN.md §1-2; seeds 000 and 004 for the failures it avoids):

* ``lessons`` is the *current state* of each address ``(tenant_id, scope, key)``. It is a projection
  that the service rewrites on every mutation; it is never the history. The address is unique and
  is **not** freed by archive (LoreKit's partial unique index let an archived lesson be silently
  re-created at its own address; here archive keeps the row and its address).
* ``lesson_versions`` is the history: one immutable row per mutation, a full snapshot of the
  lesson's state. Record time is ``recorded_at`` of a version until the next version's
  ``recorded_at`` (derived, so no row is ever updated to close an interval); valid time is
  ``valid_from``/``valid_to``. A trigger refuses UPDATE. Only purge deletes versions, because purge
  is hard erasure.
* ``tombstones`` remember rejections by normalized content hash *and* address. They hold no content,
  so a purge leaves them intact and a forgotten lesson stays forgotten. Lifting one fills
  ``lifted_*``; that is the one audited path back.
* ``audit_log`` is append-only in the database (triggers refuse UPDATE and DELETE) and hash-chained
  per tenant: ``row_hash = sha256(prev_hash + canonical row)``. ``seq`` is gap-free per tenant and
  unique, so a deleted or reordered row breaks the chain and two writers racing for the next link
  collide on the constraint instead of forking the chain. The audit stores content *hashes*, never
  content: purge can erase a lesson while the chain still verifies.
* ``lesson_tags`` mirrors the JSON tag list so tag filters are an indexed join on both databases
  rather than dialect-specific JSON operators.
* ``sightings`` records which sessions saw a lesson recur: promotion from candidate to verified
  counts *distinct sessions* (the entrenchment guard is a query, not advice).
* Every tenant-owned table has ``tenant_id``: on SQLite the one query layer filters on it; on
  Postgres row-level security will (issue 5).
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.dialect import drop_guard_triggers, guard_triggers
from cairn.store.types import IdType, UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _tenant() -> sa.Column:
    return sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_table(
        "lessons",
        sa.Column("id", IdType, primary_key=True, autoincrement=True),
        _tenant(),
        sa.Column("scope", sa.String(300), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("tags", sa.Text, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("source_agent", sa.Text),
        sa.Column("trigger", sa.Text),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("author", sa.Text),
        sa.Column("url", sa.Text),
        sa.Column("trust", sa.String(16), nullable=False),
        sa.Column("seen_count", sa.Integer, nullable=False),
        sa.Column("helped_count", sa.Integer, nullable=False),
        sa.Column("not_helped_count", sa.Integer, nullable=False),
        sa.Column("valid_from", UTCDateTime),
        sa.Column("valid_to", UTCDateTime),
        sa.Column("expires_at", UTCDateTime),
        sa.Column("archived_at", UTCDateTime),
        sa.Column("superseded_by", IdType),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("updated_by", sa.Text, nullable=False),
        sa.UniqueConstraint("tenant_id", "scope", "key", name="uq_lessons_address"),
    )
    # The recurrence check and the supersede identity search look up by hash and by key; the
    # sweeps scan by expiry and by archive time. Each gets its own narrow index.
    op.create_index("ix_lessons_tenant_hash", "lessons", ["tenant_id", "content_hash"])
    op.create_index("ix_lessons_tenant_key", "lessons", ["tenant_id", "key"])
    op.create_index("ix_lessons_tenant_scope_updated", "lessons", ["tenant_id", "scope", "updated_at"])
    op.create_index("ix_lessons_tenant_expires", "lessons", ["tenant_id", "expires_at"])
    op.create_index("ix_lessons_tenant_archived", "lessons", ["tenant_id", "archived_at"])

    op.create_table(
        "lesson_versions",
        sa.Column("id", IdType, primary_key=True, autoincrement=True),
        _tenant(),
        sa.Column("lesson_id", IdType, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("action", sa.String(24), nullable=False),
        sa.Column("scope", sa.String(300), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("tags", sa.Text, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("source_agent", sa.Text),
        sa.Column("trigger", sa.Text),
        sa.Column("trust", sa.String(16), nullable=False),
        sa.Column("archived", sa.Boolean, nullable=False),
        sa.Column("seen_count", sa.Integer, nullable=False),
        sa.Column("helped_count", sa.Integer, nullable=False),
        sa.Column("not_helped_count", sa.Integer, nullable=False),
        sa.Column("valid_from", UTCDateTime),
        sa.Column("valid_to", UTCDateTime),
        sa.Column("expires_at", UTCDateTime),
        sa.Column("recorded_at", UTCDateTime, nullable=False),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("session", sa.Text),
        sa.UniqueConstraint("lesson_id", "version", name="uq_versions_lesson_version"),
    )
    op.create_index("ix_versions_tenant_lesson", "lesson_versions", ["tenant_id", "lesson_id"])

    op.create_table(
        "lesson_tags",
        _tenant(),
        sa.Column("lesson_id", IdType, primary_key=True),
        sa.Column("tag", sa.String(64), primary_key=True),
    )
    op.create_index("ix_tags_tenant_tag", "lesson_tags", ["tenant_id", "tag"])

    op.create_table(
        "sightings",
        _tenant(),
        sa.Column("lesson_id", IdType, primary_key=True),
        sa.Column("session", sa.String(200), primary_key=True),
        sa.Column("seen_at", UTCDateTime, nullable=False),
    )

    op.create_table(
        "links",
        sa.Column("id", IdType, primary_key=True, autoincrement=True),
        _tenant(),
        sa.Column("src_id", IdType, nullable=False),
        sa.Column("dst_id", IdType, nullable=False),
        sa.Column("rel", sa.String(24), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.UniqueConstraint("src_id", "dst_id", "rel", name="uq_links_edge"),
    )
    op.create_index("ix_links_tenant_src", "links", ["tenant_id", "src_id"])
    op.create_index("ix_links_tenant_dst", "links", ["tenant_id", "dst_id"])

    op.create_table(
        "tombstones",
        sa.Column("id", IdType, primary_key=True, autoincrement=True),
        _tenant(),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(300), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("lesson_id", IdType),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("lifted_at", UTCDateTime),
        sa.Column("lifted_by", sa.Text),
        sa.Column("lift_reason", sa.Text),
    )
    # Checked inside every write transaction: one probe by hash, one by address.
    op.create_index("ix_tombstones_tenant_hash", "tombstones", ["tenant_id", "content_hash"])
    op.create_index("ix_tombstones_tenant_address", "tombstones", ["tenant_id", "scope", "key"])

    op.create_table(
        "audit_log",
        sa.Column("id", IdType, primary_key=True, autoincrement=True),
        _tenant(),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("at", UTCDateTime, nullable=False),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("session", sa.Text),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("lesson_id", IdType),
        sa.Column("scope", sa.String(300)),
        sa.Column("key", sa.String(200)),
        sa.Column("version_before", sa.Integer),
        sa.Column("version_after", sa.Integer),
        sa.Column("hash_before", sa.String(64)),
        sa.Column("hash_after", sa.String(64)),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("row_hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("tenant_id", "seq", name="uq_audit_tenant_seq"),
    )
    op.create_index("ix_audit_tenant_lesson", "audit_log", ["tenant_id", "lesson_id"])
    op.create_index("ix_audit_tenant_at", "audit_log", ["tenant_id", "at"])

    dialect = op.get_bind().dialect.name
    for stmt in guard_triggers(dialect):
        op.execute(stmt)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for stmt in drop_guard_triggers(dialect):
        op.execute(stmt)
    for table in (
        "audit_log",
        "tombstones",
        "links",
        "sightings",
        "lesson_tags",
        "lesson_versions",
        "lessons",
        "tenants",
    ):
        op.drop_table(table)
