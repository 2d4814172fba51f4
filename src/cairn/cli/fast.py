"""``cairn context`` and ``cairn recall``: the hot-path commands, parsed without typer.

These run on every agent session start and every failed tool call, often through a hook. They
parse with the standard library's ``argparse`` and ask ``cairn.client``, which talks to the daemon
when it runs, so a warm call never imports the command tree, SQLAlchemy or numpy.
"""

from __future__ import annotations

import argparse
import os
import sys

from cairn.errors import CairnError

TYPE_CHECKING = False  # see cairn.errors
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from cairn.cli.main import Globals
    from cairn.cli.output import Output

VERBS = ("context", "recall")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CairnError("INVALID_INPUT", f"{message} (see: {self.prog} --help)")


def _int(name: str, low: int, high: int) -> Any:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise CairnError("INVALID_INPUT", f"{name} must be a whole number, got {raw!r}") from None
        if not low <= value <= high:
            raise CairnError("INVALID_INPUT", f"{name} must be between {low} and {high}, got {value}")
        return value

    return parse


def _where(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", help="owner/name (default: the git origin of the working directory)")
    p.add_argument("--branch", help="branch name (default: the checked-out branch)")
    p.add_argument("--project", help="project name (default: the repository's name)")


def parser(verb: str) -> argparse.ArgumentParser:
    if verb == "context":
        p = _Parser(
            prog="cairn context",
            description="The session-start block: the best lessons of the ladder within a character budget.",
        )
        _where(p)
        p.add_argument("--task", help="what the session is about; lifts related lessons")
        p.add_argument("--max-chars", type=_int("--max-chars", 200, 20000), help="budget (default 3000)")
        p.add_argument("--loop-cap", type=_int("--loop-cap", 0, 100), help="lessons per loop:: bucket (default 1)")
        return p
    p = _Parser(prog="cairn recall", description="At most 3 lessons that fit a failure, or nothing.")
    p.add_argument("--text", help="the failure text (default: read stdin)")
    p.add_argument("--scope", action="append", help="search only this scope (repeatable)")
    _where(p)
    return p


def run(verb: str, argv: list[str], g: Globals, out: Output) -> int:
    p = parser(verb)
    if "-h" in argv or "--help" in argv:
        sys.stdout.write(p.format_help())
        return 0
    args = p.parse_args(argv)
    from cairn.client import call

    params: dict[str, Any] = {"cwd": os.getcwd(), "repo": args.repo, "branch": args.branch, "project": args.project}
    if verb == "context":
        params.update(task=args.task, max_chars=args.max_chars, loop_cap=args.loop_cap)
        data = call("context", params, home=g.home, session=g.session, human=g.human, db=g.db, url=g.url)
        text = data["text"]
        if not text:  # nothing eligible: say so, within the same budget as the block
            text = f"Cairn: no lessons yet for {' → '.join(data['ladder']) or 'this ladder'}."
            if len(text) > data["budget"]:
                text = text[: data["budget"] - 1] + "…"
        out.ok(data, text)
        return 0
    text = args.text
    if text is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise CairnError("INVALID_INPUT", "no failure text: pass --text or pipe the output on stdin")
        text = sys.stdin.read()
    params.update(text=text, scopes=args.scope)
    data = call("recall", params, home=g.home, session=g.session, human=g.human, db=g.db, url=g.url)
    out.ok(data, data["text"])
    return 0
