"""Sync between stores: a stable id per store, what each peer sent and received, a global identity
for every version, and the tips of each lesson's version history.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02

Why (docs/sync.md has the whole model): a laptop's store and the team's server exchange what each
has that the other lacks, in both directions, resumably and idempotently. Versions are append-only
on both sides, so sync *merges histories*; that needs identities that mean the same on every store.

* ``sync_stores`` -- this store's id, per tenant, made once on first use: every event a store
  originates is named by it (``origin_store``), so a peer never feeds an event back to where it
  came from, and the audit of an applied event says which store it came from.
* ``sync_peers`` -- per peer store: the cursor up to which its events were applied here (pulled,
  or pushed to us: either way *received*), the cursor up to which ours were accepted there
  (pushed), the peer's audit chain head at the last exchange, and when. The received cursor is
  written in the same transaction as the events it covers, so a sync cut at any point resumes
  where it stopped and applies nothing twice.
* ``sync_events`` -- the uid of every event applied, skipped as already held, or refused here, with
  what became of it: the idempotency record (a replayed batch is a no-op even for events that left
  no version row, such as a refused one or a tombstone already held).
* ``lesson_versions.uid`` / ``parents`` / ``human`` -- a version's global identity (so "both sides
  hold the same versions" is checkable, and an event already held is recognised), the versions it
  was written on top of (so a remote version that continues ours is a fast-forward, and one written
  beside ours is a conflict), and whether a person wrote it (the conflict rule prefers a person's
  write). Existing versions get a uid derived from what they hold (tenant, address, version number,
  record time, actor, content hash): deterministic, so running the migration twice or on a copy
  gives the same ids, and two different stores' versions cannot collide unless they are the same
  version. Their parent is the previous version of the same lesson. New versions get a random uid.
  The columns stay nullable in the database (making them NOT NULL on SQLite means recreating the
  table, which would drop migration 0001's append-only triggers); the one mutation path
  (``service/mutate.py``) always sets them.
* ``lessons.tips`` -- the uids of the lesson's versions that no other version names as a parent
  (JSON list). One tip is the normal case; two or more mean histories diverged and were merged
  without a resolution. The current state is the tip the conflict rule picks (``core/sync.py``), a
  function of the version set alone, so two stores holding the same versions agree on it.
  ``lessons.conflicted_at`` puts a diverged lesson in the review queue until a person resolves it.
  Neither column is in the ledger's state proof (its field list is frozen; ``state_proof.py``).

On Postgres the three new tables are tenant data under the same row-level security as the others
(``store/rls.py`` lists them; policies are applied after every upgrade).
"""

import hashlib
import json

import sqlalchemy as sa
from alembic import op

from cairn.store.types import UTCDateTime

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

BATCH = 2000


