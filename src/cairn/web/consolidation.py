"""Consolidation (docs/consolidation.md): a run's plan with every action's lessons and reason; plan
now, apply or drop actions one by one, selected or all, and undo a run.

A surface only: which actions a plan holds, whether an action may still apply (its lessons at the
versions it read, no forget since the run read the store) and who may do what are the service's.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from cairn.core.principal import Principal
from cairn.errors import CairnError
from cairn.service.api import Cairn
from cairn.web.deps import PAGE_SIZE, Dash, Form, PageView, PostView
from cairn.web.handlers import arg, call, field_, int_arg

router = APIRouter()

RUNS_SHOWN = 10  # the newest runs listed above the one shown
OPS = {"apply": "Applied", "drop": "Dropped"}


def _values(svc: Cairn, principal: Principal, actions: list[dict[str, Any]]) -> dict[int, str]:
    """The current text of each active lesson the shown actions name, by id: what a person judges a
    merge or a contradiction by. A lesson no longer active (archived by an applied merge, erased) has
    none; its link still leads to its history."""
    out: dict[int, str] = {}
    for action in actions:
        for ref in action["lessons"]:
            if ref["key"] is None or ref["id"] in out:
                continue
            try:
                out[ref["id"]] = svc.read(principal, ref["scope"], ref["key"])["lesson"]["value"]
            except CairnError:
                continue
    return out


def _counts(run: dict[str, Any]) -> str:
    """A run's actions by status, as a flash says them ("applied 3, planned 2")."""
    return ", ".join(f"{status} {n}" for status, n in run["actions"].items() if n) or "no actions"


@router.get("/consolidation", response_class=HTMLResponse)
async def consolidation_page(view: PageView, dash: Dash) -> Response:
    """The newest run (or ``?run=``) with a page of its actions (``from`` a position on), each with
    its lessons' current text, and the newest runs to choose from."""
    run_id = int_arg(arg(view, "run", 18), "run")
    start = int_arg(arg(view, "from", 18), "from") or 1
    runs = (await call(dash.svc.consolidate_runs, view.principal, limit=RUNS_SHOWN))["runs"]
    if run_id is None and runs:
        run_id = runs[0]["id"]
    if run_id is None:
        return dash.render(view, "consolidation.html", runs=runs, run=None, actions=[], values={}, next_from=None)
    shown = await call(dash.svc.consolidate_show, view.principal, run_id)
    later = [a for a in shown["actions"] if a["position"] >= start]
    page = later[:PAGE_SIZE]
    next_from = later[PAGE_SIZE]["position"] if len(later) > PAGE_SIZE else None
    values = await call(_values, dash.svc, view.principal, page)
    return dash.render(
        view, "consolidation.html", runs=runs, run=shown["run"], actions=page, values=values, next_from=next_from
    )


@router.post("/consolidation/plan", response_class=HTMLResponse)
async def consolidation_plan(form: Form, view: PostView, dash: Dash) -> Response:
    """Plan now: a run that waits for a person (nothing is applied)."""
    out = await call(dash.svc.consolidate_plan, view.principal)
    run = out["run"]
    message = f"Planned run {run['id']}: {len(out['actions'])} action(s) waiting for review."
    return dash.done(view, view.url("/consolidation", run=run["id"]), "ok", message)


@router.post("/consolidation/actions", response_class=HTMLResponse)
async def consolidation_actions(form: Form, view: PostView, dash: Dash) -> Response:
    """Apply or drop a run's planned actions: the selected positions, or all of them (``all=1``)."""
    run_id = int_arg(field_(form, "run", 18), "run")
    if run_id is None:
        raise CairnError("INVALID_INPUT", "which run?")
    op = field_(form, "op", 10)
    if op not in OPS:
        raise CairnError("INVALID_INPUT", "choose apply or drop")
    positions: list[int] | None = None
    if field_(form, "all", 3) != "1":
        positions = [p for p in (int_arg(v, "position") for v in form.getlist("position") if isinstance(v, str)) if p]
        if not positions:
            return dash.done(view, view.url("/consolidation", run=run_id), "error", "Select at least one action first.")
    fn = dash.svc.consolidate_apply if op == "apply" else dash.svc.consolidate_drop
    out = await call(fn, view.principal, run_id, positions=positions)
    which = "every planned action" if positions is None else f"{len(positions)} action(s)"
    message = f"{OPS[op]} {which} of run {run_id}. The run now holds: {_counts(out['run'])}."
    return dash.done(view, view.url("/consolidation", run=run_id), "ok", message)


@router.post("/consolidation/undo", response_class=HTMLResponse)
async def consolidation_undo(form: Form, view: PostView, dash: Dash) -> Response:
    """Reverse what a run applied (each change a new audited version)."""
    run_id = int_arg(field_(form, "run", 18), "run")
    if run_id is None:
        raise CairnError("INVALID_INPUT", "which run?")
    out = await call(dash.svc.consolidate_undo, view.principal, run_id)
    message = f"Undid run {run_id}: {out['reversed']} action(s) reversed."
    if out["left"]:
        message += f" {len(out['left'])} lesson(s) changed since the run were left as they are."
    return dash.done(view, view.url("/consolidation", run=run_id), "ok", message)
