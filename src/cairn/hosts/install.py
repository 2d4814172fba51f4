"""``cairn install claude-code|cursor|codex [--user|--project] [--uninstall] [--dry-run]``.

Writes the host's hook configuration so the host runs ``cairn hook ...`` at session start, on the first
prompt (a fallback for a session start that did not deliver) and after a failed tool call.

Rules, and why:

* **Ours is recognised by its command.** An entry is Cairn's when its command runs a ``cairn`` executable
  with the ``hook`` subcommand. Installing twice leaves one entry per event (an existing one is updated
  in place, so a moved executable is followed); ``--uninstall`` removes exactly those entries and
  nothing else.
* **Everything else survives.** Other keys, other events, other hooks in the same group keep their
  order; the file keeps its indentation and its final newline. If removing ours leaves a file with no
  settings at all (one we created), the file is deleted.
* **Refuse rather than guess.** A config that is not valid JSON (or a top level that is not an object)
  is left untouched and the install is refused with the file's name and the parse error.
* **A robust command.** The command is the absolute path of the running ``cairn`` when it can be found
  (hosts launched from a desktop do not inherit a virtualenv's PATH), else plain ``cairn``; ``--home`` (or
  ``$CAIRN_HOME``) is carried into the command, since a host does not inherit the shell's environment
  and the hooks must read the store the install was run against.

The default target is the user's config (``--user``): the command is an absolute path on this machine,
which does not belong in a file a team commits, and lessons are already scoped to the repository by the
context pipeline. ``--project`` writes the project file at the git root of the working directory.
For Codex the install also registers Cairn's MCP server in the ``config.toml`` beside ``hooks.json``
(``hosts/codex_mcp.py``: same rules, a TOML table instead of hook entries).

Standard library only, like the hooks.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.errors import CairnError
from cairn.hosts import HOSTS
from cairn.runtime.home import HOME_ENV, database_choice, home_dir

HOOK_TIMEOUT = 30  # seconds, for Claude Code and Codex; our own budget inside the hook is shorter

USAGE = "usage: cairn install claude-code|cursor|codex [--user|--project] [--uninstall] [--dry-run] [--command CMD]"


@dataclass(frozen=True)
class Hook:
    """One hook we install: the host's event name, its matcher (if the host uses one), our event."""

    native: str
    event: str
    matcher: str | None = None


# What each host gets. Claude Code and Codex share one file shape; Cursor has its own.
PLAN: dict[str, tuple[Hook, ...]] = {
    "claude-code": (
        Hook("SessionStart", "session-start"),
        Hook("UserPromptSubmit", "prompt-submit"),
        Hook("PostToolUseFailure", "tool-failure", "*"),
    ),
    "codex": (
        Hook("SessionStart", "session-start"),
        Hook("UserPromptSubmit", "prompt-submit"),
        # Codex has no failure event; PostToolUse fires for shell calls and the hook reads the output.
        Hook("PostToolUse", "tool-failure", "Bash"),
    ),
    "cursor": (
        Hook("sessionStart", "session-start"),
        Hook("beforeSubmitPrompt", "prompt-submit"),
        Hook("postToolUseFailure", "tool-failure"),
    ),
}


def _has_password(url: str) -> bool:
    """``user:password@`` or ``password=`` in a database URL."""
    netloc = url.partition("://")[2].partition("/")[0]
    return ":" in netloc.rpartition("@")[0] or "password=" in url.lower()


