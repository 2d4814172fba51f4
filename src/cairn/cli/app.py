"""The command tree. Each command parses its input, calls one service method, formats the result.

No rule lives here: validation, permissions, tombstones and trust are all in ``cairn.service``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cairn.cli import render
from cairn.core.lesson import MAX_PAGE, Mode, Outcome, Rel, TrustFilter, choices
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
        result = _command()(argv, standalone_mode=False, prog_name="cairn")
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


_COMMAND: list[Any] = []


def _command() -> Any:
    """The click command typer builds from ``app``, built once per process: typer rebuilds the whole
    tree on every call, which a daemon running command after command would pay each time."""
    if not _COMMAND:
        _COMMAND.append(typer.main.get_command(app))
    return _COMMAND[0]


def complete(complete_var: str) -> int:
    """Answer a shell completion request (the script typer's ``--show-completion`` prints calls back)."""
    try:
        app(args=[], prog_name="cairn", complete_var=complete_var)
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

            from cairn.runtime.local import TOKEN_ENV
            from cairn.runtime.remote import RemoteCairn

            S.svc = RemoteCairn(remote, os.environ.get(TOKEN_ENV, "").strip(), S.g.session)  # type: ignore[assignment]
            return S.svc, None  # type: ignore[return-value]
        from cairn.runtime.local import open_service, principal_for

        S.svc = open_service(_home(), cwd=Path.cwd(), db=S.g.db)
        S.principal = principal_for(S.svc, session=S.g.session, human=S.g.human)
    assert S.principal is not None
    return S.svc, S.principal


def _remote_url() -> str | None:
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


def _write_options(
    tag: list[str] | None,
    kind: str,
    source_agent: str | None,
    trigger: str | None,
    ttl: str | None,
    valid_from: str | None,
    valid_to: str | None,
) -> dict[str, Any]:
    return {
        "tags": tag or [],
        "kind": kind,
        "source_agent": source_agent,
        "trigger": trigger,
        "ttl": ttl,  # the service parses it
        "valid_from": _time(valid_from),
        "valid_to": _time(valid_to),
    }


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


@app.command()
def write(
    scope: Scope,
    key: Key,
    value: Value = None,
    tag: TagOpt = None,
    kind: KindOpt = "lesson",
    source_agent: AgentOpt = None,
    trigger: TriggerOpt = None,
    ttl: TtlOpt = None,
    valid_from: FromOpt = None,
    valid_to: ToOpt = None,
) -> None:
    """Write a lesson: a new address creates, new content makes a version, the same content recurs."""
    service, p = svc()
    opts = _write_options(tag, kind, source_agent, trigger, ttl, valid_from, valid_to)
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
    limit: Annotated[int, typer.Option(help=f"At most this many (1-{MAX_PAGE})")] = 100,
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
def supersede(
    scope: Scope,
    key: Key,
    value: Value = None,
    supersedes: Annotated[
        tuple[str, str] | None, typer.Option("--supersedes", help="SCOPE KEY of the lesson this replaces")
    ] = None,
    tag: TagOpt = None,
    kind: KindOpt = "lesson",
    source_agent: AgentOpt = None,
    trigger: TriggerOpt = None,
    ttl: TtlOpt = None,
    valid_from: FromOpt = None,
    valid_to: ToOpt = None,
) -> None:
    """Replace a lesson: write the new one and retire the old one, linked, in one transaction."""
    service, p = svc()
    opts = _write_options(tag, kind, source_agent, trigger, ttl, valid_from, valid_to)
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
    """Bring an archived lesson back."""
    service, p = svc()
    result = service.restore(p, scope, key)
    S.out.ok(result, render.changed("restored", result))


@app.command()
def forget(
    scope: Scope, key: Key, reason: Annotated[str, typer.Option(help="Why this lesson is wrong (required)")] = ""
) -> None:
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
    limit: Annotated[int, typer.Option(help=f"At most this many (1-{MAX_PAGE})")] = 1000,
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
def review_reject(
    scope: Scope, key: Key, reason: Annotated[str, typer.Option(help="Why it is wrong (required)")] = ""
) -> None:
    """Reject a candidate: same as forget (rejected + tombstone)."""
    service, p = svc()
    result = service.reject(p, scope, key, reason)
    S.out.ok(result, render.forgot(result))


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
    limit: Annotated[int, typer.Option(help="At most this many results (1-100)")] = 10,
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


@config_app.callback()
def config_default(ctx: typer.Context) -> None:
    """Settings and where each value came from (same as: cairn config show)."""
    if ctx.invoked_subcommand is None:
        config_show()


@config_app.command("show")
def config_show() -> None:
    """Every setting's effective value and where it came from (default, file, environment)."""
    from cairn.runtime import settings as settings_mod

    home = _home()
    cfg = settings_mod.load(home, Path.cwd())
    rows = cfg.effective()
    repo_file = settings_mod.repo_config(Path.cwd())
    data = {
        "settings": rows,
        "files": {"user": str(home / "config.toml"), "repo": str(repo_file) if repo_file else None},
    }
    width = max(len(r["key"]) for r in rows)
    lines = [f"{r['key']:<{width}}  {r['value']!s:<8} {r['source']}" for r in rows]
    lines.append(f"user config: {home / 'config.toml'}; repo config: {repo_file or '(no .cairn.toml here)'}")
    S.out.ok(data, "\n".join(lines))


@db_app.callback()
def db_default(ctx: typer.Context) -> None:
    """Which database, at which schema revision (subcommand: upgrade)."""
    if ctx.invoked_subcommand is None:
        db_status()


@db_app.command("status")
def db_status() -> None:
    """Which database this command uses and whether its schema is current (changes nothing)."""
    _local_only("cairn db status")
    from cairn.runtime.local import database_url
    from cairn.store.engine import Store, redact_url
    from cairn.store.migrations import HEAD

    store = Store(database_url(_home(), S.g.db))
    try:
        current = store.current_revision()
        security = store.security() if current else None
    finally:
        store.dispose()
    where = redact_url(store.url)
    data = {"database": where, "dialect": store.dialect, "revision": current, "head": HEAD, "current": current == HEAD}
    due = "current" if current == HEAD else f"behind: run cairn db upgrade (at {current or 'an empty schema'})"
    text = f"{where}: revision {current or '(none)'}, head {HEAD} — {due}"
    if security is not None:
        data["security"] = security
        text += (
            f"\nrequests run as {security['app_role'] or '(no application role: run cairn db upgrade)'}; "
            f"row-level security forced on {security['tables_forced']} of {security['tables']} tables"
        )
        if security["unprotected"] or security["app_role_bypasses"]:
            text += " — NOT PROTECTED: run cairn db upgrade as the owner"
    S.out.ok(data, text)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Run the schema migrations up to the newest revision (the same history on SQLite and Postgres)."""
    _local_only("cairn db upgrade")
    from cairn.runtime.local import database_url
    from cairn.store.engine import Store, redact_url
    from cairn.store.migrations import HEAD

    store = Store(database_url(_home(), S.g.db))
    try:
        before, after = store.upgrade()
    finally:
        store.dispose()
    where = redact_url(store.url)
    data = {"database": where, "dialect": store.dialect, "from": before, "to": after, "head": HEAD}
    if before == after:
        text = f"{where}: already at revision {after}"
    else:
        text = f"{where}: upgraded from {before or '(empty)'} to {after}"
    S.out.ok(data, text)


@app.command()
def serve(
    no_warm: Annotated[bool, typer.Option("--no-warm", help="Skip loading the index and model at start")] = False,
    no_sweep: Annotated[
        bool, typer.Option("--no-sweep", help="No scheduled purge sweeps or audit verify (benchmarks)")
    ] = False,
    http: Annotated[
        bool, typer.Option("--http/--no-http", help="Serve the HTTP API and MCP (/v1, /mcp, /docs); on by default")
    ] = True,
    host: Annotated[str, typer.Option(help="HTTP address; loopback unless you mean to expose it")] = "127.0.0.1",
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="HTTP port (default 8321; if that is taken, socket only)")
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            envvar="CAIRN_ALLOW_HOSTS",
            help="A host name the server is reached by (Host/Origin), besides localhost; repeatable. "
            "$CAIRN_ALLOW_HOSTS: names separated by spaces",
        ),
    ] = None,
    auto: Annotated[
        bool,
        typer.Option(
            "--auto",
            hidden=True,
            help="Started on demand by a command: socket only, exits after serve.idle_minutes without a "
            "request, and quietly when another daemon already serves the home",
        ),
    ] = False,
) -> int:
    """Run the daemon: keeps store, index and model warm for hooks and every other command, runs the
    sweeps, and serves the HTTP API and MCP on loopback (http://127.0.0.1:8321). Ctrl-C stops."""
    from cairn.daemon.server import DEFAULT_HTTP_PORT, Daemon

    _local_only("cairn serve")
    out = S.out  # its own: the commands it runs for clients (cairn.daemon.hosted) replace S.out
    where = (host, port or DEFAULT_HTTP_PORT, port is not None) if http and not auto else None
    daemon = Daemon(_home(), db=S.g.db, allow_hosts=allow_host or [])
    idle = daemon.svc.settings.idle_minutes * 60 if auto else None
    try:
        stats = daemon.serve(warm=not no_warm, sweeps=not no_sweep, http=where, idle=idle or None, auto=auto)
    except CairnError as exc:
        if auto and "already serves" in exc.message:
            return 0  # two commands started one at once: the other one serves
        raise
    out.ok(
        stats,
        f"cairn serve stopped after {stats['requests']} request(s): "
        f"{stats['socket_requests']} on the socket, {stats['http_requests']} over HTTP",
    )
    return 0


@app.command()
def status() -> None:
    """The store (active lessons), the local daemon (pid, uptime, idle exit) and the embedding queue."""
    from cairn.daemon import protocol
    from cairn.runtime import forward
    from cairn.runtime.client import ask_daemon
    from cairn.store.engine import redact_url

    _local_only("cairn status")
    service, p = svc()
    home = _home()
    data: dict[str, Any] = {"home": str(home), "database": redact_url(service.store.url), **service.status(p)}
    answer = ask_daemon(home, {"v": protocol.PROTOCOL, "op": "ping", "params": {}})
    if answer is not None and answer.get("ok"):
        d = answer["data"]
        data["daemon"] = {k: d.get(k) for k in ("pid", "uptime_seconds", "idle_exit_minutes", "requests")}
        idle = d.get("idle_exit_minutes")
        daemon_line = f"running · pid {d.get('pid')} · up {_duration(d.get('uptime_seconds') or 0)} · " + (
            f"exits after {idle:g} idle minute(s)" if idle else "runs until stopped"
        )
    else:
        data["daemon"] = None
        starts = forward.enabled() and forward.auto_start_allowed(str(home))
        daemon_line = "not running; " + ("the next command starts one" if starts else "commands run in process")
    text = "\n".join(
        [
            f"store    {data['database']} · {data['active_lessons']} active lesson(s)",
            f"daemon   {daemon_line}",
            f"queue    {data['pending_embeddings']} lesson(s) waiting for an embedding ({data['embedding_model']})",
        ]
    )
    S.out.ok(data, text)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


@app.command()
def doctor() -> None:
    """Check this machine's Cairn: store, schema, daemon, model, installed hooks, git detection; says
    what to do about each problem. Exit 0 healthy, 1 when a problem was found."""
    from cairn import doctor as doctor_mod
    from cairn.runtime.home import home_dir

    _local_only("cairn doctor")
    report = doctor_mod.run(Path(home_dir(S.g.home)), S.g.db, Path.cwd())
    if report["healthy"]:
        S.out.ok(report, doctor_mod.render(report))
        return
    if not S.g.json:
        sys.stdout.write(doctor_mod.render(report) + "\n")
    raise CairnError("UNHEALTHY", f"{len(report['problems'])} problem(s): {', '.join(report['problems'])}", report)


@app.command()
def reindex() -> None:
    """Rebuild the full-text index and every embedding (e.g. after an embedding model change)."""
    service, p = svc()
    with render.progress(enabled=not S.g.json and sys.stderr.isatty(), label="embedding") as tick:
        result = service.reindex(p, progress=tick)
    S.out.ok(result, f"reindexed {result['indexed']} lesson(s); {result['embedded']} embedded with {result['model']}")


@app.command("export")
def export_(
    file: Annotated[str | None, typer.Argument(help="Output file; '-' or omitted = stdout")] = None,
    active: Annotated[bool, typer.Option("--active", help="Only active lessons (no history of rejected ones)")] = False,
    scope: Annotated[str | None, typer.Option(help="Only this scope")] = None,
) -> None:
    """Export JSONL: a lossless backup of lessons, versions, trust, tombstones and links."""
    service, p = svc()
    lines = service.export(p, active_only=active, scope=scope)
    count = 0
    if file in (None, "-"):
        if S.g.json:
            raise CairnError("INVALID_INPUT", "--json with export to stdout would mix two outputs; give a FILE")
        for line in lines:
            sys.stdout.write(line + "\n")
            count += 1
        S.out.done = True
        return
    path = Path(file)
    tmp = path.with_name(path.name + ".partial")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line + "\n")
                count += 1
        tmp.replace(path)
    except OSError as exc:
        raise CairnError("SETUP", f"cannot write {file}: {exc.strerror}") from None
    S.out.ok({"file": str(path), "lines": count}, f"exported {count} line(s) to {path}")


@app.command("import")
def import_(
    file: Annotated[str, typer.Argument(help="JSONL file, or '-' for stdin (with --from: the corpus directory)")],
    source: Annotated[
        str | None,
        typer.Option(
            "--from", help="memory-gateway: that tool's Markdown corpus; lorekit: LoreKit's local store (a tier dir)"
        ),
    ] = None,
    scope: Annotated[str | None, typer.Option(help="With --from: the scope (default project::<dir name>)")] = None,
    no_embed: Annotated[
        bool,
        typer.Option(
            "--no-embed",
            help="Return once imported: search by text works at once, by meaning after the daemon or the next "
            "search embeds the queue",
        ),
    ] = False,
    restore: Annotated[
        bool,
        typer.Option(
            "--restore",
            help="Admin only: restore exactly as exported (trust, authors, counters, times, history), audited "
            "as a restore. Without it lessons land as candidates by you, the file's claims kept as claims",
        ),
    ] = False,
) -> None:
    """Import JSONL (a Cairn export, or plain {scope,key,value,...} records). Idempotent.

    Then embeds what it queued, with a second progress bar, so the store answers searches by meaning
    when the command returns (Ctrl-C stops the embedding safely: what is left stays queued)."""
    if source is not None and source not in ("lorekit", "memory-gateway"):
        raise CairnError("INVALID_INPUT", f"--from must be lorekit or memory-gateway; got {source!r}")
    service, p = svc()
    if source == "lorekit":
        from cairn.compat.lorekit.importer import import_store

        if scope is not None:
            raise CairnError("INVALID_INPUT", "--scope does not apply to --from lorekit: each memory keeps its scope")
        with render.progress(enabled=not S.g.json and sys.stderr.isatty(), label="importing") as tick:
            result = import_store(service, p, file, progress=tick)
        for line in result["notes"]:
            S.out.note(f"skipped {line}")
        text = render.import_result(result) + f" from {result['files']} file(s) in {result['store']}"
        S.out.ok(result, text + _embed_imported(service, p, result, no_embed))
        return
    if source is not None or scope is not None:
        from cairn.compat.memory_gateway.importer import import_corpus

        result = import_corpus(service, p, file, source=source or "", scope=scope)
        text = render.import_result(result) + f" into {result['scope']}"
        S.out.ok(result, text + _embed_imported(service, p, result, no_embed))
        return
    if file == "-":
        lines = sys.stdin.read().splitlines()
    else:
        try:
            lines = Path(file).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CairnError("INVALID_INPUT", f"cannot read {file}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise CairnError("INVALID_INPUT", f"{file} is not UTF-8 text") from None
    with render.progress(enabled=not S.g.json and sys.stderr.isatty(), label="importing") as tick:
        result = service.import_lines(p, lines, restore=restore, progress=tick)
    if result["refused"]:
        S.out.note(f"{len(result['refused'])} record(s) refused; see --json for each reason")
    S.out.ok(result, render.import_result(result) + _embed_imported(service, p, result, no_embed))


def _embed_imported(service: Cairn, p: Principal, result: dict[str, Any], no_embed: bool) -> str:
    """Embed the queue an import left (``result["embedded"]``), with its own progress bar; the summary's tail.

    A remote server embeds its own queue in the background, so only a local store is drained here.
    """
    if no_embed or _remote_url() is not None:
        return ""
    with render.progress(enabled=not S.g.json and sys.stderr.isatty(), label="embedding for search by meaning") as tick:
        result["embedded"] = service.drain_embeddings(p, progress=tick)
    return render.embedded(result["embedded"])


def _register_account_commands() -> None:
    from cairn.cli.accounts import register
    from cairn.cli.gateway import register as register_gateway
    from cairn.cli.webhooks import register as register_webhooks

    register(app)
    register_gateway(app)
    register_webhooks(app)


_register_account_commands()


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
