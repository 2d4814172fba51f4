"""The command tree. Each command parses its input, calls one service method, formats the result.

No rule lives here: validation, permissions, tombstones and trust are all in ``cairn.service``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cairn.errors import CairnError
from cairn.runtime import clock

if TYPE_CHECKING:
    from cairn.cli.main import Globals
    from cairn.cli.output import Output
    from cairn.core.principal import Principal
    from cairn.service.api import Cairn

# Every command reads the one clock, pinned by CAIRN_FAKE_NOW when set (local or --url alike).
clock.install()

app = typer.Typer(
    name="cairn",
    help="Cairn: a versioned, audited memory store for coding agents. "
    "Global flags anywhere: --json, --home DIR, --db URL, --url http://HOST:PORT (a remote Cairn; "
    "with CAIRN_TOKEN), --session ID, --by-human. cairn --version prints the version.",
    no_args_is_help=True,
    # typer's --install-completion / --show-completion; the completion requests themselves arrive
    # through cli/main.py (``COMPLETE_VAR``), which hands them to ``complete`` below.
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
review_app = typer.Typer(help="The review queue: verify or reject candidate lessons.", invoke_without_command=True)
audit_app = typer.Typer(help="The audit ledger: every mutation, hash-chained.", invoke_without_command=True)
app.add_typer(review_app, name="review")
app.add_typer(audit_app, name="audit")
config_app = typer.Typer(help="Settings and where each value came from.", invoke_without_command=True)
app.add_typer(config_app, name="config")
db_app = typer.Typer(
    help="The database: SQLite in the home, or Postgres with --db URL / CAIRN_DATABASE_URL.",
    invoke_without_command=True,
)
app.add_typer(db_app, name="db")


class _State:
    g: Globals
    out: Output
    svc: Cairn | None = None
    principal: Principal | None = None


S = _State()


def run(argv: list[str], g: Globals, out: Output) -> int:
    # typer 0.29 vendors click; its exceptions live here, not in the click package.
    from typer._click import exceptions as click

    S.g, S.out = g, out
    S.svc, S.principal = None, None  # a daemon runs many commands: nothing carries over from the last
    try:
        result = _command(argv[0] if argv else None)(argv, standalone_mode=False, prog_name="cairn")
    except click.NoArgsIsHelpError as exc:
        if exc.ctx is not None:
            sys.stdout.write(exc.ctx.get_help() + "\n")
        return 0
    except click.UsageError as exc:
        path = exc.ctx.command_path if exc.ctx else "cairn"
        hint = f" (see: {path} --help)"
        raise CairnError("INVALID_INPUT", exc.format_message() + hint) from None
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        raise CairnError("INTERNAL", "aborted") from None
    return result if isinstance(result, int) else 0


@app.command()
def completion(
    shell: Annotated[str, typer.Argument(help="bash, zsh, fish or powershell")],
) -> None:
    """Print the shell completion script, e.g. eval "$(cairn completion bash)" in ~/.bashrc.
    (--install-completion does the same for the shell it detects.)"""
    from typer._completion_shared import Shells, get_completion_script

    from cairn.cli.main import COMPLETE_VAR

    shells = [s.value for s in Shells]
    if shell not in shells:
        raise CairnError("INVALID_INPUT", f"no completion for shell {shell!r}; one of {', '.join(shells)}")
    script = get_completion_script(prog_name="cairn", complete_var=COMPLETE_VAR, shell=shell)
    if S.g.json:
        S.out.ok({"shell": shell, "script": script})
    else:
        sys.stdout.write(script + "\n")  # verbatim: a script, not text for the terminal filter
        S.out.done = True


# Each top-level command and group with the module that declares it (``app``: this one), in the
# order ``cairn --help`` lists them. ``cairn write`` imports and builds only ``lessons``'s part of the
# tree: building all of it (and importing every module of it) is a share of a cold command's time.
COMMANDS = {
    "completion": "app", "write": "lessons", "read": "lessons", "list": "lessons", "history": "lessons",
    "diff": "lessons", "supersede": "lessons", "archive": "lessons", "restore": "lessons", "forget": "lessons",
    "unforget": "lessons", "tombstones": "lessons", "feedback": "lessons", "link": "lessons",
    "neighborhood": "lessons", "purge": "lessons", "search": "retrieval", "context": "retrieval",
    "recall": "retrieval", "hook": "retrieval", "install": "retrieval", "serve": "operate", "status": "operate",
    "doctor": "operate", "reindex": "operate", "export": "operate", "import": "operate", "whoami": "accounts",
    "gateway": "gateway", "mcp": "app",
    "review": "review", "audit": "review", "config": "operate", "db": "operate", "consolidate": "consolidate",
    "org": "accounts", "token": "accounts", "user": "accounts", "limits": "accounts", "conversation": "gateway",
    "webhook": "webhooks", "sync": "sync",
}  # fmt: skip
_LOADED: set[str] = {"app"}
_COMMAND: dict[str | None, Any] = {}


def _load(module: str) -> None:
    """Import one module of the tree: its commands register on ``app`` (some through ``register``)."""
    if module in _LOADED:
        return
    import importlib

    loaded = importlib.import_module(f"cairn.cli.{module}")
    register = getattr(loaded, "register", None)
    if register is not None:
        register(app)
    _LOADED.add(module)


def load_all() -> typer.Typer:
    """The whole tree on ``app``, in ``COMMANDS``' order whatever was loaded first."""
    for module in dict.fromkeys(COMMANDS.values()):
        _load(module)
    order = {name: i for i, name in enumerate(COMMANDS)}
    app.registered_commands.sort(key=lambda c: order[c.name or c.callback.__name__])  # type: ignore[union-attr]
    app.registered_groups.sort(key=lambda g: order[g.name])  # type: ignore[index]
    return app