def main(argv: list[str], g: Any) -> int:
    """Entry from ``cairn install``: print a short summary (or one JSON envelope with ``--json``)."""
    from cairn.cli.output import Output
    from cairn.hosts.install_report import duplicate_warnings, notes, other_installs, summary

    opts = _parse_argv(argv)
    if opts.get("help"):
        sys.stdout.write(USAGE + "\n")
        return 0
    host = opts["host"]
    scope = opts["scope"]
    path = config_path(host, scope, Path.cwd())
    command = opts.get("command") or cairn_command()
    home = getattr(g, "home", None) or os.environ.get(HOME_ENV)
    if home:
        command += " --home " + _quote(str(Path(home_dir(home)).resolve()))
    db = database_choice(getattr(g, "db", None))
    if db:
        if _has_password(db):
            from cairn.errors import CairnError

            raise CairnError(
                "INVALID_INPUT",
                "the database URL holds a password, which the hook command would store in the host's "
                "config file; give the URL without it and let libpq find it (PGPASSWORD, ~/.pgpass)",
            )
        command += " --db " + _quote(db)

    # Codex reads MCP servers from the config.toml beside hooks.json: Cairn's is registered there too
    # (hosts/codex_mcp.py). Checked first, so a config.toml it cannot edit refuses before anything is written.
    mcp_config = path.parent / "config.toml" if host == "codex" else None
    if mcp_config is not None:
        from cairn.hosts import codex_mcp

        if opts["uninstall"]:
            codex_mcp.unregister(mcp_config, dry_run=True)
        else:
            codex_mcp.register(mcp_config, command, dry_run=True)
    if opts["uninstall"]:
        result = uninstall(host, path, dry_run=opts["dry_run"])
    else:
        result = install(host, path, command, dry_run=opts["dry_run"])
    if mcp_config is not None:
        if opts["uninstall"]:
            result["mcp"] = codex_mcp.unregister(mcp_config, dry_run=opts["dry_run"])
            if result["mcp"]["deleted"] and not opts["dry_run"]:
                _remove_empty_dir(mcp_config.parent)
        else:
            result["mcp"] = codex_mcp.register(mcp_config, command, dry_run=opts["dry_run"])
    result["scope"] = scope
    others = [] if opts["uninstall"] else other_installs(host, path, Path.cwd())
    result["also_installed"] = others
    result["warnings"] = duplicate_warnings(host, others)
    result["notes"] = notes(host, scope, path, uninstalling=opts["uninstall"])
    out = Output(json_mode=bool(getattr(g, "json", False)), verb="install")
    out.ok(result, summary(result))
    return 0


