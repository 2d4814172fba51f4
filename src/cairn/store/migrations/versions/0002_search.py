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

On Postgres the same indexes are built from what Postgres has (``store/search_index.py`` holds the
queries for both):

* ``lesson_fts`` is a plain table, ``lesson_id`` → a ``tsvector`` with a GIN index, rather than a
  generated column on ``lessons``. Like the FTS5 table it holds **active lessons only** and is
  written by the same calls (``fts_put``/``fts_drop``), so "is this lesson indexed" and "which
  lessons have this term" mean the same on both databases, and a lesson's text is not indexed
  again by every update of its counters. It carries ``tenant_id`` as every tenant-owned table does.
* The vector's fields are weighted as BM25 weighs the FTS5 columns: key ``A``, tags ``B``, value
  ``D``; ``ts_rank`` reads the weights (``search_index._PG_WEIGHTS``).
* Text search configuration ``cairn_fts``: Postgres' parser with an English Snowball stemmer and
  *no* stop-word list (FTS5's porter tokenizer drops no words either: a query for "not found"
  must not lose "not"). ``search_index`` folds case and diacritics and splits on every
  non-alphanumeric character before the text reaches the parser, as ``unicode61`` does.
* Vectors use pgvector (the ``vector`` extension, which a superuser must create once per database
  if it is not there yet): a table per model and dimension, created on first use like ``vec0``'s,
  holding full-precision vectors under an HNSW index (cosine). pgvector's distance code is SIMD,
  so the binary quantization SQLite needs for speed would only cost accuracy here.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

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
        # Not an identity column on Postgres: the key is the lesson's id, never generated here.
        sa.Column("lesson_id", IdType, primary_key=True, autoincrement=False),
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
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        _postgres_search()
    if dialect == "sqlite":
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


def _postgres_search() -> None:
    bind = op.get_bind()
    if bind.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'vector'").first() is None:
        # pgvector is not a trusted extension: only a superuser may create it. Say so plainly
        # instead of failing on the first vector table.
        try:
            with bind.begin_nested():
                bind.exec_driver_sql("CREATE EXTENSION vector")
        except sa.exc.DBAPIError as exc:
            from cairn.errors import CairnError

            raise CairnError(
                "SETUP",
                "Cairn needs the pgvector extension in this database; as a superuser run "
                f"CREATE EXTENSION vector; then cairn db upgrade again ({str(exc.orig).strip()})",
            ) from None
    op.execute("CREATE TEXT SEARCH DICTIONARY cairn_stem (TEMPLATE = snowball, Language = english)")
    op.execute("CREATE TEXT SEARCH CONFIGURATION cairn_fts (COPY = simple)")
    op.execute(
        "ALTER TEXT SEARCH CONFIGURATION cairn_fts ALTER MAPPING FOR asciiword, word, numword, "
        "asciihword, hword, numhword, hword_asciipart, hword_part, hword_numpart WITH cairn_stem"
    )
    op.create_table(
        "lesson_fts",
        sa.Column("lesson_id", IdType, primary_key=True, autoincrement=False),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("doc", postgresql.TSVECTOR, nullable=False),
    )
    op.create_index("ix_lesson_fts_doc", "lesson_fts", ["doc"], postgresql_using="gin")
    # Backfill, as on SQLite, through the same function that indexes every write (the folding of
    # text into words lives there, in Python, so it is not written twice).
    from cairn.store import search_index as ix

    last = 0
    while True:
        rows = [
            dict(r)
            for r in bind.execute(
                sa.text(
                    "SELECT id, tenant_id, key, value, tags FROM lessons WHERE id > :last AND trust != 'rejected' "
                    "AND archived_at IS NULL AND superseded_by IS NULL ORDER BY id LIMIT 1000"
                ),
                {"last": last},
            ).mappings()
        ]
        if not rows:
            break
        ix.fts_insert_many(bind, rows)
        last = rows[-1]["id"]


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        from cairn.store import search_index as ix

        for name in ix.vec_tables(bind):
            op.execute(f'DROP TABLE IF EXISTS "{name}"')
        op.drop_table("lesson_fts")
        op.execute("DROP TEXT SEARCH CONFIGURATION cairn_fts")
        op.execute("DROP TEXT SEARCH DICTIONARY cairn_stem")
        # The vector extension stays: a superuser created it, and other schemas may use it.
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
