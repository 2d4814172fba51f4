"""`cairn write`, `read`, `list`, `history`, `diff`, `supersede`, `archive`, `restore`, `forget`,
`unforget`, `tombstones`, `feedback`, `link`, `neighborhood`, `purge`: one lesson's life."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from cairn.cli import render
from cairn.cli.app import (
    S,
    _time,
    _value,
    app,
    svc,
)
from cairn.cli.args import (
    AgentOpt,
    CursorOpt,
    FromOpt,
    Key,
    KindOpt,
    LimitOpt,
    ReasonOpt,
    Scope,
    TagOpt,
    ToOpt,
    TriggerOpt,
    TtlOpt,
    Value,
)
from cairn.core.lesson import Outcome, Rel, TrustFilter, choices


def write_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give a command the options every write takes (``--tag`` … ``--valid-to``), declared once.

    They are appended to the command's own parameters (so ``--help`` lists them after its own) and
    reach it as one ``opts`` dict, ready for the service (which parses the TTL).
    """
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "opts"]
    kw = inspect.Parameter.KEYWORD_ONLY
    options = [
        inspect.Parameter("tag", kw, annotation=TagOpt, default=None),
        inspect.Parameter("kind", kw, annotation=KindOpt, default="lesson"),
        inspect.Parameter("source_agent", kw, annotation=AgentOpt, default=None),
        inspect.Parameter("trigger", kw, annotation=TriggerOpt, default=None),
        inspect.Parameter("ttl", kw, annotation=TtlOpt, default=None),
        inspect.Parameter("valid_from", kw, annotation=FromOpt, default=None),
        inspect.Parameter("valid_to", kw, annotation=ToOpt, default=None),
    ]

    @functools.wraps(command)
    def run(**given: Any) -> None:
        opts = {
            "tags": given.pop("tag") or [],
            "kind": given.pop("kind"),
            "source_agent": given.pop("source_agent"),
            "trigger": given.pop("trigger"),
            "ttl": given.pop("ttl"),  # the service parses it
            "valid_from": _time(given.pop("valid_from")),
            "valid_to": _time(given.pop("valid_to")),
        }
        command(**given, opts=opts)

    params = own + options
    run.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    return run


@app.command()
@write_options
def write(scope: Scope, key: Key, value: Value = None, *, opts: dict[str, Any]) -> None:
    """Write a lesson: a new address creates, new content makes a version, the same content recurs."""
    service, p = svc()
    result = service.write(p, scope, key, _value(value), **opts)
    S.out.ok(result, render.write_result(result))


@app.command()
def read(
    scope: Scope,
    key: Key,
    as_of: Annotated[str | None, typer.Option("--as-of", help="What Cairn held at this record time")] = None,
    valid_at: Annotated[str | None, typer.Option("--valid-at", help="What was true in the world then")] = None,
) -> None:
    """Read one active lesson (or a past state with --as-of / --valid-at)."""
    service, p = svc()
    result = service.read(p, scope, key, as_of=_time(as_of), valid_at=_time(valid_at))
    S.out.ok(result, render.lesson(result["lesson"]))


@app.command("list")
def list_(
    scope: Annotated[str | None, typer.Argument(help="Scope to list; omit for every scope")] = None,
    tag: Annotated[str | None, typer.Option(help="Only lessons with this tag")] = None,
    trust: Annotated[str | None, typer.Option(help=choices(TrustFilter))] = None,
    archived: Annotated[bool, typer.Option("--archived", help="List archived lessons instead")] = False,
    limit: LimitOpt = 100,
    cursor: CursorOpt = None,
) -> None:
    """List active lessons, newest first."""
    service, p = svc()
    result = service.list(p, scope, tag=tag, trust=trust, archived=archived, limit=limit, cursor=cursor)
    S.out.ok(result, render.lesson_list(result))


@app.command()
def history(scope: Scope, key: Key) -> None:
    """Every version of a lesson with actor, record time and valid time."""
    service, p = svc()
    result = service.history(p, scope, key)
    S.out.ok(result, render.history(result))


@app.command()
def diff(scope: Scope, key: Key, v1: int, v2: int) -> None:
    """Compare two versions of a lesson."""
    service, p = svc()
    result = service.diff(p, scope, key, v1, v2)
    S.out.ok(result, render.diff(result))


