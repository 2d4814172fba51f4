"""An index that holds every column the scope map reads, so the map never reads a lesson row.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02

Why: the scope map (``cairn scopes``, ``/v1/scopes``, the MCP ``scopes`` tool and LoreKit's
``/memories/scopes``, which LoreKit's SessionStart hook waits for) groups every lesson of a tenant by
scope and counts active, verified and archived ones. "Active" is decided by ``trust``,
``superseded_by``, ``archived_at`` and ``expires_at`` (``store/predicates.py``). No index held those,
so both databases read every lesson row, value text included, to count them: the map's cost grew with
the size of the text stored, not the number of lessons.

``(tenant_id, scope, trust, archived_at, superseded_by, expires_at)`` holds the grouping key in order
and every column the counts test: SQLite answers from the index alone (a covering index, already in
scope order, so no sort), Postgres with an index-only scan once the table has been vacuumed (its
visibility map; before that, the same index still gives the scope order). The rows stay as they are;
the index costs one more entry per lesson write, a few dozen bytes.
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

COLUMNS = ["tenant_id", "scope", "trust", "archived_at", "superseded_by", "expires_at"]


def upgrade() -> None:
    op.create_index("ix_lessons_tenant_scope_state", "lessons", COLUMNS)


def downgrade() -> None:
    op.drop_index("ix_lessons_tenant_scope_state", table_name="lessons")
