"""Tombstones keep the forgotten content's embedding, so a paraphrase of it is held for review.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02

Why: a tombstone refused the forgotten text re-cased, re-punctuated or with look-alike letters
(``content_hash`` / ``identity``), but the same fact in other words came back as an ordinary,
readable lesson. ``forget`` now stores the embedding of the forgotten text beside its tombstone, and
a write whose text is close to one (``core/similarity.py`` decides) lands held for a person.

Why a table of its own rather than a column of ``tombstones``: the vector is derived from content,
and content is what ``purge`` erases. A tombstone row stays forever (it is what keeps refusing the
exact text, and the ledger proves it, ``service/state_proof.py``); the vector row is deleted with
the text it came from, and by ``unforget``. Keyed by the tombstone, with the model that made it:
a vector of another model is never compared (a model change re-embeds through ``cairn reindex``).

No backfill: the forgotten text may already be erased, and embedding needs the model, which a
migration must not load. Tombstones written before this revision keep refusing exact and normalized
matches; ``cairn reindex`` embeds those whose text the store still holds.

Row-level security: a tenant data table (``store/rls.py``, applied after every upgrade).
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.types import IdType, UTCDateTime

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tombstone_vectors",
        sa.Column("tombstone_id", IdType, primary_key=True, autoincrement=False),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("model", sa.String(100), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    # Every write of a tenant with tombstones loads its vectors of the configured model.
    op.create_index("ix_tombstone_vectors_tenant_model", "tombstone_vectors", ["tenant_id", "model"])


def downgrade() -> None:
    op.drop_table("tombstone_vectors")
