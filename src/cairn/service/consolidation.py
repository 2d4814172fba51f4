"""Consolidation runs: plan, apply one action per transaction under two guards, resume, undo.

``core/consolidation.py`` decides what to propose; this module reads the tenant's lessons for it,
keeps every run as a ledger (``consolidation_runs``, ``consolidation_actions``: migration 0011) and
applies it:

* **plan** reads the active lessons the caller can see (their vectors from the ranking index, after
  the embedding queue is drained) in one read transaction, with the tenant's deletion epoch, and
  stores the run and its planned actions. ``dry_run`` stores nothing: the same plan, answered only
  (it needs only the read permission).
* **apply** takes each planned action in its own write transaction (``service/tx.py``). Inside it:
  the **deletion epoch** must not have moved since the run read the store (a forget, purge or
  erasure since: the action is skipped, nothing derived is written); every lesson the action read
  must still be at the version it read — the **source-revision guard** — else the action is
  discarded, recomputed once from the lessons' current state (a new action, ``recomputed``), and
  that one is skipped if its sources change again. Each guard that fires writes a
  ``consolidation-guard`` audit row naming itself. The action's status and its writes commit
  together, so a run killed at any point is finished by ``resume`` without applying anything twice.
* **undo** reverses a run's applied actions in one transaction (``consolidation_effects.undo``),
  each change a new audited version, never a rewrite of history.

Every lesson change goes through ``mutate.apply``: history shows it, ``audit verify`` proves it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, insert, select
from sqlalchemy.engine import Connection

from cairn.core import consolidation as core
from cairn.core.lesson import MAX_PAGE
from cairn.core.principal import READ, WRITE, Principal
from cairn.core.scope import validate_scope
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.service import audit, epoch
from cairn.service import consolidation_effects as effects
from cairn.service import consolidation_rows as ledger
from cairn.service.embeddings import Embeddings
from cairn.service.lessons import Lessons
from cairn.service.records import fetch_id, status
from cairn.service.tx import read_tx, write_tx
from cairn.store.dialect import ONE_ROW
from cairn.store.engine import Store
from cairn.store.schema import consolidation_actions, consolidation_runs

if TYPE_CHECKING:
    from cairn.service.rank_indexes import RankIndexes

GUARD_ACTION = "consolidation-guard"  # the audit row a guard writes when it fires
REVISION_GUARD = "source_revision"  # the same name the gateway's extraction gives its revision guard
PLAN_ACTION = "consolidate-plan"
UNDO_ACTION = "consolidate-undo"


def _refuse_unplanned(conn: Connection, acting: Principal, run_id: int, positions: list[int]) -> None:
    """Refuse positions that are not planned actions of the run: ``NOT_FOUND`` for a position the run
    does not have, ``CONFLICT`` naming the status (and why) for one already applied, dropped, skipped
    or discarded, which only a new plan can propose again."""
    if not positions:
        return
    missing = [p for p in positions if ledger.action(conn, acting, run_id, p) is None]
    if missing:
        raise CairnError(
            "NOT_FOUND",
            f"run {run_id} has no action at position {', '.join(map(str, missing))} (cairn consolidate show {run_id})",
        )
    done = [ledger.action(conn, acting, run_id, p) for p in positions]
    said = "; ".join(
        f"action {a['position']} is {a['status']}" + (f" ({a['status_reason']})" if a["status_reason"] else "")
        for a in done
        if a is not None
    )
    raise CairnError("CONFLICT", f"run {run_id}: {said}; only planned actions apply or drop (plan again for new ones)")


@dataclass(eq=False, repr=False)
class Consolidation:
    """Consolidation runs over one store; ``before_action`` is a test hook (called with each action's
    position before its transaction, to interleave a change)."""

    store: Store
    settings: Settings
    lessons: Lessons
    embeddings: Embeddings
    ranks: RankIndexes
    before_action: Callable[[int], None] | None = None

    # -- planning -------------------------------------------------------------------------------
    def _params(self, scopes: list[str] | tuple[str, ...] | None, stale_days: int | None) -> core.Params:
        chosen = tuple(dict.fromkeys(validate_scope(s) for s in scopes or ()))
        days = self.settings.consolidate_stale_days if stale_days is None else stale_days
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= core.MAX_STALE_DAYS:
            raise CairnError("INVALID_INPUT", f"stale_days must be a whole number from 1 to {core.MAX_STALE_DAYS}")
        return core.Params(scopes=chosen, stale_days=days)

    def _read(self, principal: Principal, ids: list[int] | None = None, scope: str | None = None) -> ledger.Snapshot:
        """The active lessons the caller can see (all, or ``ids`` plus the lessons of ``scope``) as the
        planner reads them, after the embedding queue is drained (vectors of every current text)."""
        self.embeddings.drain_embeddings(principal)
        return read_tx(self.store, principal, lambda conn: ledger.snapshot(conn, principal, self.ranks, ids, scope))

    def consolidate_preview(
        self, principal: Principal, *, scopes: list[str] | None = None, stale_days: int | None = None
    ) -> dict[str, Any]:
        """The plan consolidation would make now, stored nowhere (the read permission suffices)."""
        return self.consolidate_plan(principal, scopes=scopes, stale_days=stale_days, dry_run=True)

    def consolidate_plan(
        self,
        principal: Principal,
        *,
        scopes: list[str] | None = None,
        stale_days: int | None = None,
        dry_run: bool = False,
        mode: str = "plan",
    ) -> dict[str, Any]:
        """Compute a plan: every proposed action with its lessons and reason. Stored as a run waiting
        for a person (``mode`` plan) unless ``dry_run``, which stores nothing and needs only read."""
        principal.require(READ if dry_run else WRITE)
        if mode not in core.RUN_MODES:
            raise CairnError("INVALID_INPUT", f"mode must be one of {', '.join(core.RUN_MODES)}; got {mode!r}")
        params = self._params(scopes, stale_days)
        snap = self._read(principal)
        proposals = core.plan(snap.records, snap.now, params, flagged=snap.flagged, taken=snap.taken)
        if dry_run:
            by_id = {r.id: r for r in snap.records}
            addresses = {r.id: {"scope": r.scope, "key": r.key} for r in snap.records}
            return {
                "run": None,
                "dry_run": True,
                "parameters": ledger.params_json(params),
                "actions": [ledger.proposal_shown(n, p, by_id, addresses) for n, p in enumerate(proposals, start=1)],
            }
        run_id = self._store(principal, params, snap, proposals, mode)
        return self.consolidate_show(principal, run_id)

    def _store(
        self,
        principal: Principal,
        params: core.Params,
        snap: ledger.Snapshot,
        proposals: list[core.Proposal],
        mode: str,
    ) -> int:
        versions = {r.id: r.version for r in snap.records}

        def tx(conn: Connection, acting: Principal) -> int:
            now = utcnow()
            run_id = conn.execute(
                insert(consolidation_runs).values(
                    tenant_id=acting.tenant_id,
                    started_at=snap.now,
                    parameters=json.dumps(ledger.params_json(params)),
                    mode=mode,
                    status="applying" if mode == "apply" else "planned",
                    deletion_epoch=snap.epoch,
                    actor=acting.actor,
                )  # fmt: skip
            ).inserted_primary_key[0]
            rows = [ledger.action_row(acting, run_id, n, p, versions, now) for n, p in enumerate(proposals, start=1)]
            if rows:
                conn.execute(insert(consolidation_actions), rows)
            kinds = Counter(p.kind for p in proposals)
            audit.record(
                conn, acting, PLAN_ACTION, at=now,
                detail={"consolidation": run_id, "mode": mode, "actions": dict(kinds), **ledger.params_json(params)},
            )  # fmt: skip
            return int(run_id)

        return write_tx(self.store, principal, tx)

    # -- applying -------------------------------------------------------------------------------
    def consolidate_apply(
        self,
        principal: Principal,
        run_id: int | None = None,
        *,
        scopes: list[str] | None = None,
        stale_days: int | None = None,
        positions: list[int] | None = None,
    ) -> dict[str, Any]:
        """Apply a stored run's planned actions (all, or those at ``positions``); without ``run_id``,
        plan now and apply the whole plan. Each action is its own transaction."""
        principal.require(WRITE)
        if run_id is None:
            if positions:
                raise CairnError("INVALID_INPUT", "positions name actions of a stored run: give its run id too")
            planned = self.consolidate_plan(principal, scopes=scopes, stale_days=stale_days, mode="apply")
            run_id = planned["run"]["id"]
        elif scopes or stale_days is not None:
            raise CairnError("INVALID_INPUT", "a stored run keeps the parameters it was planned with")
        return self._apply_run(principal, int(run_id), positions)

    def consolidate_resume(self, principal: Principal) -> dict[str, Any]:
        """Finish the newest run whose apply was interrupted (status ``applying``), exactly once."""
        principal.require(WRITE)

        def tx(conn: Connection) -> int | None:
            return conn.execute(
                select(consolidation_runs.c.id)
                .where(consolidation_runs.c.tenant_id == principal.tenant_id, consolidation_runs.c.status == "applying")
                .order_by(consolidation_runs.c.id.desc())
                .limit(ONE_ROW)
            ).scalar()

        run_id = read_tx(self.store, principal, tx)
        if run_id is None:
            return {"run": None, "actions": [], "note": "no interrupted run to resume"}
        return self._apply_run(principal, int(run_id), None)

    def _apply_run(self, principal: Principal, run_id: int, positions: list[int] | None) -> dict[str, Any]:
        every = positions is None

        def start(conn: Connection, acting: Principal) -> list[int]:
            run = ledger.run(conn, acting, run_id)
            if run["status"] == "undone":
                raise CairnError("CONFLICT", f"consolidation run {run_id} was undone; plan a new one")
            if every and run["status"] == "planned":
                conn.execute(ledger.set_run(acting, run_id, status="applying"))
            query = select(consolidation_actions.c.position).where(
                consolidation_actions.c.tenant_id == acting.tenant_id,
                consolidation_actions.c.run_id == run_id,
                consolidation_actions.c.status == "planned",
            )
            pending = [int(p) for p in conn.execute(query.order_by(consolidation_actions.c.position)).scalars()]
            if positions is not None:
                _refuse_unplanned(conn, acting, run_id, sorted(set(positions) - set(pending)))
                pending = [p for p in pending if p in set(positions)]
            return pending

        for position in write_tx(self.store, principal, start):
            if self.before_action is not None:
                self.before_action(position)
            if self._apply_one(principal, run_id, position) == "recompute":
                again = self._recompute(principal, run_id, position)
                if again is not None:
                    if self.before_action is not None:
                        self.before_action(again)
                    self._apply_one(principal, run_id, again)
        self._finish(principal, run_id)
        return self.consolidate_show(principal, run_id)

    def _finish(self, principal: Principal, run_id: int) -> None:
        def tx(conn: Connection, acting: Principal) -> None:
            run = ledger.run(conn, acting, run_id)
            left = conn.execute(
                select(func.count()).where(
                    consolidation_actions.c.tenant_id == acting.tenant_id,
                    consolidation_actions.c.run_id == run_id,
                    consolidation_actions.c.status == "planned",
                )
            ).scalar_one()
            if not left and run["status"] in ("planned", "applying"):
                conn.execute(ledger.set_run(acting, run_id, status="finished", finished_at=utcnow()))

        write_tx(self.store, principal, tx)

    def _apply_one(self, principal: Principal, run_id: int, position: int) -> str:
        """One action in one transaction: guards, then its writes and its status together."""

        def tx(conn: Connection, acting: Principal) -> str:
            act = ledger.action(conn, acting, run_id, position)
            if act is None or act["status"] != "planned":
                return "done"  # applied (or settled) by an earlier, interrupted attempt
            run = ledger.run(conn, acting, run_id)
            now = utcnow()
            kind = act["kind"]
            detail = {"consolidation": run_id, "action": position, "kind": kind}
            if not epoch.unchanged(conn, acting.tenant_id, run["deletion_epoch"]):
                audit.record(
                    conn, acting, GUARD_ACTION, at=now,
                    detail={**detail, "guard": epoch.GUARD, "discarded": kind, "then": "skip"},
                )  # fmt: skip
                why = (
                    "content was forgotten, purged or erased since this run read the store: it writes nothing "
                    "derived from it (plan again: cairn consolidate)"
                )
                conn.execute(ledger.set_action(act, now, status="skipped", status_reason=why))
                return "skipped"
            ids = json.loads(act["lesson_ids"])
            read = {int(k): v for k, v in json.loads(act["versions_read"]).items()}
            rows = [fetch_id(conn, acting, i) for i in ids]
            changed = [
                {"lesson": i, "read": read[i], "now": None if r is None else r["version"]}
                for i, r in zip(ids, rows, strict=True)
                if r is None or r["version"] != read[i]
            ]
            if changed:
                then = "skip" if act["recomputed"] else "recompute"
                audit.record(
                    conn, acting, GUARD_ACTION, at=now,
                    detail={**detail, "guard": REVISION_GUARD, "discarded": kind, "then": then, "changed": changed},
                )  # fmt: skip
                by_id = {r["id"]: r for r in rows if r is not None}
                names = ", ".join(ledger.changed_words(c, by_id.get(c["lesson"])) for c in changed)
                if then == "skip":
                    why = f"its lessons changed again since it was recomputed ({names})"
                    conn.execute(ledger.set_action(act, now, status="skipped", status_reason=why))
                    return "skipped"
                why = f"its lessons changed since the plan ({names}); recomputed from their current state"
                conn.execute(ledger.set_action(act, now, status="discarded", status_reason=why))
                return "recompute"
            live = [r for r in rows if r is not None and status(r, now) == "active"]
            if len(live) != len(rows):
                why = "a lesson it read is no longer active"
                conn.execute(ledger.set_action(act, now, status="skipped", status_reason=why))
                return "skipped"
            detail["reason"] = act["reason"]
            try:
                with conn.begin_nested():
                    fx = self._effect(conn, acting, kind, live, act, now, detail)
            except CairnError as exc:  # a permission, a tombstone or a limit: this action, not the run
                why = f"{exc.code}: {exc.message}"
                conn.execute(ledger.set_action(act, now, status="skipped", status_reason=why))
                return "skipped"
            conn.execute(
                ledger.set_action(
                    act,
                    now,
                    status="applied",
                    status_reason=None,
                    versions_written=json.dumps({str(k): v for k, v in fx.written.items()}),
                    effects=json.dumps(fx.as_json()),
                )  # fmt: skip
            )
            return "applied"

        return write_tx(self.store, principal, tx)

    def _effect(
        self,
        conn: Connection,
        acting: Principal,
        kind: str,
        rows: list[dict[str, Any]],
        act: dict[str, Any],
        now: datetime,
        detail: dict[str, Any],
    ) -> effects.Effects:
        if kind == "merge":
            return effects.merge(conn, acting, rows, now, detail)
        if kind == "promote":
            return effects.promote(conn, acting, rows, act["target_scope"], now, detail, self.settings, self.lessons)
        if kind == "flag-contradiction":
            return effects.flag_contradiction(conn, acting, rows, now, detail)
        if kind == "archive-stale":
            return effects.archive_stale(conn, acting, rows, now, detail)
        raise CairnError("INVALID_INPUT", f"unknown action kind {kind!r}")

    def _recompute(self, principal: Principal, run_id: int, position: int) -> int | None:
        """The discarded action at ``position``, proposed again from its lessons' current state: the
        position of the new (``recomputed``) action, or None when they call for nothing now."""

        def load(conn: Connection) -> tuple[dict[str, Any], dict[str, Any]]:
            act = ledger.action(conn, principal, run_id, position)
            assert act is not None
            return act, ledger.run(conn, principal, run_id)

        act, run = read_tx(self.store, principal, load)
        params = ledger.params_from_json(run["parameters"])
        ids = json.loads(act["lesson_ids"])
        snap = self._read(principal, ids, act["target_scope"])
        sources = [r for r in snap.records if r.id in set(ids)]
        above = [r for r in snap.records if r.id not in set(ids)]
        proposal = core.recompute(
            act["kind"], sources, snap.now, params, everything=above, flagged=snap.flagged, taken=snap.taken
        )
        versions = {r.id: r.version for r in snap.records}

        def tx(conn: Connection, acting: Principal) -> int | None:
            now = utcnow()
            old = ledger.action(conn, acting, run_id, position)
            assert old is not None
            if proposal is None:
                why = f"{old['status_reason']}: they call for nothing now"
                conn.execute(ledger.set_action(old, now, status_reason=why))
                return None
            last = conn.execute(
                select(func.max(consolidation_actions.c.position)).where(
                    consolidation_actions.c.tenant_id == acting.tenant_id, consolidation_actions.c.run_id == run_id
                )
            ).scalar_one()
            row = ledger.action_row(acting, run_id, int(last) + 1, proposal, versions, now)
            row.update(recomputed=True, status_reason=f"recomputed from action {position}")
            conn.execute(insert(consolidation_actions).values(**row))
            return int(last) + 1

        return write_tx(self.store, principal, tx)

    def consolidate_scheduled(self, principal: Principal) -> dict[str, Any] | None:
        """What ``cairn serve`` runs on its schedule (``[consolidate] schedule``): when a run is due,
        a plan that waits for a person, or with ``auto_apply`` a plan applied at once; else None."""
        principal.require(WRITE)

        def newest(conn: Connection) -> datetime | None:
            return conn.execute(
                select(func.max(consolidation_runs.c.started_at)).where(
                    consolidation_runs.c.tenant_id == principal.tenant_id
                )
            ).scalar()

        last = read_tx(self.store, principal, newest)
        if not core.due(last, utcnow(), self.settings.consolidate_schedule):
            return None
        if self.settings.consolidate_auto_apply:
            return self.consolidate_apply(principal)
        return self.consolidate_plan(principal)

    # -- a person's decisions -------------------------------------------------------------------
    def consolidate_drop(self, principal: Principal, run_id: int, positions: list[int] | None = None) -> dict[str, Any]:
        """Drop planned actions (all, or those at ``positions``): they will never apply."""
        principal.require(WRITE)

        def tx(conn: Connection, acting: Principal) -> None:
            ledger.run(conn, acting, run_id)
            now = utcnow()
            rows = conn.execute(
                select(consolidation_actions).where(
                    consolidation_actions.c.tenant_id == acting.tenant_id,
                    consolidation_actions.c.run_id == run_id,
                    consolidation_actions.c.status == "planned",
                )
            ).mappings()
            acts = {int(r["position"]): dict(r) for r in rows}
            if positions is not None:
                _refuse_unplanned(conn, acting, run_id, sorted(set(positions) - set(acts)))
            for pos, act in acts.items():
                if positions is None or pos in positions:
                    conn.execute(
                        ledger.set_action(act, now, status="dropped", status_reason=f"dropped by {acting.actor}")
                    )

        write_tx(self.store, principal, tx)
        self._finish(principal, run_id)
        return self.consolidate_show(principal, run_id)

    def consolidate_undo(self, principal: Principal, run_id: int) -> dict[str, Any]:
        """Reverse what a run applied: archived lessons restored, supersessions reversed, created
        lessons archived, added links and sightings removed — each a new audited version. A lesson
        changed since the run is left as it is and named."""
        principal.require(WRITE)

        def tx(conn: Connection, acting: Principal) -> dict[str, Any]:
            run = ledger.run(conn, acting, run_id)
            if run["status"] == "undone":
                raise CairnError("CONFLICT", f"consolidation run {run_id} was already undone")
            now = utcnow()
            every = [
                dict(a)
                for a in conn.execute(
                    select(consolidation_actions)
                    .where(
                        consolidation_actions.c.tenant_id == acting.tenant_id,
                        consolidation_actions.c.run_id == run_id,
                    )
                    .order_by(consolidation_actions.c.position.desc())
                ).mappings()
            ]
            applied = [a for a in every if a["status"] == "applied"]
            planned = [a for a in every if a["status"] == "planned"]
            if not applied:  # an undone run is closed for good: do not close one that changed nothing
                hint = f"; to say no to its planned actions: cairn consolidate drop {run_id}" if planned else ""
                raise CairnError(
                    "CONFLICT", f"consolidation run {run_id} applied nothing, so there is nothing to undo{hint}"
                )
            # An undone run never applies again, so what it still had planned is dropped, saying why.
            for act in planned:
                conn.execute(ledger.set_action(act, now, status="dropped", status_reason="the run was undone"))
            reversed_, left = 0, []
            for act in applied:
                detail = {"consolidation": run_id, "action": act["position"], "undo": True}
                written = json.loads(act["versions_written"] or "{}")
                missed = effects.undo(conn, acting, written, json.loads(act["effects"] or "{}"), now, detail)
                left += [{**m, "action": act["position"]} for m in missed]
                note = "undone" + (f"; left as changed since: {len(missed)} lesson(s)" if missed else "")
                conn.execute(ledger.set_action(act, now, status_reason=note))
                reversed_ += 1
            conn.execute(ledger.set_run(acting, run_id, status="undone", finished_at=run["finished_at"] or now))
            audit.record(
                conn, acting, UNDO_ACTION, at=now, detail={"consolidation": run_id, "reversed": reversed_, "left": left}
            )
            return {"reversed": reversed_, "left": left}

        out = write_tx(self.store, principal, tx)
        return {**self.consolidate_show(principal, run_id), **out}

    # -- reading the ledger ---------------------------------------------------------------------
    def consolidate_runs(self, principal: Principal, *, limit: int = 20) -> dict[str, Any]:
        """The newest runs first, each with how many of its actions are in each status."""
        principal.require(READ)
        if not 1 <= limit <= MAX_PAGE:
            raise CairnError("INVALID_INPUT", f"limit must be between 1 and {MAX_PAGE}, got {limit}")
        return read_tx(self.store, principal, lambda conn: ledger.runs(conn, principal, limit))

    def consolidate_show(self, principal: Principal, run_id: int) -> dict[str, Any]:
        """One run: its parameters, status and every action with its lessons, versions and reason."""
        principal.require(READ)
        return read_tx(self.store, principal, lambda conn: ledger.show(conn, principal, run_id))
