"""Tombstones compare a wider content identity; imported lessons keep what they claimed.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

Why:

* A tombstone stopped the same text re-cased, re-punctuated or with a zero-width space in it, but
  not the same text with a variation selector, a combining grapheme joiner or a Hangul filler in
  it, nor with Cyrillic or Greek look-alike letters, a dotless i or its accents removed.
  ``core.content.content_identity`` folds all of those (every default-ignorable code point, TR39
  confusable skeletons, accents). It is a **new column**, ``tombstones.identity``, rather than a
  new meaning of ``content_hash``: ``content_hash`` is recorded in every audit row ever written
  (and in lesson and version rows, and keys the embeddings), so recomputing it would make the
  ledger disagree with the state it proves. The tombstone check matches either hash, so tombstones
  whose identity cannot be computed still refuse exactly what they refused before.
* Backfill: a tombstone holds no content, but the forgotten text is usually still in the rejected
  lesson's version rows (the version whose ``content_hash`` the tombstone recorded). Where purge
  has erased it, or the tombstone came from an import without the lesson, ``identity`` stays NULL
  and the tombstone matches by ``content_hash`` as it always did.
* ``lessons.claimed`` holds, as JSON, what an import record claimed about a lesson (origin, author,
  trust, counters, timestamps) when the import was not an admin's ``--restore``: such an import
  lands the lesson as a candidate by the importer and keeps the claims as claims, shown as such,
  instead of granting them.
"""

import sqlalchemy as sa
from alembic import op

from cairn.core.content import content_identity

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

BATCH = 1000


def upgrade() -> None:
    op.add_column("tombstones", sa.Column("identity", sa.String(64)))
    op.create_index("ix_tombstones_tenant_identity", "tombstones", ["tenant_id", "identity"])
    op.add_column("lessons", sa.Column("claimed", sa.Text))

    bind = op.get_bind()
    tombstones = sa.table(
        "tombstones",
        sa.column("id"),
        sa.column("tenant_id"),
        sa.column("lesson_id"),
        sa.column("content_hash"),
        sa.column("identity"),
    )
    versions = sa.table(
        "lesson_versions", sa.column("tenant_id"), sa.column("lesson_id"), sa.column("content_hash"), sa.column("value")
    )
    # The forgotten text, where a version row still holds it (several versions may share the hash:
    # they share the normalized text, so any of them gives the same identity).
    source = (
        sa.select(tombstones.c.id, sa.func.min(versions.c.value))
        .select_from(
            tombstones.join(
                versions,
                sa.and_(
                    versions.c.tenant_id == tombstones.c.tenant_id,
                    versions.c.lesson_id == tombstones.c.lesson_id,
                    versions.c.content_hash == tombstones.c.content_hash,
                ),
            )
        )
        .where(tombstones.c.identity.is_(None))
        .group_by(tombstones.c.id)
        .order_by(tombstones.c.id)
    )
    last = 0
    while True:
        found = bind.execute(source.where(tombstones.c.id > last).limit(BATCH)).all()
        if not found:
            break
        stmt = sa.update(tombstones).where(tombstones.c.id == sa.bindparam("b_id"))
        bind.execute(
            stmt.values(identity=sa.bindparam("b_ident")),
            [{"b_id": tid, "b_ident": content_identity(value)} for tid, value in found],
        )
        last = found[-1][0]


def downgrade() -> None:
    op.drop_index("ix_tombstones_tenant_identity", table_name="tombstones")
    op.execute("ALTER TABLE tombstones DROP COLUMN identity")  # SQLite 3.35+ drops in place
    op.execute("ALTER TABLE lessons DROP COLUMN claimed")
