"""What each consolidation action writes, and how undo reverses it, inside the caller's transaction.

Every lesson change goes through ``mutate.apply`` (a version row and an audit row each, so
``cairn history`` shows it and ``cairn audit verify`` proves it); links carry an audit row each, as
``graph.link`` writes them. Nothing is hard-deleted: merged lessons are superseded and archived,
stale ones archived, a promotion creates a new candidate. Each effect returns what undo needs:
the versions it wrote, each lesson's prior values of the fields it changed, the links and sightings
it added and the lesson it created.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from cairn.core.lesson import HELD, SUPERSEDES
from cairn.core.principal import WRITE, Principal
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.service import audit, limits, paraphrase
from cairn.service.lessons import Lessons
from cairn.service.mutate import Change, apply, apply_many
from cairn.service.records import fetch, fetch_id, status
from cairn.service.tombstones import check_tombstones
from cairn.service.write_input import make_write
from cairn.store.schema import links, sightings

SOURCE_AGENT = "cairn consolidate"
CONTRADICTS = "contradicts"
DERIVED_FROM = "derived_from"


class Effects:
    """What one action wrote: ``written`` {id: version}, ``prior`` {id: {field: old value}},
    ``links`` [[src, dst, rel]], ``sessions`` {id: [session]}, ``created`` (a promotion's lesson)."""

    def __init__(self) -> None:
        self.written: dict[int, int] = {}
        self.prior: dict[int, dict[str, Any]] = {}
        self.links: list[list[Any]] = []
        self.sessions: dict[int, list[str]] = {}
        self.created: int | None = None

    def change(
        self,
        conn: Connection,
        acting: Principal,
        row: dict[str, Any],
        fields: dict[str, Any],
        action: str,
        now: datetime,
        detail: dict[str, Any],
    ) -> dict[str, Any]:
        """One lesson's next version with ``fields`` changed, remembering their prior values."""
        self.prior.setdefault(row["id"], {k: _plain(row[k]) for k in fields})
        out = apply(conn, acting, row, {**row, **fields}, action, now, detail=detail)
        self.written[row["id"]] = out["version"]
        return out

    def link(
        self,
        conn: Connection,
        acting: Principal,
        src: dict[str, Any],
        dst: dict[str, Any],
        rel: str,
        now: datetime,
        detail: dict[str, Any],
    ) -> None:  # noqa: E501
        exists = conn.execute(
            select(links.c.id).where(
                links.c.tenant_id == acting.tenant_id,
                links.c.src_id == src["id"],
                links.c.dst_id == dst["id"],
                links.c.rel == rel,
            )
        ).first()
        if exists:
            return
        conn.execute(
            insert(links).values(
                tenant_id=acting.tenant_id, src_id=src["id"], dst_id=dst["id"], rel=rel,
                created_at=now, created_by=acting.actor,
            )
        )  # fmt: skip
        if rel != SUPERSEDES:  # supersede's own link has no row of its own, as in lifecycle.supersede
            audit.record_lesson(
                conn, acting, "link", src, at=now,
                detail={**detail, "rel": rel, "to": {"scope": dst["scope"], "key": dst["key"]}},
            )  # fmt: skip
        self.links.append([src["id"], dst["id"], rel])

    def as_json(self) -> dict[str, Any]:
        return {
            "prior": {str(k): v for k, v in self.prior.items()},
            "links": self.links,
            "sessions": {str(k): v for k, v in self.sessions.items()},
            "created": self.created,
        }


def _plain(value: Any) -> Any:
    """A field's value as JSON holds it (the fields an action changes are counts, ids, trust or null)."""
    if isinstance(value, datetime):  # actions only read active lessons: archived_at was unset
        raise ValueError("consolidation changes only counts, trust and unset fields")
    return value


def merge(
    conn: Connection, acting: Principal, rows: list[dict[str, Any]], now: datetime, detail: dict[str, Any]
) -> Effects:
    """The keeper (``rows[0]``) supersedes the others: their recurrences and sessions carry over to it,
    their ``derived_from`` links are copied to it, and they are superseded and archived."""
    fx = Effects()
    keeper, others = rows[0], rows[1:]
    for r in rows:
        acting.require(WRITE, r["scope"])
    held = set(_sessions(conn, acting, keeper["id"]))
    added: list[str] = []
    for other in others:
        for session, seen_at in _sessions(conn, acting, other["id"]).items():
            if session not in held:
                conn.execute(
                    insert(sightings).values(
                        tenant_id=acting.tenant_id, lesson_id=keeper["id"], session=session, seen_at=seen_at
                    )
                )
                held.add(session)
                added.append(session)
    fx.sessions[keeper["id"]] = added
    merged = [{"scope": o["scope"], "key": o["key"]} for o in others]
    seen = keeper["seen_count"] + sum(o["seen_count"] for o in others)
    keeper = fx.change(conn, acting, keeper, {"seen_count": seen}, "merge", now, {**detail, "merged": merged})
    by = {"scope": keeper["scope"], "key": keeper["key"]}
    for other in others:
        # Superseded by the keeper and archived with the reason, in one version: both say "retired
        # by this merge"; undo clears both.
        fx.change(
            conn, acting, other, {"superseded_by": keeper["id"], "archived_at": now}, "superseded", now,
            {**detail, "by": by},
        )  # fmt: skip
        fx.link(conn, acting, keeper, other, SUPERSEDES, now, detail)
        for (dst_id,) in conn.execute(
            select(links.c.dst_id).where(
                links.c.tenant_id == acting.tenant_id, links.c.src_id == other["id"], links.c.rel == DERIVED_FROM
            )
        ).all():
            dst = fetch_id(conn, acting, dst_id)
            if dst is not None and dst["id"] != keeper["id"]:
                fx.link(conn, acting, keeper, dst, DERIVED_FROM, now, detail)
    return fx


def promote(
    conn: Connection,
    acting: Principal,
    rows: list[dict[str, Any]],
    target: str,
    now: datetime,
    detail: dict[str, Any],
    settings: Settings,
    lessons: Lessons,
) -> Effects:
    """A new candidate at ``target`` with the best source's text, linked ``derived_from`` to every source."""
    fx = Effects()
    best = rows[0]
    acting.require(WRITE, target)
    if fetch(conn, acting, target, best["key"]) is not None:
        raise CairnError("CONFLICT", f"{target} {best['key']} already holds a lesson")
    inp = make_write(
        acting, target, best["key"], best["value"], tags=json.loads(best["tags"]), kind=best["kind"],
        source_agent=SOURCE_AGENT, trigger=f"consolidation run {detail['consolidation']}", origin="consolidation",
    )  # fmt: skip
    check_tombstones(conn, acting, inp.value, inp.scope, inp.key, chash=inp.content_hash)
    limits.check_write(conn, settings, acting, inp.value, creating=True)
    state = lessons.new_state(acting, inp, inp.content_hash, now, candidate=True)
    sources = [{"scope": r["scope"], "key": r["key"]} for r in rows]
    made = {**detail, "derived_from": sources}
    hold = paraphrase.hold_for(conn, acting, inp.value)
    if hold is not None:  # restates forgotten content: held out of every read, as any write would be
        state["trust"] = HELD
        made.update(hold.detail())
    created = apply(conn, acting, None, state, "create", now, detail=made)
    fx.created = created["id"]
    fx.written[created["id"]] = created["version"]
    for r in rows:
        fx.link(conn, acting, created, r, DERIVED_FROM, now, detail)
    return fx


def flag_contradiction(
    conn: Connection, acting: Principal, rows: list[dict[str, Any]], now: datetime, detail: dict[str, Any]
) -> Effects:
    """A ``contradicts`` link, and both lessons into the review queue (a verified one becomes a candidate
    again: a person decides which stands). Never resolved here."""
    fx = Effects()
    a, b = rows
    for r in rows:
        acting.require(WRITE, r["scope"])
    fx.link(conn, acting, a, b, CONTRADICTS, now, detail)
    for row, other in ((a, b), (b, a)):
        if row["trust"] == "verified":
            fx.change(
                conn, acting, row, {"trust": "candidate"}, "flag-contradiction", now,
                {**detail, "contradicts": {"scope": other["scope"], "key": other["key"]}},
            )  # fmt: skip
    return fx


def archive_stale(
    conn: Connection, acting: Principal, rows: list[dict[str, Any]], now: datetime, detail: dict[str, Any]
) -> Effects:
    """Archive every stale candidate of the action in one batch (a version and an audit row each)."""
    fx = Effects()
    for row in rows:
        acting.require(WRITE, row["scope"])
        fx.prior[row["id"]] = {"archived_at": None}
    changes = [Change(row, {**row, "archived_at": now}, "archive", detail) for row in rows]
    for out in apply_many(conn, acting, changes, now):
        fx.written[out["id"]] = out["version"]
    return fx


def undo(
    conn: Connection,
    acting: Principal,
    written: dict[str, int],
    effects: dict[str, Any],
    now: datetime,
    detail: dict[str, Any],
) -> list[dict[str, Any]]:
    """Reverse one applied action: each lesson it wrote goes back to its prior values (only if nothing
    changed it since: its version is still the one written), the created lesson is archived, the
    links and sightings it added are removed. Returns what could not be reversed, with the reason."""
    left: list[dict[str, Any]] = []
    created = effects.get("created")
    for lesson_id, version in sorted(written.items(), key=lambda kv: int(kv[0])):
        row = fetch_id(conn, acting, int(lesson_id))
        if row is None:
            left.append({"lesson": int(lesson_id), "reason": "erased since"})
            continue
        where = {"lesson": int(lesson_id), "scope": row["scope"], "key": row["key"]}  # named for a person
        if row["version"] != version:
            left.append({**where, "reason": f"changed since (version {version} → {row['version']})"})
            continue
        acting.require(WRITE, row["scope"])
        if created is not None and int(lesson_id) == created:
            apply(conn, acting, row, {**row, "archived_at": now}, "undo", now, detail=detail)
            continue
        prior = effects.get("prior", {}).get(str(lesson_id), {})
        state = {**row, **prior}
        if status(row, now) != "active" and status(state, now) == "active":
            try:  # content forgotten elsewhere meanwhile stays out, as restore does
                check_tombstones(conn, acting, row["value"], row["scope"], row["key"], chash=row["content_hash"])
            except CairnError as exc:
                left.append({**where, "reason": f"its content was forgotten since ({exc.code})"})
                continue
        apply(conn, acting, row, state, "undo", now, detail=detail)
    for src, dst, rel in effects.get("links", []):
        gone = conn.execute(
            delete(links).where(
                links.c.tenant_id == acting.tenant_id, links.c.src_id == src, links.c.dst_id == dst, links.c.rel == rel
            )
        ).rowcount
        src_row = fetch_id(conn, acting, src)
        if gone and src_row is not None and rel != SUPERSEDES:
            audit.record_lesson(conn, acting, "unlink", src_row, at=now, detail={**detail, "rel": rel, "to": dst})
    for lesson_id, sessions in effects.get("sessions", {}).items():
        if sessions:
            conn.execute(
                delete(sightings).where(
                    sightings.c.tenant_id == acting.tenant_id,
                    sightings.c.lesson_id == int(lesson_id),
                    sightings.c.session.in_(sessions),
                )
            )
    return left


def _sessions(conn: Connection, acting: Principal, lesson_id: int) -> dict[str, datetime]:
    rows = conn.execute(
        select(sightings.c.session, sightings.c.seen_at).where(
            sightings.c.tenant_id == acting.tenant_id, sightings.c.lesson_id == lesson_id
        )
    ).all()
    return {s: t for s, t in rows}
