"""Export as JSONL: a header line, then one line per lesson with its whole version history, then
tombstones, then links (links name lessons by address, so they survive into a store where ids
differ). Without ``active_only`` it is a lossless backup that ``import --restore`` brings back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from cairn.core.lesson import VERSION_FIELDS
from cairn.core.principal import READ, Principal
from cairn.core.scope import validate_scope
from cairn.core.timeparse import format_time, utcnow
from cairn.service.records import active_clause, shown
from cairn.service.tx import read_tx
from cairn.store.engine import Store
from cairn.store.schema import lesson_versions, lessons, links, tombstones

FORMAT = "cairn-export"
FORMAT_VERSION = 1
BATCH = 500


def _t(v: datetime | None) -> str | None:
    return format_time(v) if v is not None else None


@dataclass(eq=False, repr=False)
class Export:
    """A tenant's lessons (or one scope's) as JSONL lines, read in one snapshot."""

    store: Store

    def export(self, principal: Principal, *, active_only: bool = False, scope: str | None = None) -> Iterator[str]:
        """JSONL lines. Without ``active_only`` this is a full, lossless backup.

        Not a generator: permissions are checked and the snapshot is read when this is called, so a
        refusal reaches the caller before any surface starts streaming a response.
        """
        principal.require(READ)
        if scope is not None:
            scope = validate_scope(scope)
            principal.require(READ, scope)
        elif not active_only:
            principal.require_account_wide("export of everything")
        lines: list[str] = []

        def tx(conn: Connection) -> None:
            now = utcnow()
            lines.append(
                json.dumps({"type": "header", "format": FORMAT, "version": FORMAT_VERSION, "exported_at": _t(now)})
            )
            q = select(lessons).where(lessons.c.tenant_id == principal.tenant_id)
            if active_only:
                q = q.where(active_clause(now))
            if scope is not None:
                q = q.where(lessons.c.scope == scope)
            rows = [dict(r) for r in conn.execute(q.order_by(lessons.c.id)).mappings()]
            rows = [r for r in rows if principal.can_see(r["scope"])]
            by_id = {r["id"]: r for r in rows}
            for start in range(0, len(rows), BATCH):
                chunk = rows[start : start + BATCH]
                versions: dict[int, list[dict[str, Any]]] = {}
                vq = (
                    select(lesson_versions)
                    .where(
                        lesson_versions.c.tenant_id == principal.tenant_id,
                        lesson_versions.c.lesson_id.in_([r["id"] for r in chunk]),
                    )
                    .order_by(lesson_versions.c.lesson_id, lesson_versions.c.version)
                )
                for v in conn.execute(vq).mappings():
                    versions.setdefault(v["lesson_id"], []).append(dict(v))
                for r in chunk:
                    lines.append(json.dumps(_export_lesson(r, versions.get(r["id"], []), by_id), ensure_ascii=False))
            if active_only:
                return
            tq = select(tombstones).where(tombstones.c.tenant_id == principal.tenant_id).order_by(tombstones.c.id)
            for t in conn.execute(tq).mappings():
                if scope is not None and t["scope"] != scope:
                    continue
                lines.append(json.dumps(shown(t, _TOMBSTONE_FIELDS, type="tombstone"), ensure_ascii=False))
            lq = select(links).where(links.c.tenant_id == principal.tenant_id).order_by(links.c.id)
            for link in conn.execute(lq).mappings():
                src, dst = by_id.get(link["src_id"]), by_id.get(link["dst_id"])
                if src is None or dst is None:
                    continue
                lines.append(
                    json.dumps(
                        {
                            "type": "link",
                            "src": {"scope": src["scope"], "key": src["key"]},
                            "dst": {"scope": dst["scope"], "key": dst["key"]},
                            "rel": link["rel"],
                            "created_at": _t(link["created_at"]),
                            "created_by": link["created_by"],
                        }
                    )
                )

        read_tx(self.store, principal, tx)
        return iter(lines)


# A tombstone in an export, in this order (``type`` names the record).
_TOMBSTONE_FIELDS = (
    "type", "content_hash", "identity", "scope", "key", "reason", "created_at", "created_by", "lifted_at",
    "lifted_by", "lift_reason",
)  # fmt: skip


def _export_lesson(r: dict[str, Any], versions: list[dict[str, Any]], by_id: dict[int, Any]) -> dict[str, Any]:
    sb = by_id.get(r["superseded_by"]) if r["superseded_by"] else None
    return {
        "type": "lesson",
        "scope": r["scope"],
        "key": r["key"],
        "origin": r["origin"],
        "author": r["author"],
        "url": r["url"],
        "archived_at": _t(r["archived_at"]),
        "superseded_by": {"scope": sb["scope"], "key": sb["key"]} if sb else None,
        "created_at": _t(r["created_at"]),
        "created_by": r["created_by"],
        "claimed": json.loads(r["claimed"]) if r.get("claimed") else None,
        "versions": [_export_version(v) for v in versions],
    }


def _export_version(v: dict[str, Any]) -> dict[str, Any]:
    """A version with its global identity (migration 0013), so a restore holds the same versions."""
    out = shown(v, VERSION_FIELDS, archived=bool(v["archived"]))
    out.update(uid=v["uid"], parents=json.loads(v["parents"]) if v["parents"] else [], human=bool(v["human"]))
    return out