def _command(verb: str | None = None) -> Any:
    """The click command for ``cairn VERB ...``: a group holding only VERB's command when VERB is one
    (its usage, help and errors read as in the whole tree: ``cairn write``), else the whole tree.
    Built once per process and verb: typer rebuilds on every call, which a daemon running command
    after command would pay each time."""
    key = verb if verb in COMMANDS else None
    if key not in _COMMAND:
        if key is None:
            _COMMAND[key] = typer.main.get_command(load_all())
        else:
            import copy

            _load(COMMANDS[key])
            one = copy.copy(app)
            one.registered_commands = [c for c in app.registered_commands if (c.name or c.callback.__name__) == key]  # type: ignore[union-attr]
            one.registered_groups = [g for g in app.registered_groups if g.name == key]
            _COMMAND[key] = typer.main.get_group(one)
        from cairn.cli.coerce import install

        install(_COMMAND[key])  # plain strings and numbers without pydantic
    return _COMMAND[key]


def complete(complete_var: str) -> int:
    """Answer a shell completion request (the script typer's ``--show-completion`` prints calls back)."""
    try:
        load_all()(args=[], prog_name="cairn", complete_var=complete_var)
    except SystemExit as exc:  # typer answers, then exits with the status
        return exc.code if isinstance(exc.code, int) else 0
    return 0


def _home() -> Path:
    from cairn.runtime.home import home_dir
    from cairn.runtime.local import ensure_home

    return ensure_home(Path(home_dir(S.g.home)))


def svc() -> tuple[Cairn, Principal]:
    """The service and the caller, once per invocation: the local store and principal, or with
    ``--url``/``CAIRN_URL`` a remote Cairn whose token (``CAIRN_TOKEN``) is the caller."""
    if S.svc is None:
        remote = _remote_url()
        if remote is not None:
            import os

            from cairn.runtime.local import TOKEN_ENV, collect_again
            from cairn.runtime.remote import RemoteCairn

            S.svc = RemoteCairn(remote, os.environ.get(TOKEN_ENV, "").strip(), S.g.session)  # type: ignore[assignment]
            collect_again()  # as opening a local store does: a remote `cairn mcp` may run for hours
            return S.svc, None  # type: ignore[return-value]
        from cairn.runtime.local import open_service, principal_for

        S.svc = open_service(_home(), cwd=Path.cwd(), db=S.g.db)
        S.principal = principal_for(S.svc, session=S.g.session, human=S.g.human)
    assert S.principal is not None
    return S.svc, S.principal


def _remote_url() -> str | None:
    import os

    if not (S.g.url or "").strip() and not os.environ.get("CAIRN_URL", "").strip():
        return None  # the local path never loads the remote client (its operation catalog), as runtime/client.py
    from cairn.runtime.remote import configured_url

    url = configured_url(S.g.url)
    if url is not None and S.g.db:
        raise CairnError("INVALID_INPUT", "give --db (a database) or --url (a Cairn server), not both")
    return url


def _local_only(what: str) -> None:
    """Commands that act on a database or this machine, never through a server's API."""
    if _remote_url() is not None:
        from cairn.runtime.remote import NOT_REMOTE

        raise CairnError("INVALID_INPUT", f"{what} {NOT_REMOTE}")


def _value(value: str | None) -> str:
    if value is not None and value != "-":
        return value
    if sys.stdin is None or sys.stdin.isatty():
        raise CairnError("INVALID_INPUT", "no value given: pass VALUE as an argument or pipe it on stdin")
    return sys.stdin.read()


def _time(raw: str | None):  # type: ignore[no-untyped-def]
    if raw is None:
        return None
    from cairn.core.timeparse import parse_time

    return parse_time(raw)


@app.command("mcp")
def mcp_stdio() -> None:
    """Serve Cairn's tools over MCP on stdio (for an agent host). The caller is CAIRN_TOKEN's account,
    else local; with --url (or CAIRN_URL) the tools call that remote Cairn with CAIRN_TOKEN."""
    from cairn.mcp.server import build

    service, _ = svc()
    if _remote_url() is not None:
        service.whoami(None)  # type: ignore[arg-type]  # a bad token or URL stops it here, with the reason
        server = build(service, lambda: None)  # type: ignore[arg-type,return-value]  # the token is the caller
    else:
        from cairn.runtime.local import principal_for

        # Resolved per call: a token revoked mid-session stops working at its next call.
        server = build(service, lambda: principal_for(service, session=S.g.session, human=S.g.human))
    server.run("stdio")  # stdout is the protocol channel: no envelope is printed
