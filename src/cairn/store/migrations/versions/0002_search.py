"""Search indexes: full text (FTS5), the embedding ledger and the embedding queue.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Why:

* ``lesson_fts`` is an FTS5 table over key, value and tags, rowid = lesson id, tokenized with
  ``porter unicode61`` so "caching" finds "cache". It holds **active lessons only**: the mutation
  path (``service/mutate.apply`` → ``service/indexing``) deletes a lesson's row in the same
  transaction that archives, rejects, supersedes or purges it. Expired lessons leave it at the
  expiry sweep; until then every query joins ``lessons`` with the active predicate, so they are
  never returned. Ranking is BM25 (``bm25()``), never position or date.
* ``lesson_embeddings`` holds, per lesson, the float32 vector with its model name, dimension and
  the content hash it was made from. The KNN index is a sqlite-vec ``vec0`` table *per model and
  dimension* (``vec_<model>_<dim>``, created on first use because its name depends on the model), so
  vectors of two models can never meet in one query, and a model change re-embeds into a new table.
  The index stores the vectors binary-quantized (1 bit per dimension, Hamming distance): the
  sqlite-vec wheel is built without SIMD, and a float scan of 100,000 × 384 took ~130-180 ms here
  against ~55 ms for the binary scan. The search takes a generous binary top set and re-ranks it by
  exact cosine on the float vectors from ``lesson_embeddings``; ``make eval`` measures the effect.
* ``embed_queue`` lists lessons whose vector is missing or stale. A write only enqueues (a
  microsecond insert in its transaction) and the next search drains the queue with the warm model
  before its vector arm runs: a CLI write does not pay the model load (~0.3 s), and a lesson is
  findable by meaning no later than the next search. ``cairn serve`` drains it in the background.
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.types import IdType, UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lesson_embeddings",
        sa.Column("lesson_id", IdType, primary_key=True),
        sa.Column("model", sa.String(100), primary_key=True),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("embedded_at", UTCDateTime, nullable=False),
        sa.Column("vector", sa.LargeBinary, nullable=False),  # float32, little-endian, L2-normalized
    )
    op.create_table(
        "embed_queue",
        sa.Column("lesson_id", IdType, primary_key=True),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("queued_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_embed_queue_tenant", "embed_queue", ["tenant_id", "lesson_id"])
    # Which model a tenant's vectors were last made with: when the configured model differs, the
    # next drain queues every active lesson again (a model change re-embeds; nothing is mixed).
    op.create_table(
        "embed_state",
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("model", sa.String(100), nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            "CREATE VIRTUAL TABLE lesson_fts USING fts5("
            "key, value, tags, tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        # Purge is hard erasure: without secure-delete, FTS5 leaves a deleted lesson's tokens in
        # its segment tables until they happen to be merged (SQLite >= 3.42).
        op.execute("INSERT INTO lesson_fts(lesson_fts, rank) VALUES ('secure-delete', 1)")
        # Backfill: stores created before search existed become searchable at once.
        op.execute(
            "INSERT INTO lesson_fts(rowid, key, value, tags) "
            "SELECT id, replace(key, '-', ' '), value, "
            "(SELECT group_concat(tag, ' ') FROM lesson_tags t WHERE t.lesson_id = lessons.id) "
            "FROM lessons WHERE trust != 'rejected' AND archived_at IS NULL AND superseded_by IS NULL"
        )
    op.execute(
        "INSERT INTO embed_queue(lesson_id, tenant_id, queued_at) "
        "SELECT id, tenant_id, updated_at FROM lessons "
        "WHERE trust != 'rejected' AND archived_at IS NULL AND superseded_by IS NULL"
    )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        vec_tables = bind.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%vec0%'"
        ).fetchall()
        for (name,) in vec_tables:
            op.execute(f'DROP TABLE IF EXISTS "{name}"')
        op.execute("DROP TABLE lesson_fts")
    op.drop_table("embed_state")
    op.drop_index("ix_embed_queue_tenant", "embed_queue")
    op.drop_table("embed_queue")
    op.drop_table("lesson_embeddings")
