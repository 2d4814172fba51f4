"""The argument and option types the CLI's commands share (help text people read with --help), and
the one way a command group runs its default when called bare."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from cairn.core.lesson import MAX_PAGE

Scope = Annotated[
    str, typer.Argument(help="Scope: global, project::NAME, repo::OWNER/NAME or branch::OWNER/NAME::BRANCH")
]
Key = Annotated[str, typer.Argument(help="Key (normalized: case and punctuation runs fold, so 'My Key' = 'my-key')")]
Value = Annotated[str | None, typer.Argument(help="The lesson text; omit or '-' to read stdin")]
TagOpt = Annotated[list[str] | None, typer.Option("--tag", "-t", help="Tag (repeatable)")]
KindOpt = Annotated[str, typer.Option(help="lesson | fact | preference | reference")]
AgentOpt = Annotated[str | None, typer.Option("--source-agent", help="Which agent wrote it")]
TriggerOpt = Annotated[str | None, typer.Option(help="What prompted it (the failure, the review comment)")]
TtlOpt = Annotated[str | None, typer.Option(help="Expire after 90s, 30m, 12h, 7d (1s to 365d)")]
FromOpt = Annotated[str | None, typer.Option("--valid-from", help="ISO 8601: when it became true")]
ToOpt = Annotated[str | None, typer.Option("--valid-to", help="ISO 8601: when it stopped being true")]


CursorOpt = Annotated[str | None, typer.Option(help="Continue a list: the next_cursor a previous page printed")]
LimitOpt = Annotated[int, typer.Option(help=f"At most this many (1-{MAX_PAGE})")]


def default_to(group: typer.Typer, run: Callable[[], object], doc: str | None) -> None:
    """Make the bare group name run ``run`` (``cairn config`` is ``cairn config show``); a named
    subcommand runs alone. ``doc`` is the group's help, as a callback's docstring would be."""

    def default(ctx: typer.Context) -> None:
        if ctx.invoked_subcommand is None:
            run()

    default.__doc__ = doc
    group.callback()(default)


# Why a lesson is rejected: forget and review reject are one operation (reject is forget).
ReasonOpt = Annotated[str, typer.Option(help="Why this lesson is wrong (required)")]
