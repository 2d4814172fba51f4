"""The audit ledger proves the state, not only itself: each row records hashes of the rows it wrote.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

Why: the hash chain proved that no audit row was edited, removed or reordered, but said nothing
about the tables it describes. A direct edit of the database file that changed a lesson's value or
trust, deleted a tombstone or a lesson, or inserted a lesson with no ledger row verified clean.
Rows only recorded the content hash and version numbers, which do not cover trust, archive,
expiry, tags, counters or provenance.

* ``state_hash`` — for a row that changed a lesson: the hash of the lesson row as that mutation
  left it (every column, ``service/state_proof.py: LESSON_FIELDS``); for an imported tombstone:
  the tombstone row as inserted. ``cairn audit verify`` compares the current rows with the newest
  ledger row of each.
* ``versions_hash`` — for a row that wrote version rows: the hash of those version rows (one for
  a mutation, the whole history for a lossless import), so an edited, deleted or inserted version
  is found too.

Both are part of the chained row hash when present. Rows written before this migration have
neither, and no backfill is attempted: hashing today's rows would certify whatever state the file
is in now, edits included. Those rows are checked on what they recorded (the lesson's version and
content hash, the forget or unforget a tombstone came from); the first mutation after the upgrade
records the full state from then on.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("audit_log", sa.Column("state_hash", sa.String(64)))
    op.add_column("audit_log", sa.Column("versions_hash", sa.String(64)))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite 3.35+), not a batch copy: recreating the table would lose the
    # append-only triggers that migration 0001 put on it.
    op.drop_column("audit_log", "versions_hash")
    op.drop_column("audit_log", "state_hash")
