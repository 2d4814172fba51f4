"""``cairn context`` and ``cairn recall``: the hot-path commands, parsed without typer.

These run on every agent session start and every failed tool call, often through a hook. They
parse with the standard library's ``argparse`` and ask ``cairn.runtime.client``, which talks to the daemon
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
    p.add_argument("--repo", help="Working context: OWNER/NAME (default: the git remote of the working directory)")
    p.add_argument("--branch", help="Working context: branch name (default: the checked-out branch)")
    p.add_argument("--project", help="Working context: project name (default: the repository's name)")


def parser(verb: str) -> argparse.ArgumentParser:
    if verb == "context":
        p = _Parser(
            prog="cairn context",
            description="The session-start block: the best lessons of the ladder within a character budget.",
            add_help=False,
        )
        _where(p)
        p.add_argument("--task", help="What the session is about; lifts related lessons")
        p.add_argument("--max-chars", type=_int("--max-chars", 200, 20000), help="Budget (200-20000; default 3000)")
        p.add_argument(
            "--loop-cap", type=_int("--loop-cap", 0, 100), help="Lessons per loop:: bucket (0-100; default 1)"
        )
        return p
    p = _Parser(
        prog="cairn recall",
        description="At most 3 lessons that fit a failure, or nothing. The failure text is the argument, "
        "--text, or stdin (e.g. npm test 2>&1 | cairn recall).",
        add_help=False,
    )
    p.add_argument("text", nargs="?", help="The failure text (default: --text, else stdin)")
    p.add_argument("--text", dest="text_option", metavar="TEXT", help="The failure text, as an option")
    p.add_argument("--scope", action="append", help="Search only this scope (repeatable)")
    _where(p)
    return p


def help_text(p: argparse.ArgumentParser) -> str:
    """``--help`` in the layout of every typer command (usage, description, arguments, options).

    The hot-path verbs parse with argparse to stay fast; their help should still read like the rest of
    the CLI. Help is not on the hot path, so this may take its time; it needs only the parser.
    """
    import textwrap

    positionals = [a for a in p._actions if not a.option_strings]
    options = [a for a in p._actions if a.option_strings]
    usage = "[OPTIONS]" + "".join(f" [{a.dest}]" if a.nargs == "?" else f" {{{a.dest}}}" for a in positionals)

    def kind(action: argparse.Action) -> str:
        base = "<int>" if action.type is not None else "<str>"
        return "<list[str]>" if isinstance(action, argparse._AppendAction) else base

    def rows(items: list[tuple[str, str]]) -> list[str]:
        width = max(len(name) for name, _ in items)
        lines = []
        for name, text in items:
            wrapped = textwrap.wrap(text, width=max(20, 78 - width - 4)) or [""]
            lines.append(f"  {name.ljust(width)}  {wrapped[0]}".rstrip())
            lines.extend(" " * (width + 4) + more for more in wrapped[1:])
        return lines

    out = [f"Usage: {p.prog} {usage}", ""]
    out.extend(textwrap.wrap(p.description or "", width=78, initial_indent="  ", subsequent_indent="  "))
    if positionals:
        out += ["", "Arguments:", *rows([(f"{a.dest} <str>", a.help or "") for a in positionals])]
    opts = [(f"{', '.join(a.option_strings)} {kind(a)}", a.help or "") for a in options]
    out += ["", "Options:", *rows([*opts, ("--help", "Show this message and exit.")])]
    return "\n".join(out) + "\n"


def run(verb: str, argv: list[str], g: Globals, out: Output) -> int:
    p = parser(verb)
    if "-h" in argv or "--help" in argv:
        sys.stdout.write(help_text(p))
        return 0
    args = p.parse_args(argv)
    from cairn.runtime.client import call

    params: dict[str, Any] = {"cwd": os.getcwd(), "repo": args.repo, "branch": args.branch, "project": args.project}
    if verb == "context":
        if not args.repo:  # how the checkout was read, when that was a guess: a note, never on the block
            from pathlib import Path

            from cairn.runtime.gitinfo import detect

            note = detect(Path(params["cwd"])).note
            if note:
                out.note(f"cairn: git: {note}")
        params.update(task=args.task, max_chars=args.max_chars, loop_cap=args.loop_cap)
        data = call("context", params, home=g.home, session=g.session, human=g.human, db=g.db, url=g.url)
        text = data["text"]
        if not text:  # nothing eligible: say so, within the same budget as the block
            text = f"Cairn: no lessons yet for {' → '.join(data['ladder']) or 'this ladder'}."
            if len(text) > data["budget"]:
                text = text[: data["budget"] - 1] + "…"
        out.ok(data, text)
        return 0
    if args.text is not None and args.text_option is not None:
        raise CairnError("INVALID_INPUT", "give the failure text once: as the argument or as --text, not both")
    text = args.text if args.text is not None else args.text_option
    if text is None:
        if sys.stdin is None or sys.stdin.isatty():
            from cairn.daemon.protocol import NO_FAILURE_TEXT

            raise CairnError("INVALID_INPUT", NO_FAILURE_TEXT)
        text = sys.stdin.read()
    params.update(text=text, scopes=args.scope)
    data = call("recall", params, home=g.home, session=g.session, human=g.human, db=g.db, url=g.url)
    out.ok(data, data["text"])
    return 0
