"""The consolidation ledger's rows and the lessons as the planner reads them.

``service/consolidation.py`` runs the operations; this module holds what they read and write in
``consolidation_runs`` / ``consolidation_actions`` (migration 0011) and how a run and its actions are
shown (one shape for the CLI's JSON, the API and MCP), and the one read of the store a plan is
computed from (``snapshot``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection

from cairn.core import consolidation as core
from cairn.core.principal import Principal
from cairn.core.timeparse import format_time, utcnow
from cairn.errors import CairnError
from cairn.service import epoch, indexing
from cairn.service.consolidation_effects import CONTRADICTS
from cairn.service.records import active_clause
from cairn.store.schema import consolidation_actions, consolidation_runs, lessons, links, sightings

if TYPE_CHECKING:
    import numpy as np

    from cairn.service.rank_indexes import RankIndexes

ID_CHUNK = 5000  # ids per IN list (SQLite and Postgres both cap a statement's bound parameters)

LESSON_COLUMNS = (
    lessons.c.id, lessons.c.scope, lessons.c.key, lessons.c.value, lessons.c.kind, lessons.c.trust,
    lessons.c.archived_at, lessons.c.version, lessons.c.seen_count, lessons.c.helped_count,
    lessons.c.not_helped_count, lessons.c.created_at, lessons.c.updated_at,
)  # fmt: skip


@dataclass(frozen=True)
class Snapshot:
    """What a plan is computed from, read in one transaction."""

    records: list[core.Record]
    flagged: list[tuple[int, int]]
    epoch: int
    now: datetime
    taken: frozenset[tuple[str, str]] = frozenset()  # promotion targets' addresses held by inactive lessons


def snapshot(
    conn: Connection, principal: Principal, ranks: RankIndexes, ids: list[int] | None, scope: str | None
) -> Snapshot:
    """The active lessons the caller can see (all, or ``ids`` plus the lessons of ``scope``), with their
    vectors (from the ranking index's float16 copy: no second read of every vector), sighting counts,
    existing ``contradicts`` links and the tenant's deletion epoch, in the caller's one transaction."""
    model = indexing.configured_model()
    idx = ranks.get(principal.tenant_id)
    now = utcnow()
    ep = epoch.current(conn, principal.tenant_id)
    query = select(*LESSON_COLUMNS).where(lessons.c.tenant_id == principal.tenant_id, active_clause(now))
    if ids is not None:
        wanted = lessons.c.id.in_(ids)
        query = query.where(wanted if scope is None else wanted | (lessons.c.scope == scope))
    rows = [r for r in conn.execute(query.order_by(lessons.c.id)).mappings() if principal.can_see(r["scope"])]
    counts = dict(
        conn.execute(
            select(sightings.c.lesson_id, func.count())
            .where(sightings.c.tenant_id == principal.tenant_id)
            .group_by(sightings.c.lesson_id)
        ).all()
    )
    flagged = [
        (int(a), int(b))
        for a, b in conn.execute(
            select(links.c.src_id, links.c.dst_id).where(
                links.c.tenant_id == principal.tenant_id, links.c.rel == CONTRADICTS
            )
        ).all()
    ]
    from cairn.service.rank_index import rows_of  # numpy: only when a plan is made

    with idx.lock:
        idx.refresh(conn, model, vectors=True)
        arrays, order = idx.arrays, idx.id_order()
    vectors: dict[int, np.ndarray] = {}
    if rows and arrays.half.shape[1]:
        wanted_ids = [r["id"] for r in rows]
        at, found = rows_of(arrays, order, wanted_ids)
        held = [i for i, f in zip(wanted_ids, found, strict=True) if f]
        for i, pos in zip(held, at.tolist(), strict=True):
            if arrays.has_vec[pos]:
                vectors[i] = arrays.half[pos]
    records = [
        core.Record(
            id=r["id"],
            scope=r["scope"],
            key=r["key"],
            value=r["value"],
            kind=r["kind"],
            trust=r["trust"],
            archived=r["archived_at"] is not None,
            version=r["version"],
            seen_count=r["seen_count"],
            sessions=int(counts.get(r["id"], 0)),
            helped=r["helped_count"],
            not_helped=r["not_helped_count"],
            created_at=r["created_at"],
            updated_at=r["updated_at"],
            vector=vectors.get(r["id"]),
        )  # fmt: skip
        for r in rows
    ]
    # Addresses one rung up (repo::, project::) that an inactive lesson holds: the write path refuses
    # a promotion there (the address is taken), so the planner does not propose one.
    inactive = select(lessons.c.scope, lessons.c.key).where(
        lessons.c.tenant_id == principal.tenant_id,
        ~active_clause(now),
        lessons.c.scope.like("repo::%") | lessons.c.scope.like("project::%"),
    )
    taken = frozenset((s, k) for s, k in conn.execute(inactive).all() if principal.can_see(s))
    return Snapshot(records, flagged, ep, now, taken)


def runs(conn: Connection, principal: Principal, limit: int) -> dict[str, Any]:
    """The newest ``limit`` runs, each with how many of its actions are in each status."""
    found = conn.execute(
        select(consolidation_runs)
        .where(consolidation_runs.c.tenant_id == principal.tenant_id)
        .order_by(consolidation_runs.c.id.desc())
        .limit(limit)
    ).mappings()
    out = [dict(r) for r in found]
    counts: dict[int, Counter[str]] = {r["id"]: Counter() for r in out}
    if out:
        for run_id, st, n in conn.execute(
            select(consolidation_actions.c.run_id, consolidation_actions.c.status, func.count())
            .where(
                consolidation_actions.c.tenant_id == principal.tenant_id,
                consolidation_actions.c.run_id.in_(list(counts)),
            )
            .group_by(consolidation_actions.c.run_id, consolidation_actions.c.status)
        ).all():
            counts[run_id][st] = n
    return {"runs": [run_shown(r, counts[r["id"]]) for r in out]}


def show(conn: Connection, principal: Principal, run_id: int) -> dict[str, Any]:
    """One run and every action with its lessons (addresses while they exist), versions and reason."""
    found = run(conn, principal, run_id)
    acts = [
        dict(a)
        for a in conn.execute(
            select(consolidation_actions)
            .where(consolidation_actions.c.tenant_id == principal.tenant_id, consolidation_actions.c.run_id == run_id)
            .order_by(consolidation_actions.c.position)
        ).mappings()
    ]
    ids = {i for a in acts for i in json.loads(a["lesson_ids"])}
    ids |= {json.loads(a["effects"])["created"] for a in acts if a["effects"]} - {None}
    known = addresses(conn, principal, sorted(ids))
    return {
        "run": run_shown(found, Counter(a["status"] for a in acts)),
        "actions": [action_shown(a, known) for a in acts],
    }


def run(conn: Connection, principal: Principal, run_id: int) -> dict[str, Any]:
    row = (
        conn.execute(
            select(consolidation_runs).where(
                consolidation_runs.c.tenant_id == principal.tenant_id, consolidation_runs.c.id == run_id
            )
        )
        .mappings()
        .first()
    )
    if row is None:
        raise CairnError("NOT_FOUND", f"no consolidation run {run_id} (cairn consolidate runs lists them)")
    return dict(row)


def action(conn: Connection, principal: Principal, run_id: int, position: int) -> dict[str, Any] | None:
    row = (
        conn.execute(
            select(consolidation_actions).where(
                consolidation_actions.c.tenant_id == principal.tenant_id,
                consolidation_actions.c.run_id == run_id,
                consolidation_actions.c.position == position,
            )
        )
        .mappings()
        .first()
    )
    return dict(row) if row else None


def set_run(principal: Principal, run_id: int, **values: Any) -> Any:
    return (
        update(consolidation_runs)
        .where(consolidation_runs.c.tenant_id == principal.tenant_id, consolidation_runs.c.id == run_id)
        .values(**values)
    )


def set_action(act: dict[str, Any], now: datetime, **values: Any) -> Any:
    return (
        update(consolidation_actions)
        .where(consolidation_actions.c.tenant_id == act["tenant_id"], consolidation_actions.c.id == act["id"])
        .values(updated_at=now, **values)
    )


def action_row(
    principal: Principal, run_id: int, position: int, p: core.Proposal, versions: dict[int, int], now: datetime
) -> dict[str, Any]:
    return {
        "tenant_id": principal.tenant_id,
        "run_id": run_id,
        "position": position,
        "kind": p.kind,
        "lesson_ids": json.dumps(list(p.lesson_ids)),
        "versions_read": json.dumps({str(i): versions[i] for i in p.lesson_ids}),
        "versions_written": None,
        "effects": None,
        "keep_id": p.keep_id,
        "target_scope": p.target_scope,
        "reason": p.reason,
        "status": "planned",
        "status_reason": None,
        "recomputed": False,
        "updated_at": now,
    }


def params_json(params: core.Params) -> dict[str, Any]:
    return {"scopes": list(params.scopes), "stale_days": params.stale_days}


def params_from_json(text: str) -> core.Params:
    raw = json.loads(text)
    return core.Params(scopes=tuple(raw.get("scopes") or ()), stale_days=int(raw["stale_days"]))


def changed_words(change: dict[str, Any], row: dict[str, Any] | None) -> str:
    name = row["key"] if row is not None else f"lesson {change['lesson']}"
    now = "gone" if change["now"] is None else f"v{change['now']}"
    return f"{name} v{change['read']} → {now}"


def addresses(conn: Connection, principal: Principal, ids: list[int]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for start in range(0, len(ids), ID_CHUNK):  # a plan of a large store names more ids than one IN may bind
        rows = conn.execute(
            select(lessons.c.id, lessons.c.scope, lessons.c.key, lessons.c.version).where(
                lessons.c.tenant_id == principal.tenant_id, lessons.c.id.in_(ids[start : start + ID_CHUNK])
            )
        ).all()
        out.update({int(i): {"scope": s, "key": k, "version": v} for i, s, k, v in rows})
    return out


def _t(value: datetime | None) -> str | None:
    return format_time(value) if value is not None else None


def run_shown(run: dict[str, Any], counts: Counter[str]) -> dict[str, Any]:
    return {
        "id": int(run["id"]),
        "started_at": _t(run["started_at"]),
        "finished_at": _t(run["finished_at"]),
        "parameters": json.loads(run["parameters"]),
        "mode": run["mode"],
        "status": run["status"],
        "deletion_epoch": run["deletion_epoch"],
        "actor": run["actor"],
        "actions": {s: counts.get(s, 0) for s in core.ACTION_STATUSES},
    }


def lesson_ref(lesson_id: int, addresses: dict[int, dict[str, Any]], **more: Any) -> dict[str, Any]:
    """A lesson an action names: its id, and its address while the lesson exists (purge erases it)."""
    found = addresses.get(lesson_id)
    return {"id": lesson_id, "scope": found and found["scope"], "key": found and found["key"], **more}


def action_shown(a: dict[str, Any], addresses: dict[int, dict[str, Any]]) -> dict[str, Any]:
    read = json.loads(a["versions_read"])
    written = json.loads(a["versions_written"] or "{}")
    fx = json.loads(a["effects"] or "{}")
    created = fx.get("created")
    return {
        "position": a["position"],
        "kind": a["kind"],
        "status": a["status"],
        "status_reason": a["status_reason"],
        "recomputed": bool(a["recomputed"]),
        "reason": a["reason"],
        "lessons": [
            lesson_ref(i, addresses, version_read=read[str(i)], version_written=written.get(str(i)))
            for i in json.loads(a["lesson_ids"])
        ],
        "keep": lesson_ref(a["keep_id"], addresses) if a["keep_id"] is not None else None,
        "target_scope": a["target_scope"],
        "created": lesson_ref(created, addresses, version_written=written.get(str(created))) if created else None,
    }


def proposal_shown(
    position: int, p: core.Proposal, by_id: dict[int, core.Record], addresses: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    return {
        "position": position,
        "kind": p.kind,
        "status": "planned",
        "status_reason": None,
        "recomputed": False,
        "reason": p.reason,
        "lessons": [
            lesson_ref(i, addresses, version_read=by_id[i].version, version_written=None) for i in p.lesson_ids
        ],
        "keep": lesson_ref(p.keep_id, addresses) if p.keep_id is not None else None,
        "target_scope": p.target_scope,
        "created": None,
    }
