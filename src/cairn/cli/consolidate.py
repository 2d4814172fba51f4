"""`cairn consolidate`: plan and apply, resume, list runs, show one, apply a stored plan, drop, undo.

The rules (what is proposed, the guards, undo) are the service's (``service/consolidation.py``);
this module parses the command line and prints each proposed action with its reason.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cairn.cli.app import S, app, svc
from cairn.errors import CairnError

consolidate_app = typer.Typer(
    help="Merge near-duplicates, promote lessons seen in several branches or repositories, flag "
    "contradictions and archive stale candidates: every action named, audited and undoable.",
    invoke_without_command=True,
)
app.add_typer(consolidate_app, name="consolidate")

RunArg = Annotated[int, typer.Argument(help="The run's id (cairn consolidate runs lists them)", min=1)]
PositionsOpt = Annotated[
    list[int] | None, typer.Option("--action", help="Only the action at this position (repeatable)", min=1)
]


@consolidate_app.callback()
def consolidate(
    ctx: typer.Context,
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="Only this scope (repeatable; a repo:: scope includes its branches)"),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; store and change nothing")] = False,
    plan_only: Annotated[
        bool, typer.Option("--plan", help="Store the plan for a person to review (cairn consolidate apply RUN)")
    ] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Finish the newest interrupted run")] = False,
    stale_days: Annotated[
        int | None, typer.Option(help="Days before a candidate seen once and never helped is stale (default 90)")
    ] = None,
) -> None:
    """Plan a consolidation and apply it (subcommands: runs, show, apply, drop, undo)."""
    if ctx.invoked_subcommand is not None:
        return
    if sum((dry_run, plan_only, resume)) > 1:
        raise CairnError("INVALID_INPUT", "give one of --dry-run, --plan and --resume")
    if resume and (scope or stale_days is not None):
        raise CairnError("INVALID_INPUT", "--resume finishes a stored run with its own parameters; drop --scope")
    service, p = svc()
    if resume:
        result = service.consolidate_resume(p)
    elif dry_run:
        result = service.consolidate_preview(p, scopes=scope, stale_days=stale_days)
    elif plan_only:
        result = service.consolidate_plan(p, scopes=scope, stale_days=stale_days)
    else:
        result = service.consolidate_apply(p, scopes=scope, stale_days=stale_days)
    S.out.ok(result, render_plan(result))


@consolidate_app.command("runs")
def runs(limit: Annotated[int, typer.Option(help="At most this many, newest first")] = 20) -> None:
    """Consolidation runs, newest first, with how many actions are in each status."""
    service, p = svc()
    result = service.consolidate_runs(p, limit=limit)
    lines = [_run_line(r) for r in result["runs"]] or ["no consolidation runs yet"]
    S.out.ok(result, "\n".join(lines))


@consolidate_app.command("show")
def show(run_id: RunArg) -> None:
    """One run: every action with its lessons, the versions it read and wrote, and its reason."""
    service, p = svc()
    result = service.consolidate_show(p, run_id=run_id)
    S.out.ok(result, render_plan(result))


@consolidate_app.command("apply")
def apply_run(run_id: RunArg, action: PositionsOpt = None) -> None:
    """Apply a stored plan (all its planned actions, or those given with --action)."""
    service, p = svc()
    result = service.consolidate_apply(p, run_id=run_id, positions=action)
    S.out.ok(result, render_plan(result))


@consolidate_app.command("drop")
def drop(run_id: RunArg, action: PositionsOpt = None) -> None:
    """Drop planned actions of a run (all, or those given with --action): they never apply."""
    service, p = svc()
    result = service.consolidate_drop(p, run_id=run_id, positions=action)
    S.out.ok(result, render_plan(result))


@consolidate_app.command("undo")
def undo(run_id: RunArg) -> None:
    """Reverse what a run applied; each change is a new audited version."""
    service, p = svc()
    result = service.consolidate_undo(p, run_id=run_id)
    text = render_plan(result) + f"\nundone: {result['reversed']} action(s) reversed"
    for left in result["left"]:
        what = f"{left['scope']} {left['key']}" if "scope" in left else f"lesson {left['lesson']}"
        text += f"\n  left as it is: {what} (action {left['action']}): {left['reason']}"
    S.out.ok(result, text)


def _run_line(r: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in r["actions"].items() if n) or "no actions"
    scopes = ", ".join(r["parameters"].get("scopes") or []) or "all scopes"
    return f"run {r['id']}  {r['status']:<8} {r['mode']:<5} {r['started_at']}  {scopes}: {counts}"


def _lesson(ref: dict[str, Any] | None) -> str:
    if ref is None:
        return "-"
    if ref.get("scope") is None:
        return f"#{ref['id']} (erased)"
    return f"{ref['scope']} {ref['key']}"


def render_plan(result: dict[str, Any]) -> str:
    """Every action with its status, its lessons and its reason."""
    lines = []
    run = result.get("run")
    if run is not None:
        lines.append(_run_line(run))
    elif result.get("dry_run"):
        lines.append("dry run: nothing stored, nothing changed")
    if result.get("note"):
        lines.append(result["note"])
    actions = result.get("actions") or []
    if not actions and (run is not None or result.get("dry_run")):
        lines.append("nothing to consolidate")
    for a in actions:
        head = f"{a['position']:>4}. {a['kind']:<18} {a['status']}"
        if a.get("recomputed"):
            head += " (recomputed)"
        lines.append(head)
        lines.append(f"      {a['reason']}")
        for ref in a["lessons"]:
            mark = "keep " if a.get("keep") and a["keep"]["id"] == ref["id"] else "     "
            written = f" → v{ref['version_written']}" if ref.get("version_written") else ""
            lines.append(f"      {mark}{_lesson(ref)} (v{ref['version_read']}{written})")
        if a.get("created"):
            lines.append(f"      created {_lesson(a['created'])}")
        if a.get("status_reason"):
            lines.append(f"      {a['status']}: {a['status_reason']}")
    return "\n".join(lines)