def _parse_argv(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {"host": None, "scope": "user", "uninstall": False, "dry_run": False}
    scopes: set[str] = set()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            return {"help": True}
        if arg == "--project":
            scopes.add("project")
        elif arg == "--user":
            scopes.add("user")
        elif arg == "--uninstall":
            opts["uninstall"] = True
        elif arg == "--dry-run":
            opts["dry_run"] = True
        elif arg == "--command" or arg.startswith("--command="):
            if "=" in arg:
                opts["command"] = arg.split("=", 1)[1]
            elif i + 1 < len(argv):
                opts["command"] = argv[i + 1]
                i += 1
            if not (opts.get("command") or "").strip():
                raise CairnError("INVALID_INPUT", "--command needs a value, e.g. --command cairn")
        elif arg.startswith("-"):
            raise CairnError("INVALID_INPUT", f"unknown option {arg} ({USAGE})")
        elif opts["host"] is None:
            opts["host"] = arg
        else:
            raise CairnError("INVALID_INPUT", f"unexpected argument {arg!r} ({USAGE})")
        i += 1
    if opts["host"] is None:
        raise CairnError("INVALID_INPUT", "which host? one of " + ", ".join(HOSTS))
    if opts["host"] not in HOSTS:
        raise CairnError("INVALID_INPUT", f"unknown host {opts['host']!r}; one of " + ", ".join(HOSTS))
    if len(scopes) > 1:
        raise CairnError("INVALID_INPUT", "choose one of --user or --project")
    if scopes:
        opts["scope"] = scopes.pop()
    return opts


# ---------------------------------------------------------------------------------------------- paths


def config_path(host: str, scope: str, cwd: Path) -> Path:
    """Where ``host`` reads hooks from, for ``scope`` (``user`` or ``project``)."""
    if scope == "project":
        root = project_root(cwd)
        sub = {"claude-code": ".claude/settings.json", "cursor": ".cursor/hooks.json", "codex": ".codex/hooks.json"}
        return root / sub[host]
    home = Path(os.environ.get("HOME") or Path.home())
    if host == "claude-code":
        base = os.environ.get("CLAUDE_CONFIG_DIR")
        return (Path(base).expanduser() if base else home / ".claude") / "settings.json"
    if host == "codex":
        base = os.environ.get("CODEX_HOME")
        return (Path(base).expanduser() if base else home / ".codex") / "hooks.json"
    return home / ".cursor" / "hooks.json"


def project_root(cwd: Path) -> Path:
    """The git root above ``cwd`` (a ``.git`` directory or worktree file), else ``cwd`` itself."""
    cwd = cwd.resolve()
    for candidate in (cwd, *cwd.parents):
        if (candidate / ".git").exists():
            return candidate
    return cwd


def cairn_command() -> str:
    """The running ``cairn`` as an absolute, shell-quoted path, or plain ``cairn`` when it cannot be found."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    candidates = []
    if Path(argv0).name in ("cairn", "cairn.exe"):
        candidates.append(argv0)
    found = shutil.which("cairn")
    if found:
        candidates.append(found)
    for candidate in candidates:
        path = Path(candidate)
        if path.is_file() and os.access(path, os.X_OK):
            return _quote(str(path.resolve()))
    return "cairn"


def _quote(text: str) -> str:
    return text if os.name == "nt" else shlex.quote(text)


def is_ours(command: Any) -> bool:
    """Is this hook command Cairn's? A ``cairn`` executable (any path) running the ``hook`` subcommand."""
    if not isinstance(command, str):
        return False
    try:
        tokens = shlex.split(command, posix=os.name != "nt")
    except ValueError:
        return False
    if len(tokens) < 2:
        return False
    name = tokens[0].replace("\\", "/").rsplit("/", 1)[-1].lower()
    return name in ("cairn", "cairn.exe") and "hook" in tokens[1:]


def hook_command(command: str, host: str, event: str) -> str:
    return f"{command} hook {event} --host {host}"


# --------------------------------------------------------------------------------------- read / write


def _load(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The config document (None when the file does not exist) and its original text."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        raise CairnError("SETUP", f"cannot read {path}: {exc}; nothing changed") from None
    if not text.strip():
        return {}, text
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise CairnError(
            "SETUP", f"{path} is not valid JSON ({exc}); fix or move it, then run install again. Nothing changed."
        ) from None
    if not isinstance(doc, dict):
        raise CairnError("SETUP", f"{path} does not hold a JSON object at the top level; nothing changed")
    return doc, text


def _dump(doc: dict[str, Any], original: str | None) -> str:
    """Serialise keeping the original file's indentation and final newline (2 spaces for a new file)."""
    indent: int | str | None = 2
    if original and len(original.strip().splitlines()) == 1:
        indent = None  # a one-line file stays on one line
    elif original:
        for line in original.splitlines()[1:]:
            stripped = line.lstrip(" \t")
            if stripped and len(stripped) < len(line):
                lead = line[: len(line) - len(stripped)]
                indent = "\t" if lead.startswith("\t") else len(lead)
                break
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    if original is None or not original.strip() or original.endswith("\n"):
        text += "\n"
    return text


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.cairn-{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    if path.exists():
        with contextlib.suppress(OSError):
            os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------ install / remove


def install(host: str, path: Path, command: str, *, dry_run: bool = False) -> dict[str, Any]:
    """Add (or update in place) one Cairn hook per planned event; remove stale Cairn hooks elsewhere."""
    doc, original = _load(path)
    new = json.loads(json.dumps(doc)) if doc is not None else {}
    if host == "cursor":
        new.setdefault("version", 1)
    hooks = new.get("hooks")
    if hooks is None:
        hooks = new["hooks"] = {}
    elif not isinstance(hooks, dict):
        raise CairnError("SETUP", f'{path}: "hooks" is not an object; nothing changed')

    for hook in PLAN[host]:
        if hook.native in hooks and not isinstance(hooks[hook.native], list):
            raise CairnError("SETUP", f'{path}: "hooks.{hook.native}" is not a list; nothing changed')

    added: list[str] = []
    updated: list[str] = []
    planned = {h.native for h in PLAN[host]}
    removed = [name for name in list(hooks) if name not in planned and _remove_ours(hooks, name)]
    for hook in PLAN[host]:
        cmd = hook_command(command, host, hook.event)
        state = _put(host, hooks, hook, cmd)
        if state == "added":
            added.append(hook.native)
        elif state == "updated":
            updated.append(hook.native)

    changed = doc is None or new != doc
    text = _dump(new, original)
    if changed and not dry_run:
        _write(path, text)
    action = "installed" if changed else "unchanged"
    return {
        "host": host,
        "path": str(path),
        "action": action,
        "added": added,
        "updated": updated,
        "removed": removed,
        "command": command,
        "events": [h.native for h in PLAN[host]],
        "dry_run": dry_run,
        "preview": text if dry_run and changed else None,
    }


def uninstall(host: str, path: Path, *, dry_run: bool = False) -> dict[str, Any]:
    """Remove every Cairn hook from ``path``; delete the file when nothing else is left in it."""
    doc, original = _load(path)
    result: dict[str, Any] = {"host": host, "path": str(path), "added": [], "updated": [], "dry_run": dry_run}
    if doc is None:
        return {**result, "action": "nothing to remove", "removed": [], "deleted": False}
    new = json.loads(json.dumps(doc))
    hooks = new.get("hooks")
    removed: list[str] = []
    if isinstance(hooks, dict):
        removed = [name for name in list(hooks) if _remove_ours(hooks, name)]
        if not hooks:
            del new["hooks"]
    if not removed:
        return {**result, "action": "nothing to remove", "removed": [], "deleted": False}
    empty = not new or (host == "cursor" and set(new) == {"version"})
    if not dry_run:
        if empty:
            path.unlink()
            _remove_empty_dir(path.parent)
        else:
            _write(path, _dump(new, original))
    return {**result, "action": "uninstalled", "removed": removed, "deleted": empty}


def _put(host: str, hooks: dict[str, Any], hook: Hook, cmd: str) -> str:
    """Make ``hooks[hook.native]`` hold exactly one Cairn entry running ``cmd``: added/updated/unchanged.

    The first Cairn entry found is brought up to date in place (so its position, and any keys a person
    added to it, survive); further Cairn entries for the same event, from a hand-edited file, go.
    """
    groups = hooks.setdefault(hook.native, [])
    fresh = _entry(host, hook, cmd)
    locations: list[tuple[int, int | None]] = []
    for gi, group in enumerate(groups):
        if not isinstance(group, dict):
            continue
        if host == "cursor":
            if is_ours(group.get("command")):
                locations.append((gi, None))
            continue
        inner = group.get("hooks")
        if isinstance(inner, list):
            ours = (hi for hi, item in enumerate(inner) if isinstance(item, dict) and is_ours(item.get("command")))
            locations.extend((gi, hi) for hi in ours)
    if not locations:
        groups.append(fresh)
        return "added"

    state = "unchanged"
    gi, hi = locations[0]
    if hi is None:
        want = {**groups[gi], **fresh}
        if want != groups[gi]:
            groups[gi] = want
            state = "updated"
    else:
        group = groups[gi]
        item = group["hooks"][hi]
        want = {**item, **fresh["hooks"][0]}
        if want != item:
            group["hooks"][hi] = want
            state = "updated"
        if len(group["hooks"]) == 1 and hook.matcher is not None and group.get("matcher") != hook.matcher:
            group["matcher"] = hook.matcher
            state = "updated"
    emptied: set[int] = set()
    for gi, hi in reversed(locations[1:]):
        if hi is None:
            del groups[gi]
        else:
            del groups[gi]["hooks"][hi]
            if not groups[gi]["hooks"]:
                emptied.add(gi)
        state = "updated"
    if emptied:
        groups[:] = [g for i, g in enumerate(groups) if i not in emptied]
    return state


def _entry(host: str, hook: Hook, cmd: str) -> dict[str, Any]:
    if host == "cursor":
        return {"command": cmd}
    entry: dict[str, Any] = {}
    if hook.matcher is not None:
        entry["matcher"] = hook.matcher
    entry["hooks"] = [{"type": "command", "command": cmd, "timeout": HOOK_TIMEOUT}]
    return entry


def _remove_ours(hooks: dict[str, Any], name: str) -> bool:
    """Remove Cairn entries under ``hooks[name]``; drop groups and the event key they leave empty."""
    groups = hooks.get(name)
    if not isinstance(groups, list):
        return False
    removed = False
    keep = []
    for group in groups:
        if isinstance(group, dict) and is_ours(group.get("command")):
            removed = True  # Cursor's flat entry
            continue
        inner = group.get("hooks") if isinstance(group, dict) else None
        if isinstance(inner, list):
            rest = [h for h in inner if not (isinstance(h, dict) and is_ours(h.get("command")))]
            if len(rest) != len(inner):
                removed = True
                if not rest:
                    continue
                group = {**group, "hooks": rest}
        keep.append(group)
    if removed:
        if keep:
            hooks[name] = keep
        else:
            del hooks[name]
    return removed


def _remove_empty_dir(directory: Path) -> None:
    if directory.name in (".claude", ".cursor", ".codex"):
        with contextlib.suppress(OSError):
            directory.rmdir()  # only succeeds when empty: it was ours


# ------------------------------------------------------------------------------------------- reporting
