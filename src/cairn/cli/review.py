"""`cairn review` (the candidates' queue, verify, reject) and `cairn audit` (the ledger, verify)."""

from __future__ import annotations

from typing import Annotated

import typer

from cairn.cli import render
from cairn.cli.app import (
    S,
    _time,
    audit_app,
    review_app,
    svc,
)
from cairn.cli.args import CursorOpt, Key, ReasonOpt, Scope
from cairn.cli.lessons import forget


@review_app.callback()
def review_list(
    ctx: typer.Context,
    scope: Annotated[str | None, typer.Option(help="Only this scope")] = None,
    limit: Annotated[int, typer.Option(help="At most this many")] = 100,
    cursor: CursorOpt = None,
) -> None:
    """List candidates awaiting review, oldest first (subcommands: verify, reject)."""
    if ctx.invoked_subcommand is not None:
        return
    service, p = svc()
    result = service.review_queue(p, scope=scope, limit=limit, cursor=cursor)
    S.out.ok(result, render.review(result))


@review_app.command("verify")
def review_verify(scope: Scope, key: Key) -> None:
    """Vouch for a candidate: it becomes verified."""
    service, p = svc()
    result = service.verify(p, scope, key)
    S.out.ok(result, render.changed("verified", result))


@review_app.command("reject")
def review_reject(scope: Scope, key: Key, reason: ReasonOpt = "") -> None:
    """Reject a candidate: same as forget (rejected + tombstone)."""
    forget(scope, key, reason)


@audit_app.callback()
def audit_list(
    ctx: typer.Context,
    lesson: Annotated[tuple[str, str] | None, typer.Option("--lesson", help="SCOPE KEY")] = None,
    since: Annotated[str | None, typer.Option(help="ISO 8601 or '3d ago'")] = None,
    limit: Annotated[int, typer.Option(help="Newest N entries")] = 200,
    cursor: CursorOpt = None,
) -> None:
    """Every mutation with actor, action and versions before/after (subcommand: verify)."""
    if ctx.invoked_subcommand is not None:
        return
    service, p = svc()
    scope, key = lesson if lesson and lesson[0] else (None, None)
    result = service.audit(p, scope=scope, key=key, since=_time(since), limit=limit, cursor=cursor)
    S.out.ok(result, render.audit(result))


@audit_app.command("verify")
def audit_verify(
    fast: Annotated[
        bool, typer.Option("--fast", help="Check the hash chain only, not every lesson, version and tombstone row")
    ] = False,
) -> int:
    """Check the hash chain and that the lessons, versions and tombstones agree with it; exit 1 and
    name the first mismatch when they do not."""
    service, p = svc()
    result = service.audit_verify(p, full=not fast)
    text = f"audit chain verified: {result['checked']} row(s), head {result['head'][:16]}"
    if result["state"] is not None:
        n = result["state"]
        text += f"; state agrees: {n['lessons']} lesson(s), {n['versions']} version(s), {n['tombstones']} tombstone(s)"
    S.out.ok(result, text)
    return 0
