"""Binary signatures of the vectors in their own narrow table, and a counter of embedding commits.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Why:

* The session-start block (``cairn context``) ranks the whole eligible store, including how close
  each lesson is in meaning to the branch name or the task. sqlite-vec's KNN with a scope filter took
  ~300 ms for k = 800 at 60,000 lessons here and grows linearly (seconds at a million); a hook has
  a fraction of that. The ranking index (``service/rank_index.py``) instead keeps each lesson's
  **sign bits** (the same binary quantization the vec0 index uses) in memory, pre-ranks by Hamming
  distance in numpy, then re-ranks the nearest by exact cosine from the float vectors.
* ``lesson_signatures`` is a separate, narrow table (48 bytes of bits per 384-dimension vector)
  rather than a column of ``lesson_embeddings``: a column stored after a 1.5 KB vector lives on its
  overflow pages, and loading 60,000 signatures that way took over a second here.
* ``embed_state.generation`` counts the embedding drain's commits per tenant. The drain writes no
  audit row (a vector is derived data, not a change to a lesson), so the index asks "any new
  vectors?" with one primary-key read, and only then reads signatures stamped since it last looked.
* Existing vectors are backfilled here, in batches.
"""

import numpy as np
import sqlalchemy as sa
from alembic import op

from cairn.store.types import IdType, UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BATCH = 5000


def upgrade() -> None:
    op.create_table(
        "lesson_signatures",
        sa.Column("lesson_id", IdType, primary_key=True),
        sa.Column("model", sa.String(100), primary_key=True),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("embedded_at", UTCDateTime, nullable=False),
        sa.Column("bits", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_signatures_tenant_embedded", "lesson_signatures", ["tenant_id", "embedded_at"])
    op.add_column("embed_state", sa.Column("generation", sa.Integer(), nullable=False, server_default="0"))
    conn = op.get_bind()
    src = sa.table(
        "lesson_embeddings",
        sa.column("lesson_id"),
        sa.column("model"),
        sa.column("tenant_id"),
        sa.column("embedded_at"),
        sa.column("vector", sa.LargeBinary),
    )
    dst = sa.table(
        "lesson_signatures",
        sa.column("lesson_id"),
        sa.column("model"),
        sa.column("tenant_id"),
        sa.column("embedded_at"),
        sa.column("bits", sa.LargeBinary),
    )
    last = (-1, "")
    while True:
        rows = conn.execute(
            sa.select(src.c.lesson_id, src.c.model, src.c.tenant_id, src.c.embedded_at, src.c.vector)
            .where(sa.tuple_(src.c.lesson_id, src.c.model) > sa.tuple_(sa.literal(last[0]), sa.literal(last[1])))
            .order_by(src.c.lesson_id, src.c.model)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        conn.execute(
            dst.insert(),
            [
                {
                    "lesson_id": r[0],
                    "model": r[1],
                    "tenant_id": r[2],
                    "embedded_at": r[3],
                    "bits": np.packbits(np.frombuffer(r[4], dtype="<f4") > 0).tobytes(),
                }
                for r in rows
            ],
        )
        last = (rows[-1][0], rows[-1][1])


def downgrade() -> None:
    op.drop_column("embed_state", "generation")
    op.drop_index("ix_signatures_tenant_embedded", table_name="lesson_signatures")
    op.drop_table("lesson_signatures")
