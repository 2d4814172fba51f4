"""GitHub webhooks: registrations, the deliveries already processed, and where a lesson came from.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

Why each table (docs/webhooks.md has the whole flow):

* ``webhooks`` -- one row per repository a tenant registered. The secret is kept as given, not
  hashed: checking GitHub's ``X-Hub-Signature-256`` needs the secret itself (an HMAC key cannot be
  verified from a hash of it). It is never returned after ``add``/``rotate``, never logged and
  never in an audit row (which records a fingerprint); on Postgres row security shows a row to its
  tenant, or to a delivery that names its repository (``cairn.webhook``), and to nobody else.
  ``previous_secret`` / ``previous_until``: rotation keeps the old secret valid for a grace
  period, so deliveries GitHub signed before the user pasted the new one are not lost.
  ``counts`` (JSON) is what the gate and the filter did with deliveries, by outcome and reason.
  Unique per (tenant, repository); two tenants may register the same repository, each with its
  own secret, and a delivery lands in the one whose secret signed it.
* ``webhook_deliveries`` -- the ``X-GitHub-Delivery`` ids already processed, per registration:
  GitHub redelivers on timeouts and by hand, and a redelivery must change nothing. Written in the
  same transaction as the lesson, so a delivery that failed (and answered 5xx) is not remembered
  and its retry is processed.
* ``webhook_provenance`` -- per lesson that a webhook wrote: who wrote the comment, their
  ``author_association``, whether they are outside the repository, the comment's URL, PR, file
  and line. Kept beside the lesson (not as lesson columns): the lesson row's proof hashes a frozen
  column list (``service/state_proof.py``), and the audit row of the write already records the
  delivery. ``outside`` is what keeps recurrence from promoting the lesson (``service/lessons.py``).
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.types import IdType, UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", IdType, sa.Identity(), primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("secret", sa.Text, nullable=False),
        sa.Column("previous_secret", sa.Text),
        sa.Column("previous_until", UTCDateTime),
        sa.Column("counts", sa.Text, nullable=False, server_default="{}"),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("rotated_at", UTCDateTime),
        sa.Column("last_delivery_at", UTCDateTime),
        sa.UniqueConstraint("tenant_id", "repo", name="uq_webhooks_tenant_repo"),
        sa.Index("ix_webhooks_repo", "repo"),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("webhook_id", IdType, primary_key=True),
        sa.Column("delivery", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("received_at", UTCDateTime, nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Index("ix_webhook_deliveries_received", "webhook_id", "received_at"),
    )
    op.create_table(
        "webhook_provenance",
        sa.Column("lesson_id", IdType, primary_key=True, autoincrement=False),
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("webhook_id", IdType, nullable=False),
        sa.Column("delivery", sa.String(64), nullable=False),
        sa.Column("login", sa.String(100), nullable=False),
        sa.Column("association", sa.String(40), nullable=False),
        sa.Column("outside", sa.Boolean, nullable=False),
        sa.Column("url", sa.Text),
        sa.Column("pr", sa.Integer),
        sa.Column("path", sa.Text),
        sa.Column("line", sa.Integer),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Index("ix_webhook_provenance_tenant", "tenant_id", "lesson_id"),
    )


def downgrade() -> None:
    op.drop_table("webhook_provenance")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhooks")
