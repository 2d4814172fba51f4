"""The ``cairn`` entry point: global flags, error mapping, exit codes. Imports nothing heavy itself.

Hooks run this on every agent session start, so the module top imports only the standard library;
the command tree (typer) and the store (SQLAlchemy) load once a command needs them. Errors map
here, once: a ``CairnError`` becomes exit 1 (refused/invalid) or 2 (setup), and with ``--json``
exactly one envelope goes to stdout, whatever happened.
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # see cairn.errors: the typing module is not imported at run time
if TYPE_CHECKING:
    from cairn.cli.output import Output

GLOBAL_FLAGS = {"--json": "json", "--by-human": "human"}
GLOBAL_OPTIONS = {"--home": "home", "--session": "session", "--db": "db", "--url": "url"}
_METAVAR = {"--home": "DIR", "--session": "ID", "--db": "URL", "--url": "http://HOST:PORT"}


class Globals:
    json: bool = False
    human: bool = False
    home: str | None = None
    session: str | None = None
    db: str | None = None  # a database URL (else CAIRN_DATABASE_URL, else the SQLite file in the home)
    url: str | None = None  # a remote Cairn server (else CAIRN_URL): every command goes to its HTTP API
    verb: str = "cairn"
    error: str | None = None  # a global option without its value


def split_globals(argv: list[str]) -> tuple[Globals, list[str]]:
    """Pull the global flags out from anywhere before ``--``, so ``cairn read X Y --json`` works."""
    g = Globals()
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        if arg in GLOBAL_FLAGS:
            setattr(g, GLOBAL_FLAGS[arg], True)
        elif arg in GLOBAL_OPTIONS:
            if i + 1 < len(argv):
                setattr(g, GLOBAL_OPTIONS[arg], argv[i + 1])
                i += 1
            else:
                g.error = f"{arg} needs a value, e.g. {arg} {_METAVAR[arg]}"
        elif "=" in arg and arg.split("=", 1)[0] in GLOBAL_OPTIONS:
            name, value = arg.split("=", 1)
            setattr(g, GLOBAL_OPTIONS[name], value)
        else:
            rest.append(arg)
        i += 1
    g.verb = _verb(rest)
    return g, rest


# Command groups and their subcommands: the envelope's verb is "group sub" (an argument after a
# group, like `audit --lesson`, leaves it "group").
GROUPS = {
    "review": {"verify", "reject"},
    "audit": {"verify"},
    "config": {"show"},
    "db": {"status", "upgrade"},
    "org": {"create", "list", "rename", "delete", "invite", "invites", "accept", "revoke", "members", "member",
            "leave", "bind", "unbind", "bindings"},
    "token": {"create", "list", "revoke"},
    "user": {"create"},
    "limits": {"show", "set"},
    "webhook": {"add", "list", "rotate", "remove"},
    "conversation": {"list", "show", "forget"},
    "sync": {"status"},
    "consolidate": {"runs", "show", "apply", "drop", "undo"},
}  # fmt: skip


def _verb(rest: list[str]) -> str:
    """The command's name for the envelope: ``review verify``, but ``audit`` for ``audit --lesson S K``."""
    for i, arg in enumerate(rest):
        if arg.startswith("-"):
            continue
        nxt = rest[i + 1] if i + 1 < len(rest) else ""
        if arg in GROUPS and nxt and not nxt.startswith("-") and nxt in GROUPS[arg]:
            third = rest[i + 2] if i + 2 < len(rest) else ""
            if (arg, nxt) == ("org", "member") and third in ("role", "remove", "leave"):
                return f"org member {third}"
            return f"{arg} {nxt}"
        return arg
    return "cairn"


VERSION_FLAGS = ("--version", "-V")
# True in the daemon's process (set by cairn.daemon.hosted): a command it runs is never forwarded again.
IN_DAEMON = False
COMPLETE_VAR = "_CAIRN_COMPLETE"  # set by the shell completion script (typer's) when it asks for candidates


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["memory-gateway"]:  # the peer's command line as it is: cairn's global flags do not apply
        from cairn.compat.memory_gateway.cli import main as gateway

        return gateway(argv[1:])
    if os.environ.get(COMPLETE_VAR):
        from cairn.cli.app import complete

        return complete(COMPLETE_VAR)  # the shell passes the words in its own variables, not argv
    g, rest = split_globals(argv)
    start_daemon = False
    if not IN_DAEMON and not g.error and not (rest[:1] and rest[0] in VERSION_FLAGS):
        forwarded, start_daemon = _forward(argv, g)
        if forwarded is not None:
            return forwarded
    code = _main(rest, g)
    if start_daemon:  # after the command: a fresh home's first command creates the store itself
        from cairn.runtime import forward

        forward.start(_home_of(g), _db_of(g))
    return code


