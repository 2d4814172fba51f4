"""What an install finds and says: the hooks already installed on this machine (``cairn doctor`` reads
them too), other installs whose hooks the same sessions would also run, the notes a user must know,
and the summary printed after an install or uninstall."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cairn.errors import CairnError
from cairn.hosts import HOSTS
from cairn.hosts.install import _load, _remove_ours, config_path


def notes(host: str, scope: str, path: Path, *, uninstalling: bool) -> list[str]:
    """What the user must know that the file cannot say: host switches, trust prompts, known gaps."""
    out: list[str] = []
    if uninstalling:
        return out
    if host == "codex":
        config = path.parent / "config.toml"
        disabled = _codex_hooks_disabled(config)
        if disabled:
            out.append(f"{config} turns hooks off ({disabled}); set [features] hooks = true for them to run")
        out.append("Codex asks you to review and trust new hooks before it runs them")
        out.append("Codex reports no exit status to hooks: failures are recognised from the command output")
    if host == "cursor":
        out.append("restart Cursor (or open a new agent chat) for hooks.json changes to load")
    if scope == "project":
        out.append(
            "the command holds this machine's path to cairn; keep the file out of version control or "
            "reinstall with --command cairn"
        )
    return out


# Hosts that also run the hooks in another host's files: Cursor loads Claude Code's settings too.
ALSO_READS: dict[str, tuple[str, ...]] = {"cursor": ("claude-code",)}


def installed_hooks(cwd: Path) -> list[dict[str, Any]]:
    """Every hook file, per host and scope, that holds Cairn's hooks (for doctor and the install warning)."""
    found: list[dict[str, Any]] = []
    seen: set[Path] = set()
    for host in HOSTS:
        for scope in ("user", "project"):
            path = config_path(host, scope, cwd)
            if path in seen:
                continue
            seen.add(path)
            events = _our_events(path)
            if events:
                found.append({"host": host, "scope": scope, "path": str(path), "events": events})
    return found


def _our_events(path: Path) -> list[str]:
    """The events under which ``path`` runs Cairn's hook (none for a missing or unreadable file)."""
    try:
        doc, _ = _load(path)
    except CairnError:
        return []
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    if not isinstance(hooks, dict):
        return []
    events = []
    for name, groups in hooks.items():
        probe = {name: json.loads(json.dumps(groups))}
        if _remove_ours(probe, name):
            events.append(name)
    return events


def other_installs(host: str, path: Path, cwd: Path) -> list[dict[str, Any]]:
    """Cairn's hooks installed elsewhere that this host's sessions also run (another scope of the same
    host, or a file of another host this one also reads): each fires for the same session."""
    reads = {host, *ALSO_READS.get(host, ())}
    readers = {h for h, also in ALSO_READS.items() if host in also}  # hosts that read this host's file
    return [
        entry
        for entry in installed_hooks(cwd)
        if Path(entry["path"]) != path and (entry["host"] in reads or entry["host"] in readers)
    ]


def duplicate_warnings(host: str, others: list[dict[str, Any]]) -> list[str]:
    """One warning per other install: what runs twice, and how to remove the one not wanted."""
    out = []
    for other in others:
        flag = "--project" if other["scope"] == "project" else "--user"
        out.append(
            f"Cairn's hooks are also installed for {other['host']} ({other['scope']}) in {other['path']}, "
            f"and {host} sessions run both; each session still gets the block once, but every hook runs "
            f"twice. Keep one: cairn install {other['host']} {flag} --uninstall"
        )
    return out


def _codex_hooks_disabled(config: Path) -> str | None:
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    features = data.get("features")
    if not isinstance(features, dict):
        return None
    for key in ("hooks", "codex_hooks"):
        if features.get(key) is False:
            return f"[features] {key} = false"
    return None


def summary(result: dict[str, Any]) -> str:
    lines: list[str] = []
    dry = " (dry run: nothing written)" if result.get("dry_run") else ""
    action = result["action"]
    where = result["path"]
    if action == "installed":
        verb = "would install" if result.get("dry_run") else "installed"
        lines.append(f"{verb} Cairn hooks for {result['host']} in {where}{dry}")
        lines.extend(_list("added", result.get("added")))
        lines.extend(_list("updated", result.get("updated")))
        lines.extend(_list("removed stale", result.get("removed")))
        lines.append(f"  command: {result['command']} hook <event> --host {result['host']}")
        if result.get("preview"):
            lines.append(result["preview"].rstrip("\n"))
    elif action == "unchanged":
        lines.append(f"Cairn hooks for {result['host']} already installed in {where}; nothing changed")
    elif action == "uninstalled":
        verb = "would remove" if result.get("dry_run") else "removed"
        lines.append(f"{verb} Cairn hooks for {result['host']} from {where}{dry}")
        lines.extend(_list("events", result.get("removed")))
        if result.get("deleted"):
            lines.append(f"  {'would delete' if result.get('dry_run') else 'deleted'} {where}: nothing else was in it")
    else:
        lines.append(f"no Cairn hooks for {result['host']} in {where}; nothing changed")
    if result.get("mcp"):
        from cairn.hosts.codex_mcp import summary as mcp_summary

        lines.extend(mcp_summary(result["mcp"]))
    lines.extend(f"warning: {w}" for w in result.get("warnings") or [])
    lines.extend(f"note: {n}" for n in result.get("notes") or [])
    return "\n".join(lines)


def _list(label: str, items: Iterable[str] | None) -> list[str]:
    items = list(items or [])
    return [f"  {label}: {', '.join(items)}"] if items else []