@app.command()
@write_options
def supersede(
    scope: Scope,
    key: Key,
    value: Value = None,
    supersedes: Annotated[
        tuple[str, str] | None, typer.Option("--supersedes", help="SCOPE KEY of the lesson this replaces")
    ] = None,
    *,
    opts: dict[str, Any],
) -> None:
    """Replace a lesson: write the new one and retire the old one, linked, in one transaction."""
    service, p = svc()
    target = tuple(supersedes) if supersedes and supersedes[0] else None
    result = service.supersede(p, scope, key, _value(value), supersedes=target, **opts)
    S.out.ok(result, render.supersede_result(result))


@app.command()
def archive(scope: Scope, key: Key) -> None:
    """Hide a lesson from reads, reversibly (restore brings it back)."""
    service, p = svc()
    result = service.archive(p, scope, key)
    S.out.ok(result, render.changed("archived", result))


@app.command()
def restore(scope: Scope, key: Key) -> None:
    """Bring an archived lesson back (or a superseded one whose replacement was forgotten or archived)."""
    service, p = svc()
    result = service.restore(p, scope, key)
    S.out.ok(result, render.changed("restored", result))


@app.command()
def forget(scope: Scope, key: Key, reason: ReasonOpt = "") -> None:
    """Reject a lesson and tombstone its content: it can never be written back, under any key."""
    service, p = svc()
    result = service.forget(p, scope, key, reason)
    S.out.ok(result, render.forgot(result))


@app.command()
def unforget(
    tombstone_id: Annotated[int, typer.Argument(help="The tombstone id (from forget, or a TOMBSTONED refusal)")],
    reason: Annotated[str, typer.Option(help="Why the tombstone is lifted (required)")] = "",
) -> None:
    """Lift a tombstone (audited). The rejected lesson stays rejected; its content may be written again."""
    service, p = svc()
    result = service.unforget(p, tombstone_id, reason)
    S.out.ok(result, f"lifted tombstone {tombstone_id}")


@app.command()
def tombstones(
    all_: Annotated[bool, typer.Option("--all", help="Include lifted tombstones")] = False,
    limit: LimitOpt = 1000,
    cursor: CursorOpt = None,
) -> None:
    """List tombstones, oldest first."""
    service, p = svc()
    result = service.tombstones(p, include_lifted=all_, limit=limit, cursor=cursor)
    S.out.ok(result, render.tombstones(result))


@app.command()
def feedback(
    scope: Scope,
    key: Key,
    outcome: Annotated[str, typer.Argument(help=choices(Outcome))],
) -> None:
    """Record whether applying a lesson helped."""
    service, p = svc()
    result = service.feedback(p, scope, key, outcome)
    lesson = result["lesson"]
    S.out.ok(
        result,
        f"recorded {outcome} for {lesson['scope']} {lesson['key']} "
        f"(helped {lesson['helped_count']}, not helped {lesson['not_helped_count']})",
    )


@app.command()
def link(
    scope: Scope,
    key: Key,
    scope2: Annotated[str, typer.Argument(help="Scope of the other lesson")],
    key2: Annotated[str, typer.Argument(help="Key of the other lesson")],
    rel: Annotated[str, typer.Option(help=choices(Rel))] = "related",
) -> None:
    """Link two lessons."""
    service, p = svc()
    result = service.link(p, scope, key, scope2, key2, rel)
    S.out.ok(result, f"{'linked' if result['changed'] else 'already linked'}: {scope} {key} -{rel}-> {scope2} {key2}")


@app.command()
def neighborhood(
    scope: Scope,
    key: Key,
    depth: Annotated[int, typer.Option(help="1 to 3 hops")] = 1,
    budget: Annotated[int, typer.Option(help="Character budget (100-20000)")] = 2000,
) -> None:
    """Walk the links around a lesson, nearest first, within a character budget."""
    service, p = svc()
    result = service.neighborhood(p, scope, key, depth=depth, budget=budget)
    S.out.ok(result, render.neighborhood(result))


@app.command()
def purge(
    expired: Annotated[bool, typer.Option("--expired", help="Erase lessons whose TTL has passed")] = False,
    archived: Annotated[
        bool, typer.Option("--archived", help="Erase lessons archived longer than --older-than")
    ] = False,
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Retention for --archived (default 30d)")
    ] = None,
) -> None:
    """Hard-erase content (expired, or archived past retention). The audit keeps hashes only."""
    from cairn.core.timeparse import parse_duration

    service, p = svc()
    retention = parse_duration(older_than, code="INVALID_INPUT") if older_than else None
    result = service.purge(p, expired=expired, archived=archived, older_than=retention)
    S.out.ok(result, f"purged {result['purged']} {result['sweep']} lesson(s)")