def _home_of(g: Globals) -> str:
    from cairn.runtime.home import home_dir

    return home_dir(g.home)


def _db_of(g: Globals) -> str | None:
    from cairn.runtime.home import database_choice

    return database_choice(g.db)


def _forward(argv: list[str], g: Globals) -> tuple[int | None, bool]:
    """The exit code of the command as the local daemon ran it (None: run it here), and whether to
    start a daemon afterwards (none was listening). See ``cairn.runtime.forward``."""
    from cairn.runtime import forward

    if not forward.forwardable(g.verb, g.url):
        return None, False
    try:
        return forward.run(argv, _home_of(g), _db_of(g)), False
    except forward.Absent as absent:
        return None, not absent.listening


def _main(rest: list[str], g: Globals) -> int:
    """The command, in this process."""
    from cairn.cli import output
    from cairn.errors import CairnError

    if rest[:1] and rest[0] in VERSION_FLAGS:
        g.verb = "version"
    out = output.Output(json_mode=g.json, verb=g.verb)
    if g.error:
        out.fail(CairnError("INVALID_INPUT", g.error))
        return 1
    if g.verb == "version":
        return _version(rest, out)
    try:
        code = _dispatch(rest, g, out)
    except CairnError as exc:
        out.fail(exc)
        code = exc.exit_code
    except KeyboardInterrupt:
        out.fail(CairnError("INTERNAL", "interrupted"))
        code = 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback for a user
        if os.environ.get("CAIRN_DEBUG"):
            raise
        out.fail(CairnError("INTERNAL", f"unexpected {type(exc).__name__}; rerun with CAIRN_DEBUG=1 for details"))
        code = 2
    sys.stdout.flush()
    return code


def _version(rest: list[str], out: Output) -> int:
    """``cairn --version``: the package's version, from the package itself (no metadata scan, no typer)."""
    from cairn import __version__
    from cairn.errors import CairnError

    if len(rest) > 1:
        out.fail(CairnError("INVALID_INPUT", f"{rest[0]} takes no arguments, got {' '.join(rest[1:])!r}"))
        return 1
    out.ok({"version": __version__}, f"cairn {__version__}")
    return 0


FAST_VERBS = ("context", "recall")  # parsed with argparse, served by the daemon when it runs
HOST_VERBS = ("hook", "install")  # run by agent hosts; standard library only


def _dispatch(rest: list[str], g: Globals, out: object) -> int:
    """Hot-path verbs skip the typer command tree: it alone costs more than a warm daemon answer."""
    verb = next((a for a in rest if not a.startswith("-")), None)
    if verb in FAST_VERBS:
        from cairn.cli import fast

        args = list(rest)
        args.remove(verb)
        return fast.run(verb, args, g, out)  # type: ignore[arg-type]
    if verb in HOST_VERBS and rest and rest[0] == verb:
        args = rest[1:]
        if verb == "hook":
            from cairn.hosts import hook

            return hook.main(args, g)
        from cairn.hosts import install

        return install.main(args, g)
    from cairn.cli.app import run

    return run(rest, g, out)  # type: ignore[arg-type]


LONG_RUNNING = ("serve", "mcp")  # processes that answer many requests keep numpy's default BLAS pool


def entry() -> None:
    """The ``cairn`` executable: one command, then the process ends.

    No cyclic garbage collection while the command's modules import: each full collection walks
    every object SQLAlchemy and numpy have just made, a large share of a cold command's time
    (bench/README.md). Opening the store turns it back on (``cairn.runtime.local.collect_again``);
    a command that opens none is a short client of the daemon. One BLAS thread for numpy unless the
    command is a long-running server (``cairn.runtime.threads``).
    """
    gc.disable()
    if split_globals(sys.argv[1:])[0].verb not in LONG_RUNNING:
        from cairn.runtime.threads import one_blas_thread

        one_blas_thread()
    sys.exit(main())


if __name__ == "__main__":
    entry()
