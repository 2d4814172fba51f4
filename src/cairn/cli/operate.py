"""Running and operating a store: `config`, `db`, `serve`, `status`, `doctor`, `reindex`, `export`,
`import`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cairn.cli import render
from cairn.cli.app import (
    S,
    _home,
    _local_only,
    _remote_url,
    app,
    config_app,
    db_app,
    svc,
)
from cairn.cli.args import default_to
from cairn.errors import CairnError

if TYPE_CHECKING:
    from cairn.core.principal import Principal
    from cairn.service.api import Cairn
    from cairn.store.engine import Store


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


default_to(config_app, config_show, "Settings and where each value came from (same as: cairn config show).")


@contextmanager
def _local_store(what: str) -> Iterator[Store]:
    """The local database this command works on, disposed after; ``what`` names the command in the
    refusal a remote connection gets (schema work is the server owner's)."""
    _local_only(what)
    from cairn.runtime.local import database_url
    from cairn.store.engine import Store

    store = Store(database_url(_home(), S.g.db))
    try:
        yield store
    finally:
        store.dispose()


@db_app.command("status")
def db_status() -> None:
    """Which database this command uses and whether its schema is current (changes nothing)."""
    with _local_store("cairn db status") as store:
        current = store.current_revision()
        security = store.security() if current else None
    from cairn.store.engine import redact_url
    from cairn.store.migrations import HEAD

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


default_to(db_app, db_status, "Which database, at which schema revision (subcommand: upgrade).")


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Run the schema migrations up to the newest revision (the same history on SQLite and Postgres)."""
    with _local_store("cairn db upgrade") as store:
        before, after = store.upgrade()
    from cairn.store.engine import redact_url
    from cairn.store.migrations import HEAD

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
        data["daemon"] = {k: d.get(k) for k in ("pid", "uptime_seconds", "idle_exit_minutes", "requests", "version")}
        idle = d.get("idle_exit_minutes")
        daemon_line = f"running · pid {d.get('pid')} · up {_duration(d.get('uptime_seconds') or 0)} · " + (
            f"exits after {idle:g} idle minute(s)" if idle else "runs until stopped"
        )
        from cairn import __version__

        if d.get("version") != __version__:  # it serves none of this version's commands
            daemon_line += f" · Cairn {d.get('version') or 'older'}, not this {__version__}: kill {d.get('pid')}"
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
            help="Return once imported: search by text works at once, by meaning after the daemon embeds the "
            "queue in the background",
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

    Then embeds what it queued, with a second progress bar ("searchable by meaning: N of M"), so the
    store answers searches by meaning when the command returns (Ctrl-C stops the embedding safely: what
    is left stays queued for the daemon, and searches find it by its words meanwhile)."""
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
    bars = not S.g.json and sys.stderr.isatty()
    if no_embed or _remote_url() is not None:
        with render.progress(enabled=bars, label="writing lessons") as tick:
            result = service.import_lines(p, lines, restore=restore, progress=tick)
    else:
        # The embedding starts with the first committed batch and runs beside the writing (two bars).
        with render.progress_bars(bars, ["writing lessons", "searchable by meaning"]) as (writing, embedding):
            try:
                with service.drain_alongside(p, progress=embedding) as drained:
                    result = service.import_lines(p, lines, restore=restore, progress=writing)
            except KeyboardInterrupt:
                S.out.note(render.still_queued(service.pending_embeddings(p), _who_embeds()))
                raise
        result["embedded"] = drained["embedded"]
    if result["refused"]:
        S.out.note(f"{len(result['refused'])} record(s) refused; see --json for each reason")
    S.out.ok(result, render.import_result(result) + _embed_imported(service, p, result, no_embed=True))


def _embed_imported(service: Cairn, p: Principal, result: dict[str, Any], no_embed: bool) -> str:
    """Embed the queue an import left (``result["embedded"]``) with its own progress bar ("searchable by
    meaning: N of M"); the summary's tail says whether the store is searchable by meaning, or how many
    lessons still wait (``result["pending_embeddings"]``) and who embeds them.

    A remote server embeds its own queue in the background, so only a local store is drained here.
    Ctrl-C stops the embedding between batches: every batch written is kept, the rest stays queued.
    """
    if _remote_url() is not None:
        return ""
    if not no_embed and "embedded" not in result:
        with render.progress(enabled=not S.g.json and sys.stderr.isatty(), label="searchable by meaning") as tick:
            try:
                result["embedded"] = service.drain_embeddings(p, progress=tick)
            except KeyboardInterrupt:
                S.out.note(render.still_queued(service.pending_embeddings(p), _who_embeds()))
                raise
    result["pending_embeddings"] = service.pending_embeddings(p)
    return render.embedded(result.get("embedded"), result["pending_embeddings"], _who_embeds())


def _who_embeds() -> str:
    """Who embeds what an import left queued: a daemon runs here (this command may be running in it),
    or the next command starts one, or nobody in the background."""
    from cairn.runtime import forward

    if forward.enabled() and forward.auto_start_allowed(str(_home())):
        return "the daemon"
    return "cairn serve (or a slice per search)"
