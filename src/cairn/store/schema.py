"""The schema as SQLAlchemy Core metadata: what queries are built from.

The migrations in ``cairn/store/migrations/versions`` are the history that creates these tables and
explain every choice; this module is the current shape. ``tests/store/test_schema.py`` checks that
the two agree, so a column added here without a migration fails the suite.

Every tenant-owned table carries ``tenant_id`` and every query in ``cairn.store`` and
``cairn.service`` filters on it: on SQLite that predicate *is* the tenancy boundary.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from cairn.store.types import IdType, UTCDateTime

metadata = MetaData()

tenants = Table(
    "tenants",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("kind", String(16), nullable=False, server_default="personal"),  # personal | org (0004)
    Column("deleted_at", UTCDateTime),
    # Bumped by every erasure in the tenant (forget, purge, conversation forget; migration 0009):
    # background work snapshots it when it reads and writes nothing if it moved.
    Column("deletion_epoch", Integer, nullable=False, server_default="0"),
)

# Accounts, roles, invites, bindings and tokens (migration 0004 says why they look like this).
users = Table(
    "users",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("created_by", Text, nullable=False),
)

memberships = Table(
    "memberships",
    metadata,
    Column("tenant_id", String(64), ForeignKey("tenants.id"), primary_key=True),
    Column("user_id", String(64), ForeignKey("users.id"), primary_key=True),
    Column("role", String(16), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("created_by", Text, nullable=False),
    Index("ix_memberships_user", "user_id"),
)

invites = Table(
    "invites",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("code_hash", String(64), nullable=False),
    Column("role", String(16), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("accepted_at", UTCDateTime),
    Column("accepted_by", String(64)),
    Column("revoked_at", UTCDateTime),
    Column("revoked_by", Text),
    UniqueConstraint("code_hash", name="uq_invites_code"),
    Index("ix_invites_tenant", "tenant_id"),
)

scope_bindings = Table(
    "scope_bindings",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("pattern", String(300), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("created_by", Text, nullable=False),
    UniqueConstraint("pattern", name="uq_bindings_pattern"),
    Index("ix_bindings_tenant", "tenant_id"),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("token_hash", String(64), nullable=False),
    Column("prefix", String(16), nullable=False),
    Column("user_id", String(64), ForeignKey("users.id"), nullable=False),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("perm", String(8), nullable=False),
    Column("scope_patterns", Text, nullable=False),  # JSON list; empty: every scope of the tenant
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime),
    Column("revoked_at", UTCDateTime),
    Column("revoked_by", Text),
    UniqueConstraint("token_hash", name="uq_tokens_hash"),
    Index("ix_tokens_user", "user_id"),
    Index("ix_tokens_tenant", "tenant_id"),
)

tenant_limits = Table(
    "tenant_limits",
    metadata,
    Column("tenant_id", String(64), ForeignKey("tenants.id"), primary_key=True),
    Column("max_lessons", Integer),
    Column("max_value_bytes", Integer),
    Column("writes_per_minute", Integer),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("updated_by", Text, nullable=False),
)

lessons = Table(
    "lessons",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("scope", String(300), nullable=False),
    Column("key", String(200), nullable=False),
    Column("value", Text, nullable=False),
    Column("tags", Text, nullable=False),  # JSON list, mirrored in lesson_tags for filtering
    Column("kind", String(16), nullable=False),
    Column("source_agent", Text),
    Column("trigger", Text),
    Column("origin", String(16), nullable=False),
    Column("author", Text),
    Column("url", Text),
    Column("trust", String(16), nullable=False),
    Column("seen_count", Integer, nullable=False),
    Column("helped_count", Integer, nullable=False),
    Column("not_helped_count", Integer, nullable=False),
    Column("valid_from", UTCDateTime),
    Column("valid_to", UTCDateTime),
    Column("expires_at", UTCDateTime),
    Column("archived_at", UTCDateTime),
    Column("superseded_by", IdType),
    Column("version", Integer, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("updated_by", Text, nullable=False),
    # JSON: what a non-restore import claimed (origin, author, trust, counters, times); shown as claims.
    Column("claimed", Text),
    # Sync (migration 0013): the uids of the versions no other version names as a parent (JSON list;
    # more than one: histories diverged), and since when a diverged lesson awaits review.
    Column("tips", Text),
    Column("conflicted_at", UTCDateTime),
    UniqueConstraint("tenant_id", "scope", "key", name="uq_lessons_address"),
    Index("ix_lessons_tenant_hash", "tenant_id", "content_hash"),
    Index("ix_lessons_tenant_key", "tenant_id", "key"),
    Index("ix_lessons_tenant_scope_updated", "tenant_id", "scope", "updated_at"),
    Index("ix_lessons_tenant_updated", "tenant_id", "updated_at", "id"),  # list's order (migration 0007)
    Index("ix_lessons_tenant_expires", "tenant_id", "expires_at"),
    Index("ix_lessons_tenant_archived", "tenant_id", "archived_at"),
    # Every column the scope map groups and counts by, so it never reads a row (migration 0010).
    Index("ix_lessons_tenant_scope_state", "tenant_id", "scope", "trust", "archived_at", "superseded_by", "expires_at"),
    Index("ix_lessons_tenant_conflicted", "tenant_id", "conflicted_at"),
)

lesson_versions = Table(
    "lesson_versions",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("lesson_id", IdType, nullable=False),
    Column("version", Integer, nullable=False),
    Column("action", String(24), nullable=False),
    Column("scope", String(300), nullable=False),
    Column("key", String(200), nullable=False),
    Column("value", Text, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("tags", Text, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("source_agent", Text),
    Column("trigger", Text),
    Column("trust", String(16), nullable=False),
    Column("archived", Boolean, nullable=False),
    Column("seen_count", Integer, nullable=False),
    Column("helped_count", Integer, nullable=False),
    Column("not_helped_count", Integer, nullable=False),
    Column("valid_from", UTCDateTime),
    Column("valid_to", UTCDateTime),
    Column("expires_at", UTCDateTime),
    Column("recorded_at", UTCDateTime, nullable=False),
    Column("actor", Text, nullable=False),
    Column("session", Text),
    # Sync (migration 0013): the version's global identity, the uids it was written on top of (JSON
    # list) and whether a person wrote it. Set by the one mutation path; nullable only in the DDL.
    Column("uid", String(32)),
    Column("parents", Text),
    Column("human", Boolean),
    UniqueConstraint("lesson_id", "version", name="uq_versions_lesson_version"),
    Index("ix_versions_tenant_lesson", "tenant_id", "lesson_id"),
    Index("ix_versions_tenant_uid", "tenant_id", "uid", unique=True),
)

lesson_tags = Table(
    "lesson_tags",
    metadata,
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("lesson_id", IdType, primary_key=True),
    Column("tag", String(64), primary_key=True),
    Index("ix_tags_tenant_tag", "tenant_id", "tag"),
)

sightings = Table(
    "sightings",
    metadata,
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("lesson_id", IdType, primary_key=True),
    Column("session", String(200), primary_key=True),
    Column("seen_at", UTCDateTime, nullable=False),
)

links = Table(
    "links",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("src_id", IdType, nullable=False),
    Column("dst_id", IdType, nullable=False),
    Column("rel", String(24), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("created_by", Text, nullable=False),
    UniqueConstraint("src_id", "dst_id", "rel", name="uq_links_edge"),
    Index("ix_links_tenant_src", "tenant_id", "src_id"),
    Index("ix_links_tenant_dst", "tenant_id", "dst_id"),
)

tombstones = Table(
    "tombstones",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("content_hash", String(64), nullable=False),
    # core.content.content_identity of the forgotten text (look-alikes folded); NULL when that text
    # was no longer held when it was computed: the tombstone then matches by content_hash alone.
    Column("identity", String(64)),
    Column("scope", String(300), nullable=False),
    Column("key", String(200), nullable=False),
    Column("reason", Text, nullable=False),
    Column("lesson_id", IdType),
    Column("created_at", UTCDateTime, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("lifted_at", UTCDateTime),
    Column("lifted_by", Text),
    Column("lift_reason", Text),
    Index("ix_tombstones_tenant_hash", "tenant_id", "content_hash"),
    Index("ix_tombstones_tenant_identity", "tenant_id", "identity"),
    Index("ix_tombstones_tenant_address", "tenant_id", "scope", "key"),
)

# The embedding of a live tombstone's forgotten text (migration 0012 says why a table of its own):
# a write close to one is held for review. Deleted with that text (purge) and by unforget.
tombstone_vectors = Table(
    "tombstone_vectors",
    metadata,
    Column("tombstone_id", IdType, primary_key=True, autoincrement=False),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("model", String(100), nullable=False),
    Column("dim", Integer, nullable=False),
    Column("vector", LargeBinary, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_tombstone_vectors_tenant_model", "tenant_id", "model"),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("actor", Text, nullable=False),
    Column("session", Text),
    Column("action", String(32), nullable=False),
    Column("lesson_id", IdType),
    Column("scope", String(300)),
    Column("key", String(200)),
    Column("version_before", Integer),
    Column("version_after", Integer),
    Column("hash_before", String(64)),
    Column("hash_after", String(64)),
    Column("detail", Text, nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("row_hash", String(64), nullable=False),
    # Hashes of the rows the mutation wrote (service/state_proof.py); NULL on rows before 0006.
    Column("state_hash", String(64)),
    Column("versions_hash", String(64)),
    UniqueConstraint("tenant_id", "seq", name="uq_audit_tenant_seq"),
    Index("ix_audit_tenant_lesson", "tenant_id", "lesson_id"),
    Index("ix_audit_tenant_at", "tenant_id", "at"),
)

lesson_embeddings = Table(
    "lesson_embeddings",
    metadata,
    Column("lesson_id", IdType, primary_key=True),
    Column("model", String(100), primary_key=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("dim", Integer, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("embedded_at", UTCDateTime, nullable=False),
    Column("vector", LargeBinary, nullable=False),
)

# The sign bits of each vector, narrow, for the in-memory ranking index (migration 0003 says why).
lesson_signatures = Table(
    "lesson_signatures",
    metadata,
    Column("lesson_id", IdType, primary_key=True),
    Column("model", String(100), primary_key=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("embedded_at", UTCDateTime, nullable=False),
    Column("bits", LargeBinary, nullable=False),
    Index("ix_signatures_tenant_embedded", "tenant_id", "embedded_at"),
)

embed_queue = Table(
    "embed_queue",
    metadata,
    Column("lesson_id", IdType, primary_key=True, autoincrement=False),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("queued_at", UTCDateTime, nullable=False),
    Index("ix_embed_queue_tenant", "tenant_id", "lesson_id"),
)

embed_state = Table(
    "embed_state",
    metadata,
    Column("tenant_id", String(64), ForeignKey("tenants.id"), primary_key=True),
    Column("model", String(100), nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("generation", Integer, nullable=False, server_default="0"),  # +1 per drain commit (0003)
)

# GitHub webhooks (migration 0008 says why each looks like this; docs/webhooks.md the flow).
webhooks = Table(
    "webhooks",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("repo", String(200), nullable=False),
    Column("secret", Text, nullable=False),  # as given: the HMAC needs it (never returned, never logged)
    Column("previous_secret", Text),
    Column("previous_until", UTCDateTime),
    Column("counts", Text, nullable=False, server_default="{}"),  # JSON: outcome/reason -> count
    Column("created_at", UTCDateTime, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("rotated_at", UTCDateTime),
    Column("last_delivery_at", UTCDateTime),
    UniqueConstraint("tenant_id", "repo", name="uq_webhooks_tenant_repo"),
    Index("ix_webhooks_repo", "repo"),
)

webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("webhook_id", IdType, primary_key=True),
    Column("delivery", String(64), primary_key=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("received_at", UTCDateTime, nullable=False),
    Column("outcome", String(32), nullable=False),
    Index("ix_webhook_deliveries_received", "webhook_id", "received_at"),
)

webhook_provenance = Table(
    "webhook_provenance",
    metadata,
    Column("lesson_id", IdType, primary_key=True, autoincrement=False),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("webhook_id", IdType, nullable=False),
    Column("delivery", String(64), nullable=False),
    Column("login", String(100), nullable=False),
    Column("association", String(40), nullable=False),
    Column("outside", Boolean, nullable=False),
    Column("url", Text),
    Column("pr", Integer),
    Column("path", Text),
    Column("line", Integer),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_webhook_provenance_tenant", "tenant_id", "lesson_id"),
)

# The memory gateway's conversation ledger (migration 0009 says why it looks like this).
conversations = Table(
    "conversations",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("thread", String(64), nullable=False),  # sha256 naming the conversation across requests
    Column("protocol", String(16), nullable=False),
    Column("model", Text),
    Column("repo", Text),
    Column("branch", Text),
    Column("project", Text),
    Column("revision", Integer, nullable=False),  # the source revision: every change to its text bumps it
    Column("turns", Integer, nullable=False),
    Column("positions", Integer, nullable=False),  # messages seen so far, kept or forgotten
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("created_by", Text, nullable=False),
    UniqueConstraint("tenant_id", "thread", name="uq_conversations_thread"),
    Index("ix_conversations_tenant_updated", "tenant_id", "updated_at"),
)

conversation_turns = Table(
    "conversation_turns",
    metadata,
    Column("tenant_id", String(64), ForeignKey("tenants.id"), primary_key=True),
    Column("conversation_id", IdType, primary_key=True),
    Column("turn", Integer, primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("extracted_at", UTCDateTime),
)

conversation_messages = Table(
    "conversation_messages",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("conversation_id", IdType, nullable=False),
    Column("turn", Integer, nullable=False),
    Column("position", Integer, nullable=False),
    Column("role", String(16), nullable=False),
    Column("content", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_conversation_messages_turn", "tenant_id", "conversation_id", "turn"),
)

conversation_tombstones = Table(
    "conversation_tombstones",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("kind", String(16), nullable=False),  # conversation | turn | message | content
    Column("thread", String(64)),
    Column("turn", Integer),
    Column("position", Integer),
    Column("identity", String(64)),  # core.content.content_identity of a forgotten sentence or message
    Column("created_at", UTCDateTime, nullable=False),
    Column("created_by", Text, nullable=False),
    Index("ix_conversation_tombstones_thread", "tenant_id", "thread"),
    Index("ix_conversation_tombstones_identity", "tenant_id", "identity"),
)

conversation_lessons = Table(
    "conversation_lessons",
    metadata,
    Column("tenant_id", String(64), ForeignKey("tenants.id"), primary_key=True),
    Column("lesson_id", IdType, primary_key=True),
    Column("conversation_id", IdType, primary_key=True),
    Column("turn", Integer, primary_key=True),
    Index("ix_conversation_lessons_turn", "tenant_id", "conversation_id", "turn"),
)

# The consolidation ledger (migration 0011 says why it looks like this).
consolidation_runs = Table(
    "consolidation_runs",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    Column("parameters", Text, nullable=False),  # JSON: scopes, stale_days
    Column("mode", String(8), nullable=False),  # plan | apply (core/consolidation.RUN_MODES)
    Column("status", String(16), nullable=False),  # core/consolidation.RUN_STATUSES
    Column("deletion_epoch", Integer, nullable=False),  # the tenant's epoch when the run started
    Column("actor", Text, nullable=False),
    Index("ix_consolidation_runs_tenant", "tenant_id", "id"),
)

consolidation_actions = Table(
    "consolidation_actions",
    metadata,
    Column("id", IdType, Identity(), primary_key=True, autoincrement=True),
    Column("tenant_id", String(64), ForeignKey("tenants.id"), nullable=False),
    Column("run_id", IdType, nullable=False),
    Column("position", Integer, nullable=False),
    Column("kind", String(24), nullable=False),  # core/consolidation.ACTION_KINDS
    Column("lesson_ids", Text, nullable=False),  # JSON list, the keeper / best source first
    Column("versions_read", Text, nullable=False),  # JSON {lesson id: version}: the source-revision guard
    Column("versions_written", Text),  # JSON {lesson id: version}
    Column("effects", Text),  # JSON: what else it wrote (created lesson, links, sightings), for undo
    Column("keep_id", IdType),
    Column("target_scope", String(300)),
    Column("reason", Text, nullable=False),
    Column("status", String(16), nullable=False),  # core/consolidation.ACTION_STATUSES
    Column("status_reason", Text),
    Column("recomputed", Boolean, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("run_id", "position", name="uq_consolidation_actions_position"),
    Index("ix_consolidation_actions_run", "tenant_id", "run_id", "position"),
)

# Sync between stores (migration 0013 says why each looks like this; docs/sync.md the model).
sync_stores = Table(
    "sync_stores",
    metadata,
    Column("tenant_id", String(64), ForeignKey("tenants.id"), primary_key=True),
    Column("store_id", String(32), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

sync_peers = Table(
    "sync_peers",
    metadata,
    Column("tenant_id", String(64), ForeignKey("tenants.id"), primary_key=True),
    Column("peer_store_id", String(32), primary_key=True),
    Column("pulled_cursor", Integer, nullable=False, server_default="0"),  # their events applied here, up to
    Column("pushed_cursor", Integer, nullable=False, server_default="0"),  # our events they accepted, up to
    Column("peer_head_seq", Integer),
    Column("peer_head_hash", String(64)),
    Column("last_pulled_at", UTCDateTime),
    Column("last_pushed_at", UTCDateTime),
    Column("created_at", UTCDateTime, nullable=False),
)

sync_events = Table(
    "sync_events",
    metadata,
    Column("tenant_id", String(64), ForeignKey("tenants.id"), primary_key=True),
    Column("uid", String(80), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("origin_store", String(32), nullable=False),
    Column("peer_store", String(32), nullable=False),
    Column("outcome", String(16), nullable=False),  # applied | conflict | skipped | refused
    Column("seq", Integer),  # the local audit row the event produced, if any
    Column("applied_at", UTCDateTime, nullable=False),
)
