"""The memory gateway's conversation ledger, its tombstones, and the tenant's deletion epoch.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

Why a ledger at all: extraction (lessons proposed from a turn) and forgetting (a conversation, a turn
or one message) need something to refer to. The provider's API is stateless, so the gateway names a
conversation by ``thread`` (a hash of the client's ``X-Cairn-Conversation`` header, else of the
conversation's opening), counts its ``turns`` and message ``positions``, and keeps each message's
text in ``conversation_messages`` — the only copy, so forgetting deletes rows rather than
overwriting columns.

Why tombstones of their own (``conversation_tombstones``), not ``tombstones``: a lesson tombstone is
an address and a content hash that refuse a *write*; these refuse a *recording*: a forgotten thread,
turn or position (a replayed request) and the identity of each forgotten sentence (the same words in
a new conversation). They are keyed on the thread hash and on content, never on a row id that a
re-created row would not share (tombstones keyed on rows let a re-created row come back).

Why ``revision`` on a conversation: extraction reads a turn, asks the model, then writes; the write
transaction re-reads the revision and discards what it computed from text that changed meanwhile.

Why ``tenants.deletion_epoch``: a request that was still streaming, or any background job, when its
tenant's memory was erased must write nothing. Every erasure bumps the counter (lesson forget,
purge, conversation forget); a job snapshots it when it starts and its write transaction compares.

``conversation_lessons`` links a candidate to the turns it was extracted from, so a forget can tell
which candidates derive *only* from what is forgotten. Row-level security: every new table is a
tenant data table (``store/rls.py``, applied after every upgrade).
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.types import IdType, UTCDateTime

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tenants", sa.Column("deletion_epoch", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "conversations",
        sa.Column("id", IdType, sa.Identity(), primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("thread", sa.String(64), nullable=False),
        sa.Column("protocol", sa.String(16), nullable=False),
        sa.Column("model", sa.Text()),
        sa.Column("repo", sa.Text()),
        sa.Column("branch", sa.Text()),
        sa.Column("project", sa.Text()),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("positions", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.UniqueConstraint("tenant_id", "thread", name="uq_conversations_thread"),
    )
    op.create_index("ix_conversations_tenant_updated", "conversations", ["tenant_id", "updated_at"])
    op.create_table(
        "conversation_turns",
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("conversation_id", IdType, primary_key=True),
        sa.Column("turn", sa.Integer(), primary_key=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("extracted_at", UTCDateTime),
    )
    op.create_table(
        "conversation_messages",
        sa.Column("id", IdType, sa.Identity(), primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("conversation_id", IdType, nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_conversation_messages_turn", "conversation_messages", ["tenant_id", "conversation_id", "turn"])
    op.create_table(
        "conversation_tombstones",
        sa.Column("id", IdType, sa.Identity(), primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("thread", sa.String(64)),
        sa.Column("turn", sa.Integer()),
        sa.Column("position", sa.Integer()),
        sa.Column("identity", sa.String(64)),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
    )
    op.create_index("ix_conversation_tombstones_thread", "conversation_tombstones", ["tenant_id", "thread"])
    op.create_index("ix_conversation_tombstones_identity", "conversation_tombstones", ["tenant_id", "identity"])
    op.create_table(
        "conversation_lessons",
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("lesson_id", IdType, primary_key=True),
        sa.Column("conversation_id", IdType, primary_key=True),
        sa.Column("turn", sa.Integer(), primary_key=True),
    )
    op.create_index("ix_conversation_lessons_turn", "conversation_lessons", ["tenant_id", "conversation_id", "turn"])


def downgrade() -> None:
    for table in (
        "conversation_lessons",
        "conversation_tombstones",
        "conversation_messages",
        "conversation_turns",
        "conversations",
    ):
        op.drop_table(table)
    op.execute("ALTER TABLE tenants DROP COLUMN deletion_epoch")  # SQLite 3.35+ drops in place
