"""The consolidation ledger: every run and every action it proposed, applied, skipped or dropped.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02

Why a ledger and not a log line: a pass that merges, promotes and archives lessons on its own is only
trustworthy if its policy can be checked after the fact. Other memory stores log counts ("eleven
deleted"); here every action is a row naming its lessons, the exact versions it read, the versions it
wrote and the reason, so a person can review a plan before it applies, see afterwards what a run did
and why, and undo it.

``consolidation_runs``: one row per run, with its parameters (JSON: scopes, stale age), how it was
started (``mode``: ``plan`` waits for a person, ``apply`` applies at once), its status
(planned / applying / finished / undone) and the tenant's **deletion epoch when it started**: a run
that began before a forget or purge must write nothing derived from what was erased, and its apply
compares this column with the tenant's counter inside each action's transaction.

``consolidation_actions``: one row per action, ``position`` ordering them within the run.
``lesson_ids`` and ``versions_read`` (JSON) are what the **source-revision guard** checks: an action
applies only if every lesson it read is still at that version, inside its own write transaction;
otherwise it is ``discarded`` and a ``recomputed`` action from the lessons' current state takes its
place (once). ``versions_written`` and ``effects`` (JSON: the lesson a promotion created, the links
and sightings an action added) are what ``undo`` reverses. The status of an action and the lessons
it wrote commit in the same transaction, so a run killed at any point resumes without applying an
action twice. Nothing here holds lesson text: ``reason`` names lessons by key, as the audit does.

Row-level security: both are tenant data tables (``store/rls.py``, applied after every upgrade).
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.types import IdType, UTCDateTime

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "consolidation_runs",
        sa.Column("id", IdType, sa.Identity(), primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime),
        sa.Column("parameters", sa.Text(), nullable=False),
        sa.Column("mode", sa.String(8), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("deletion_epoch", sa.Integer(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
    )
    op.create_index("ix_consolidation_runs_tenant", "consolidation_runs", ["tenant_id", "id"])
    op.create_table(
        "consolidation_actions",
        sa.Column("id", IdType, sa.Identity(), primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("run_id", IdType, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(24), nullable=False),
        sa.Column("lesson_ids", sa.Text(), nullable=False),
        sa.Column("versions_read", sa.Text(), nullable=False),
        sa.Column("versions_written", sa.Text()),
        sa.Column("effects", sa.Text()),
        sa.Column("keep_id", IdType),
        sa.Column("target_scope", sa.String(300)),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_reason", sa.Text()),
        sa.Column("recomputed", sa.Boolean(), nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("run_id", "position", name="uq_consolidation_actions_position"),
    )
    op.create_index("ix_consolidation_actions_run", "consolidation_actions", ["tenant_id", "run_id", "position"])


def downgrade() -> None:
    op.drop_table("consolidation_actions")
    op.drop_table("consolidation_runs")
