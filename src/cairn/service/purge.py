"""Hard erasure: the two sweeps (expired; archived past retention) and what they remove.

The archived sweep also takes rejected (forgotten) lessons past the same retention;
``erase_forgotten`` erases one forgotten lesson now (memory-gateway's ``forget`` uses it). Purge deletes
the content from lessons, versions, tags, sightings, links and every search index,
and writes one audit row per lesson carrying only hashes, so the chain still verifies and the
ledger still says what was erased, when and by whom. Tombstones hold no content and stay: a
purged rejection is still a rejection. The embedding a tombstone kept of the forgotten text is
derived from that content, so it goes with it (``paraphrase.erase``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.engine import Connection

from cairn.core.keys import normalize_key
from cairn.core.principal import Principal
from cairn.core.scope import validate_scope
from cairn.core.sweeps import choose_sweep
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.service import audit, epoch, indexing, paraphrase, rank_cache
from cairn.service.records import fetch
from cairn.service.tx import write_tx
from cairn.store.engine import Store, mark_erased
from cairn.store.schema import lesson_tags, lesson_versions, lessons, links, sightings, webhook_provenance


@dataclass(eq=False, repr=False)
class Purge:
    """The purge sweeps and the erasure of one forgotten lesson."""

    store: Store
    settings: Settings

    def purge(
        self,
        principal: Principal,
        *,
        expired: bool = False,
        archived: bool = False,
        older_than: timedelta | None = None,
    ) -> dict[str, Any]:
        sweep = choose_sweep(expired=expired, archived=archived, older_than=older_than is not None)
        principal.require_account_wide("purge")
        retention = older_than if older_than is not None else timedelta(days=self.settings.archive_retention_days)

        def tx(conn: Connection, principal: Principal) -> dict[str, Any]:
            now = utcnow()
            q = select(lessons.c.id, lessons.c.scope, lessons.c.key, lessons.c.version, lessons.c.content_hash)
            q = q.where(lessons.c.tenant_id == principal.tenant_id)
            if expired:
                q = q.where(lessons.c.expires_at.is_not(None), lessons.c.expires_at <= now)
            else:
                # Rejected lessons are put aside too (reject = forget): without this a forgotten
                # lesson's text, a leaked secret say, could never be erased. Its tombstone stays.
                cutoff = now - retention
                q = q.where(
                    or_(
                        and_(lessons.c.archived_at.is_not(None), lessons.c.archived_at <= cutoff),
                        and_(lessons.c.trust == "rejected", lessons.c.updated_at <= cutoff),
                    )
                )
            targets = conn.execute(q.order_by(lessons.c.id)).mappings().all()
            for t in targets:
                erase_audited(conn, principal, t, sweep, now)
            return {
                "sweep": sweep,
                "purged": len(targets),
                "lessons": [{"scope": t["scope"], "key": t["key"]} for t in targets],
            }

        result = write_tx(self.store, principal, tx)
        if result["purged"]:
            rank_cache.discard(self.store.url)
        return result

    def erase_forgotten(self, principal: Principal, scope: str, key: str) -> dict[str, Any]:
        """Erase one forgotten lesson's text now, as the archived sweep would once past retention.

        Only a rejected lesson qualifies (forget first: the tombstone is what keeps the content out
        afterwards, and it stays). Idempotent: an address with nothing left to erase is a no-op.
        """
        scope, key = validate_scope(scope), normalize_key(key)
        principal.require_account_wide("purge")

        def tx(conn: Connection, principal: Principal) -> dict[str, Any]:
            now = utcnow()
            row = fetch(conn, principal, scope, key)
            if row is None:
                return {"erased": False, "versions_erased": 0, "scope": scope, "key": key}
            if row["trust"] != "rejected":
                raise CairnError(
                    "CONFLICT",
                    f"{scope} {key} is not forgotten; only a forgotten lesson is erased "
                    f'(cairn forget {scope} {key} --reason "..." first)',
                )
            erased = erase_audited(conn, principal, row, "forgotten", now)
            return {"erased": True, "versions_erased": erased, "scope": scope, "key": key}

        result = write_tx(self.store, principal, tx)
        if result["erased"]:
            rank_cache.discard(self.store.url)
        return result


def erase_audited(conn: Connection, principal: Principal, row: Mapping[str, Any], sweep: str, now: datetime) -> int:
    """Erase one lesson (``row``: its id, address, version and content hash) and write its purge row,
    which keeps only the hash: the chain still verifies and says what was erased, by which sweep."""
    erased = erase(conn, principal, row["id"])
    audit.record_lesson(
        conn,
        principal,
        "purge",
        row,
        version_before=row["version"],
        hash_before=row["content_hash"],
        detail={"sweep": sweep, "versions_erased": erased},
        at=now,
    )
    return erased


def erase(conn: Connection, principal: Principal, lesson_id: int) -> int:
    """Remove one lesson's content everywhere it is stored; returns how many versions went."""
    tenant = principal.tenant_id
    mark_erased(conn)  # no copy of the text left in SQLite's write-ahead log after the commit
    epoch.bump(conn, tenant)  # work that read this lesson's text before now must not write it back
    indexing.drop(conn, lesson_id)
    paraphrase.erase(conn, tenant, lesson_id)
    n_versions = conn.execute(
        select(func.count()).where(lesson_versions.c.tenant_id == tenant, lesson_versions.c.lesson_id == lesson_id)
    ).scalar_one()
    conn.execute(
        delete(lesson_versions).where(lesson_versions.c.tenant_id == tenant, lesson_versions.c.lesson_id == lesson_id)
    )
    conn.execute(delete(lesson_tags).where(lesson_tags.c.tenant_id == tenant, lesson_tags.c.lesson_id == lesson_id))
    conn.execute(delete(sightings).where(sightings.c.tenant_id == tenant, sightings.c.lesson_id == lesson_id))
    conn.execute(
        delete(webhook_provenance).where(
            webhook_provenance.c.tenant_id == tenant, webhook_provenance.c.lesson_id == lesson_id
        )
    )
    conn.execute(
        delete(links).where(links.c.tenant_id == tenant, or_(links.c.src_id == lesson_id, links.c.dst_id == lesson_id))
    )
    # A lesson this one superseded stays retired: its superseded_by keeps pointing at the erased id.
    conn.execute(delete(lessons).where(lessons.c.tenant_id == tenant, lessons.c.id == lesson_id))
    return n_versions
