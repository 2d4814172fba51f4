"""A store's change feed: its audit rows after a cursor, as sync events (``core/sync.py``).

The audit log is already a change feed: every mutation writes the tenant's next ``seq`` in its own
transaction. A page of rows becomes events with a fixed number of queries whatever its size (the
rows, the version rows they wrote, their lessons' provenance, the tombstones they name, the live
tombstones), so paging through 60,000 lessons costs a few queries per page, never one per lesson.

What never leaves a store: the text of forgotten content. A version whose content (or address) a
live tombstone holds is left out of the feed; the tombstone travels instead, so the peer forgets
the content too without ever receiving it. Erased (purged) versions are gone from the tables, so
their events are empty; the purge travels as an event of its own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, tuple_
from sqlalchemy.engine import Connection, RowMapping

from cairn.core.lesson import HELD
from cairn.core.principal import Principal
from cairn.core.timeparse import format_time
from cairn.store.schema import lesson_versions, lessons, tombstones

if TYPE_CHECKING:
    from cairn.core.sync import SyncEvent

CHUNK = 400  # ids per IN list


def _t(value: Any) -> str | None:
    return format_time(value) if value is not None else None


def origin_of(detail: dict[str, Any], me: str) -> tuple[str, str | None, str | None]:
    """(origin store, the peer it arrived from, its original uid) of the event a ledger row wrote."""
    sync = detail.get("sync")
    if isinstance(sync, dict):
        return str(sync.get("origin") or me), sync.get("peer"), sync.get("uid")
    return me, None, None


def build_events(
    conn: Connection, principal: Principal, me: str, rows: list[RowMapping], exclude_origin: str | None
) -> list[SyncEvent]:
    """The events of ``rows`` (audit rows in ``seq`` order) that ``principal`` may see, in order."""
    from cairn.core.sync import SyncEvent  # pydantic: loaded when a sync runs, not with the service

    tenant = principal.tenant_id
    details = [json.loads(r["detail"]) if r["detail"] else {} for r in rows]
    pairs: list[tuple[int, int]] = []
    for r in rows:
        if r["lesson_id"] is not None and r["version_after"] is not None:
            pairs.extend((r["lesson_id"], v) for v in _written(r))
    versions: dict[tuple[int, int], dict[str, Any]] = {}
    for start in range(0, len(pairs), CHUNK):
        chunk = pairs[start : start + CHUNK]
        q = select(lesson_versions).where(
            lesson_versions.c.tenant_id == tenant,
            tuple_(lesson_versions.c.lesson_id, lesson_versions.c.version).in_(chunk),
        )
        for v in conn.execute(q).mappings():
            versions[(v["lesson_id"], v["version"])] = dict(v)
    lesson_ids = sorted({lid for lid, _ in pairs})
    provenance: dict[int, dict[str, Any]] = {}
    for start in range(0, len(lesson_ids), CHUNK):
        q = select(
            lessons.c.id,
            lessons.c.origin,
            lessons.c.author,
            lessons.c.url,
            lessons.c.created_at,
            lessons.c.created_by,
            lessons.c.claimed,
        ).where(lessons.c.tenant_id == tenant, lessons.c.id.in_(lesson_ids[start : start + CHUNK]))
        for p in conn.execute(q).mappings():
            provenance[p["id"]] = dict(p)
    tomb_ids = sorted(
        {
            d["tombstone_id"]
            for r, d in zip(rows, details, strict=True)
            if r["action"] in _TOMBSTONE_ROWS and d.get("tombstone_id")
        }
    )
    named: dict[int, dict[str, Any]] = {}
    for start in range(0, len(tomb_ids), CHUNK):
        q = select(tombstones).where(
            tombstones.c.tenant_id == tenant, tombstones.c.id.in_(tomb_ids[start : start + CHUNK])
        )
        for t in conn.execute(q).mappings():
            named[t["id"]] = dict(t)
    live = conn.execute(
        select(tombstones.c.content_hash, tombstones.c.scope, tombstones.c.key).where(
            tombstones.c.tenant_id == tenant, tombstones.c.lifted_at.is_(None)
        )
    ).all()
    forgotten_hashes = {t.content_hash for t in live}
    forgotten_addresses = {(t.scope, t.key) for t in live}

    events: list[SyncEvent] = []
    for r, detail in zip(rows, details, strict=True):
        origin, via, original_uid = origin_of(detail, me)
        if exclude_origin is not None and exclude_origin in (origin, via):
            continue  # the peer has it: it came from there
        for kind, uid, body, scopes in _row_events(r, detail, versions, provenance, named):
            if principal.scope_limited and not all(principal.can_see(s) for s in scopes):
                continue
            if kind == "version" and (
                body["content_hash"] in forgotten_hashes
                or (body["scope"], body["key"]) in forgotten_addresses
                or body["trust"] == HELD  # restates forgotten content: stays here until a person decides
            ):
                continue
            events.append(
                SyncEvent(uid=uid or original_uid or f"{me}:{r['seq']}", kind=kind, origin_store=origin, body=body)  # type: ignore[arg-type]
            )
    return events


_TOMBSTONE_ROWS = ("forget", "import-tombstone", "unforget")


def _written(r: RowMapping) -> range:
    """The version numbers a ledger row wrote: one for a mutation, the whole history for a restore."""
    return range((r["version_before"] or 0) + 1, r["version_after"] + 1)


def _row_events(
    r: RowMapping,
    detail: dict[str, Any],
    versions: dict[tuple[int, int], dict[str, Any]],
    provenance: dict[int, dict[str, Any]],
    named: dict[int, dict[str, Any]],
) -> list[tuple[str, str | None, dict[str, Any], tuple[str, ...]]]:
    """(kind, uid or None for the row's own, body, scopes it touches) for each event of one row."""
    out: list[tuple[str, str | None, dict[str, Any], tuple[str, ...]]] = []
    action = r["action"]
    if r["lesson_id"] is not None and r["version_after"] is not None:
        for n in _written(r):
            v = versions.get((r["lesson_id"], n))
            if v is None:  # erased by a purge since: its content is gone everywhere
                continue
            body = version_body(v, provenance.get(r["lesson_id"]), detail if action == "superseded" else None)
            out.append(("version", v["uid"], body, (v["scope"],)))
    if action in ("forget", "import-tombstone") and detail.get("tombstone_id") in named:
        t = named[detail["tombstone_id"]]
        body = {
            "content_hash": t["content_hash"],
            "identity": t["identity"],
            "scope": t["scope"],
            "key": t["key"],
            "reason": t["reason"],
            "created_at": _t(t["created_at"]),
            "created_by": t["created_by"],
        }
        out.append(("tombstone", None, body, (t["scope"],)))
    elif action == "unforget" and r["scope"] is not None:
        body = {
            "content_hash": r["hash_before"],
            "scope": r["scope"],
            "key": r["key"],
            "reason": detail.get("reason"),
            "lifted_at": _t(r["at"]),
            "lifted_by": r["actor"],
        }
        out.append(("unforget", None, body, (r["scope"],)))
    elif action == "purge" and r["scope"] is not None and r["hash_before"] is not None:
        body = {"scope": r["scope"], "key": r["key"], "content_hash": r["hash_before"], "sweep": detail.get("sweep")}
        out.append(("purge", None, body, (r["scope"],)))
    elif action == "link" and isinstance(detail.get("to"), dict) and r["scope"] is not None:
        to = detail["to"]
        body = {"src": {"scope": r["scope"], "key": r["key"]}, "dst": to, "rel": detail.get("rel")}
        out.append(("link", None, body, (r["scope"], str(to.get("scope")))))
    return out


def version_body(v: dict[str, Any], lesson: dict[str, Any] | None, superseded: dict[str, Any] | None) -> dict[str, Any]:
    """One version as an event carries it: the version, and the lesson's provenance for a store that lacks it."""
    body = {
        "uid": v["uid"],
        "parents": json.loads(v["parents"]) if v["parents"] else [],
        "human": bool(v["human"]),
        "action": v["action"],
        "scope": v["scope"],
        "key": v["key"],
        "value": v["value"],
        "content_hash": v["content_hash"],
        "tags": json.loads(v["tags"]),
        "kind": v["kind"],
        "source_agent": v["source_agent"],
        "trigger": v["trigger"],
        "trust": v["trust"],
        "archived": bool(v["archived"]),
        "seen_count": v["seen_count"],
        "helped_count": v["helped_count"],
        "not_helped_count": v["not_helped_count"],
        "valid_from": _t(v["valid_from"]),
        "valid_to": _t(v["valid_to"]),
        "expires_at": _t(v["expires_at"]),
        "recorded_at": _t(v["recorded_at"]),
        "actor": v["actor"],
        "session": v["session"],
    }
    if lesson is not None:
        body["lesson"] = {
            "origin": lesson["origin"],
            "author": lesson["author"],
            "url": lesson["url"],
            "created_at": _t(lesson["created_at"]),
            "created_by": lesson["created_by"],
            "claimed": json.loads(lesson["claimed"]) if lesson["claimed"] else None,
        }
    if superseded is not None and isinstance(superseded.get("by"), dict):
        body["superseded_by"] = superseded["by"]
    return body
