"""`cairn search`, and the commands a hook or a session runs: `context`, `recall`, `hook`, `install`."""

from __future__ import annotations

from typing import Annotated

import typer

from cairn.cli import render
from cairn.cli.app import S, app, svc
from cairn.core.lesson import MAX_SEARCH_RESULTS, Mode, TrustFilter, choices

RepoOpt = Annotated[
    str | None, typer.Option(help="Working context: OWNER/NAME (ladder: branch, repo, project, global)")
]
BranchOpt = Annotated[str | None, typer.Option(help="Working context: branch name")]
ProjectOpt = Annotated[str | None, typer.Option(help="Working context: project name")]
ScopesOpt = Annotated[list[str] | None, typer.Option("--scope", help="Search only these scopes (repeatable)")]


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="Words or a question")],
    scope: ScopesOpt = None,
    repo: RepoOpt = None,
    branch: BranchOpt = None,
    project: ProjectOpt = None,
    tag: Annotated[str | None, typer.Option(help="Only lessons with this tag")] = None,
    trust: Annotated[str | None, typer.Option(help=choices(TrustFilter))] = None,
    limit: Annotated[int, typer.Option(help=f"At most this many results (1-{MAX_SEARCH_RESULTS})")] = 10,
    mode: Annotated[str, typer.Option(help=choices(Mode))] = "hybrid",
) -> None:
    """Hybrid search (full text + meaning), ranked; with a repo/branch/project context it follows the ladder."""
    service, p = svc()
    result = service.search(
        p, query, scopes=scope, repo=repo, branch=branch, project=project, tag=tag, trust=trust, limit=limit, mode=mode
    )
    S.out.ok(result, render.search(result))


# Hot-path verbs are parsed in ``cairn.cli.fast`` / ``cairn.hosts`` before this tree loads (see
# ``cli/main.py``); these entries only list them in ``cairn --help``.
_PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


@app.command(context_settings=_PASSTHROUGH)
def context() -> None:
    """The session-start block: best lessons of the ladder within a budget (cairn context --help)."""


@app.command(context_settings=_PASSTHROUGH)
def recall() -> None:
    """At most 3 lessons that fit a failed tool call's output, or nothing (cairn recall --help)."""


@app.command(context_settings=_PASSTHROUGH)
def hook() -> None:
    """Agent host hooks: session-start, tool-failure, prompt-submit (cairn hook --help)."""


@app.command(context_settings=_PASSTHROUGH)
def install() -> None:
    """Wire the hooks into claude-code, cursor or codex (cairn install --help)."""
