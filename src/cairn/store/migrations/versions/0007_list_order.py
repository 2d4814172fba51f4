"""An index in the order ``list`` reads lessons: newest change first, across every scope.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

Why: ``cairn list`` without a scope orders a tenant's lessons by ``updated_at`` then ``id``, newest
first. The only index on ``updated_at`` led with ``scope``, so SQLite read every lesson of the tenant
and sorted them for each page: ~100 ms at 60,000 lessons, the largest part of a list served by the
warm daemon. With ``(tenant_id, updated_at, id)`` a page is a walk of the index from its end (well
under a millisecond). Postgres uses the same index for the same query. Nothing is rewritten.
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_lessons_tenant_updated", "lessons", ["tenant_id", "updated_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_lessons_tenant_updated", table_name="lessons")