def backfill_uid(tenant_id: str, scope: str, key: str, version: int, recorded_at: str, actor: str, chash: str) -> str:
    """The uid of a version written before versions had one: a digest of what the version holds."""
    blob = json.dumps([tenant_id, scope, key, version, recorded_at, actor, chash], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def upgrade() -> None:
    op.create_table(
        "sync_stores",
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("store_id", sa.String(32), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_table(
        "sync_peers",
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("peer_store_id", sa.String(32), primary_key=True),
        sa.Column("pulled_cursor", sa.Integer, nullable=False, server_default="0"),
        sa.Column("pushed_cursor", sa.Integer, nullable=False, server_default="0"),
        sa.Column("peer_head_seq", sa.Integer),
        sa.Column("peer_head_hash", sa.String(64)),
        sa.Column("last_pulled_at", UTCDateTime),
        sa.Column("last_pushed_at", UTCDateTime),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_table(
        "sync_events",
        sa.Column("tenant_id", sa.String(64), sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("uid", sa.String(80), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("origin_store", sa.String(32), nullable=False),
        sa.Column("peer_store", sa.String(32), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("seq", sa.Integer),  # the local audit row the event produced, if any
        sa.Column("applied_at", UTCDateTime, nullable=False),
    )
    op.add_column("lesson_versions", sa.Column("uid", sa.String(32)))
    op.add_column("lesson_versions", sa.Column("parents", sa.Text))
    op.add_column("lesson_versions", sa.Column("human", sa.Boolean))
    op.add_column("lessons", sa.Column("tips", sa.Text))
    op.add_column("lessons", sa.Column("conflicted_at", UTCDateTime))
    _backfill()
    op.create_index("ix_versions_tenant_uid", "lesson_versions", ["tenant_id", "uid"], unique=True)
    op.create_index("ix_lessons_tenant_conflicted", "lessons", ["tenant_id", "conflicted_at"])


def _backfill() -> None:
    """Give every existing version its uid and parent, and every lesson its tip (see the module doc)."""
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        # Store.upgrade has lifted row security's FORCE for the migration (every tenant's rows).
        # lesson_versions refuses UPDATE to everyone (append-only); the backfill alone may set the
        # columns it just added, so its guard is lifted here and put back below.
        bind.exec_driver_sql("ALTER TABLE lesson_versions DISABLE TRIGGER lesson_versions_append_only")
    else:
        bind.exec_driver_sql("DROP TRIGGER IF EXISTS lesson_versions_no_update")
    versions = sa.table(
        "lesson_versions",
        sa.column("id"),
        sa.column("tenant_id"),
        sa.column("lesson_id"),
        sa.column("version"),
        sa.column("scope"),
        sa.column("key"),
        sa.column("recorded_at"),
        sa.column("actor"),
        sa.column("content_hash"),
        sa.column("uid"),
        sa.column("parents"),
    )
    lessons = sa.table("lessons", sa.column("id"), sa.column("tips"))
    q = sa.select(
        versions.c.id,
        versions.c.tenant_id,
        versions.c.lesson_id,
        versions.c.version,
        versions.c.scope,
        versions.c.key,
        versions.c.recorded_at,
        versions.c.actor,
        versions.c.content_hash,
    ).order_by(versions.c.lesson_id, versions.c.version)
    set_version = (
        sa.update(versions)
        .where(versions.c.id == sa.bindparam("b_id"))
        .values(uid=sa.bindparam("b_uid"), parents=sa.bindparam("b_parents"))
    )
    set_tips = sa.update(lessons).where(lessons.c.id == sa.bindparam("b_id")).values(tips=sa.bindparam("b_tips"))
    rows = bind.execute(q).all()
    updates: list[dict[str, object]] = []
    tips: dict[int, str] = {}
    previous: tuple[int, str] | None = None
    for r in rows:
        # recorded_at as the database returns it (text on SQLite, a datetime on Postgres), in one form.
        at = r.recorded_at.isoformat() if hasattr(r.recorded_at, "isoformat") else str(r.recorded_at)
        uid = backfill_uid(r.tenant_id, r.scope, r.key, r.version, at, r.actor, r.content_hash)
        parents = [previous[1]] if previous is not None and previous[0] == r.lesson_id else []
        updates.append({"b_id": r.id, "b_uid": uid, "b_parents": json.dumps(parents)})
        tips[r.lesson_id] = uid
        previous = (r.lesson_id, uid)
        if len(updates) >= BATCH:
            bind.execute(set_version, updates)
            updates = []
    if updates:
        bind.execute(set_version, updates)
    tip_rows = [{"b_id": lid, "b_tips": json.dumps([uid])} for lid, uid in tips.items()]
    for start in range(0, len(tip_rows), BATCH):
        bind.execute(set_tips, tip_rows[start : start + BATCH])
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql("ALTER TABLE lesson_versions ENABLE TRIGGER lesson_versions_append_only")
    else:
        from cairn.store.dialect import guard_triggers

        for stmt in guard_triggers("sqlite"):
            bind.exec_driver_sql(stmt)


def downgrade() -> None:
    op.drop_index("ix_lessons_tenant_conflicted", table_name="lessons")
    op.drop_index("ix_versions_tenant_uid", table_name="lesson_versions")
    # Plain DROP COLUMN (SQLite 3.35+), not a batch copy: recreating the table would lose the
    # append-only triggers of migration 0001.
    op.drop_column("lessons", "conflicted_at")
    op.drop_column("lessons", "tips")
    op.drop_column("lesson_versions", "human")
    op.drop_column("lesson_versions", "parents")
    op.drop_column("lesson_versions", "uid")
    op.drop_table("sync_events")
    op.drop_table("sync_peers")
    op.drop_table("sync_stores")
