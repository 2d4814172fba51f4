"""``cairn doctor``: is this machine's Cairn working, and if not, what to do about it.

Each check looks at one part the way a session would meet it — the store, its schema, the daemon, the
embedding model, the installed hooks, and the git detection of the working directory — and reports
one of four levels: ``ok``; ``info`` (worth knowing, nothing to fix); ``warn`` (works, but not as
intended); ``problem`` (something a session will miss). Anything but ``ok`` carries a ``fix``: the
command or step that resolves it. The CLI prints the report and exits 1 when any check is a problem.

Doctor only looks: it never creates the store, migrates a schema, starts the daemon or edits a hook
file (a missing store is reported, not made). It sits beside the surfaces, not in ``core``: every
check is I/O on this machine.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cairn.errors import CairnError
from cairn.runtime.home import home_dir

LEVELS = ("ok", "info", "warn", "problem")


@dataclass(frozen=True)
class Check:
    name: str
    level: str
    detail: str
    fix: str | None = None
    data: dict[str, Any] | None = None


def run(home: Path, db: str | None, cwd: Path) -> dict[str, Any]:
    """Every check, in the order a session meets them, and whether all of them are free of problems."""
    store_checks, store = _store(home, db)
    checks = [*store_checks]
    if store is not None:
        try:
            checks.append(_schema(store))
        finally:
            store.dispose()
    checks += [_daemon(home), _model(), _hooks(home, cwd), _git(cwd)]
    problems = [c.name for c in checks if c.level == "problem"]
    return {
        "home": str(home),
        "healthy": not problems,
        "problems": problems,
        "checks": [{k: v for k, v in asdict(c).items() if v is not None} for c in checks],
    }


# ------------------------------------------------------------------------------------------------ store


def _store(home: Path, db: str | None) -> tuple[list[Check], Any]:
    from cairn.runtime.local import database_url
    from cairn.store.engine import Store, redact_url, sqlite_url

    url = database_url(home, db)
    if url == sqlite_url(home):
        path = home / "cairn.db"
        if not path.exists():
            return [
                Check(
                    "store",
                    "info",
                    f"no store yet at {path}",
                    "nothing to do: the first command that writes creates it (e.g. cairn write …)",
                )
            ], None
        if not os.access(path, os.R_OK | os.W_OK):
            return [Check("store", "problem", f"{path} is not readable and writable by you", f"chmod 600 {path}")], None
    where = redact_url(url)
    try:
        store = Store(url)
        damage = store.quick_check()
    except CairnError as exc:
        return [Check("store", "problem", exc.message, _store_fix(url))], None
    except Exception as exc:  # noqa: BLE001 - a file that is not a database: report, never a traceback
        return [Check("store", "problem", f"{where} cannot be opened ({type(exc).__name__})", _store_fix(url))], None
    if damage:
        store.dispose()
        return [
            Check(
                "store",
                "problem",
                f"{where} fails SQLite's integrity check: {'; '.join(damage[:3])}",
                "restore from a backup (cairn export/import), or copy the file aside and run sqlite3's .recover",
                {"quick_check": damage[:20]},
            )
        ], None
    said = "opens; integrity quick check ok" if store.dialect == "sqlite" else "answers"
    return [Check("store", "ok", f"{where} {said}", data={"dialect": store.dialect})], store


def _store_fix(url: str) -> str:
    if url.startswith("sqlite"):
        return "check the file and its directory; restore from a backup if it is damaged"
    return "check the server is up and the URL (--db or CAIRN_DATABASE_URL); the password comes from libpq"


def _schema(store: Any) -> Check:
    from cairn.store.migrations import HEAD

    try:
        current = store.current_revision()
    except CairnError as exc:
        return Check("schema", "problem", exc.message, "cairn db upgrade")
    versions = Path(__file__).parent / "store" / "migrations" / "versions"
    known = {p.name.split("_", 1)[0] for p in versions.glob("[0-9]*.py")}
    data = {"revision": current, "head": HEAD}
    if current == HEAD:
        return Check("schema", "ok", f"at revision {HEAD}, this Cairn's newest", data=data)
    if current is not None and current not in known:
        return Check(
            "schema",
            "problem",
            f"at revision {current}, newer than this Cairn knows ({HEAD})",
            "upgrade Cairn to the version that wrote this database",
            data,
        )
    state = f"at revision {current}" if current else "empty (no Cairn schema yet)"
    if store.dialect == "sqlite":
        return Check(
            "schema",
            "info",
            f"{state}; this Cairn needs {HEAD}",
            "nothing to do: SQLite upgrades itself on the next command (or now: cairn db upgrade)",
            data,
        )
    return Check(
        "schema",
        "problem",
        f"{state}; this Cairn needs {HEAD}, and Postgres is migrated only on purpose",
        "cairn db upgrade, with the database owner's credentials",
        data,
    )


# ----------------------------------------------------------------------------------------------- daemon


def _daemon(home: Path) -> Check:
    from cairn.daemon import protocol
    from cairn.runtime.client import ask_daemon

    sock = Path(protocol.socket_path(home))
    loose = sorted({str(d) for d in (home, sock.parent) if d.exists() and stat.S_IMODE(d.stat().st_mode) & 0o077})
    widen = f"{' '.join(loose)} can be entered by other users (the daemon's socket lives there)"
    try:
        answer = ask_daemon(home, {"v": protocol.PROTOCOL, "op": "ping", "params": {}})
    except CairnError as exc:
        return Check("daemon", "problem", f"the daemon at {sock} does not answer: {exc.message}", "restart cairn serve")
    if answer is None:
        if loose:  # nothing listens yet; `cairn serve` tightens these before it creates the socket
            return Check("daemon", "warn", f"not running; {widen}", f"chmod 700 {' '.join(loose)}")
        if sock.exists():
            return Check(
                "daemon",
                "warn",
                f"{sock} is left from a daemon that is gone; hooks work in-process (slower)",
                "cairn serve & (it replaces the stale socket)",
            )
        return Check(
            "daemon",
            "info",
            "not running: hooks and context work in-process (about a second each)",
            "cairn serve & for answers in milliseconds",
        )
    if loose:
        return Check("daemon", "problem", f"running, but {widen}", f"chmod 700 {' '.join(loose)}")
    mode = stat.S_IMODE(sock.stat().st_mode)
    owner = sock.stat().st_uid
    if mode & 0o077 or owner != os.getuid():
        return Check(
            "daemon",
            "problem",
            f"the socket {sock} is mode {mode:o}, owner uid {owner}: other users may reach it",
            "stop cairn serve and start it again (it creates the socket 0600)",
        )
    if not answer.get("ok"):
        reason = (answer.get("error") or {}).get("code", "an error")
        return Check("daemon", "problem", f"the daemon answers {reason}", "restart cairn serve")
    pid = (answer.get("data") or {}).get("pid")
    return Check("daemon", "ok", f"running (pid {pid}), socket {sock} owner-only", data={"pid": pid})


# ------------------------------------------------------------------------------------------------ model


def _model() -> Check:
    from cairn.search.embed import ENV_MODEL, HASH_MODEL_NAME, MODEL_NAME

    name = os.environ.get(ENV_MODEL, "").strip() or MODEL_NAME
    try:
        from cairn.search.embed import get_embedder

        embedder = get_embedder()
        embedder.embed(["cairn doctor"])
    except CairnError as exc:
        return Check(
            "model",
            "problem",
            f"the embedding model {name} does not load: {exc.message}",
            "reinstall Cairn (make setup); search and recall fall back to words only meanwhile",
        )
    except Exception as exc:  # noqa: BLE001 - a broken runtime is a finding, not a crash
        return Check("model", "problem", f"the embedding model {name} fails ({type(exc).__name__})", "make setup")
    data = {"model": embedder.name}
    if embedder.name == HASH_MODEL_NAME:
        detail = f"{embedder.name} loads, a test model: search by meaning is not real"
        return Check("model", "warn", detail, f"unset {ENV_MODEL} for {MODEL_NAME}, then cairn reindex", data)
    return Check("model", "ok", f"{embedder.name} loads", data=data)


# ------------------------------------------------------------------------------------------------ hooks


def _hooks(home: Path, cwd: Path) -> Check:
    from cairn.hosts.install_report import ALSO_READS, installed_hooks

    found = installed_hooks(cwd)
    if not found:
        return Check(
            "hooks",
            "info",
            "no agent host runs Cairn's hooks (checked Claude Code, Cursor and Codex, user and project files)",
            "cairn install claude-code (or cursor, codex)",
            {"installed": []},
        )
    issues: list[str] = []
    fixes: list[str] = []
    for entry in found:
        command = _installed_command(Path(entry["path"]))
        entry["command"] = command
        exe = _executable(command)
        if exe is not None and not (shutil.which(exe) or Path(exe).is_file()):
            missing = "which is not on this PATH" if os.sep not in exe else "which does not exist"
            issues.append(f"{entry['path']} runs {exe}, {missing}")
            fixes.append(f"cairn install {entry['host']}{' --project' if entry['scope'] == 'project' else ''}")
        their_home = _option(command, "--home")
        if their_home and Path(home_dir(their_home)).resolve() != home.resolve():
            issues.append(f"{entry['path']} reads the store at {their_home}, not {home}")
    for host in {e["host"] for e in found}:
        runs = [e for e in found if e["host"] in (host, *ALSO_READS.get(host, ()))]
        if len(runs) > 1:
            files = ", ".join(e["path"] for e in runs)
            issues.append(f"{host} sessions run Cairn's hooks from {len(runs)} files ({files}); each hook runs twice")
            fixes.append(f"keep one: cairn install {host} --project --uninstall (or --user)")
    listed = "; ".join(f"{e['host']} ({e['scope']}) {e['path']}" for e in found)
    data = {"installed": found}
    if fixes and any(f.startswith("cairn install") for f in fixes):  # a hook that cannot run at all
        return Check("hooks", "problem", "; ".join(issues), "; ".join(dict.fromkeys(fixes)), data)
    if issues:
        return Check("hooks", "warn", "; ".join(issues), "; ".join(dict.fromkeys(fixes)) or None, data)
    return Check("hooks", "ok", f"installed: {listed}", data=data)


def _installed_command(path: Path) -> str | None:
    """One of the Cairn hook commands in ``path`` (they differ only by event)."""
    import json

    from cairn.hosts.install import is_ours

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for groups in (doc.get("hooks") or {}).values() if isinstance(doc, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            items = [group, *(group.get("hooks") or [])] if isinstance(group, dict) else []
            for item in items:
                if isinstance(item, dict) and is_ours(item.get("command")):
                    return str(item["command"])
    return None


def _tokens(command: str | None) -> list[str]:
    try:
        return shlex.split(command or "")
    except ValueError:
        return []


def _executable(command: str | None) -> str | None:
    tokens = _tokens(command)
    return tokens[0] if tokens else None


def _option(command: str | None, name: str) -> str | None:
    tokens = _tokens(command)
    for i, token in enumerate(tokens[:-1]):
        if token == name:
            return tokens[i + 1]
    return None


# -------------------------------------------------------------------------------------------------- git


def _git(cwd: Path) -> Check:
    from cairn.core.scope import ladder
    from cairn.runtime.gitinfo import detect

    found = detect(cwd)
    rungs = ladder(repo=found.repo, branch=found.branch, project=found.project)
    data = {"root": str(found.root) if found.root else None, "repo": found.repo, "branch": found.branch,
            "project": found.project, "how": found.how, "ladder": rungs}  # fmt: skip
    if found.root is None:
        return Check(
            "git", "info", f"{cwd} is not in a git checkout: sessions here read the global scope only", data=data
        )
    where = f"{found.root}: repo {found.repo or '-'}, branch {found.branch or '- (detached HEAD or unusual name)'}"
    if found.note:
        level = "warn" if found.repo is None else "info"
        fix = "add a remote (git remote add origin URL), or pass --repo OWNER/NAME to context and recall"
        return Check("git", level, f"{where}; {found.note}", fix, data)
    return Check("git", "ok", f"{where} (from the {found.how} remote); ladder {' → '.join(rungs)}", data=data)


def render(report: dict[str, Any]) -> str:
    """The report for a person: one line per check, its fix below it, then the verdict."""
    lines = [f"Cairn doctor — home {report['home']}"]
    for check in report["checks"]:
        lines.append(f"  {check['level']:<8} {check['name']:<7} {check['detail']}")
        if check.get("fix"):
            lines.append(f"  {'':<8} {'':<7} fix: {check['fix']}")
    problems = report["problems"]
    lines.append("healthy" if not problems else f"{len(problems)} problem(s): {', '.join(problems)}")
    return "\n".join(lines)
