"""Cairn's MCP server in Codex's ``config.toml``: ``[mcp_servers.cairn]`` with ``command`` and ``args``.

``cairn install codex`` registers it next to the hooks (Codex reads MCP servers from the
``config.toml`` beside ``hooks.json``: ``~/.codex`` or ``$CODEX_HOME``, or a trusted project's
``.codex``), and ``--uninstall`` removes it. The rules follow the hook installer's:

* **Ours is recognised by its content.** The table is Cairn's when its command is a ``cairn``
  executable whose arguments end in ``mcp`` with nothing before it but ``--home``/``--db`` (what the
  installer writes), or when it is exactly what this install would write. A ``[mcp_servers.cairn]``
  a person wrote otherwise (a team server's ``url``, ``mcp --url …``) is left alone, with a note.
* **Everything else survives, byte for byte.** The file is edited as text: our table is appended, or
  its ``command``/``args`` lines are replaced in place (other keys a person added to it stay), or its
  lines are removed. A file left empty by the removal is deleted (Cairn created it).
* **Refuse rather than guess.** The edited text is parsed again and must equal the old document with
  only ``mcp_servers.cairn`` changed; a config that does not parse, or an edit that would change
  anything else (an inline ``mcp_servers = {…}`` table, a table spread over dotted keys), is refused
  with SETUP and the table to add by hand, before anything is written.

Standard library only, like the rest of the installer.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

from cairn.errors import CairnError

NAME = "cairn"
_HEADER = re.compile(r"""^\s*\[\s*mcp_servers\s*\.\s*(?:cairn|"cairn"|'cairn')\s*\]\s*(?:#.*)?$""")
_SUBTABLE = re.compile(r"""^\s*\[\s*mcp_servers\s*\.\s*(?:cairn|"cairn"|'cairn')\s*\.""")
_ANY_HEADER = re.compile(r"^\s*\[")
_KEY = re.compile(r"^\s*(command|args)\s*=")


def server_for(command: str) -> dict[str, Any]:
    """The server entry for a hook command line (``/path/cairn --home DIR``): the same executable and
    store, running ``mcp``."""
    tokens = shlex.split(command, posix=os.name != "nt")
    if not tokens:
        raise CairnError("INVALID_INPUT", "--command needs a value, e.g. --command cairn")
    return {"command": tokens[0], "args": [*tokens[1:], "mcp"]}


def is_ours(entry: Any, wanted: dict[str, Any] | None = None) -> bool:
    """Is this ``[mcp_servers.cairn]`` table the one Cairn's installer writes?"""
    if not isinstance(entry, dict):
        return False
    if wanted is not None and {k: entry.get(k) for k in ("command", "args")} == wanted:
        return True
    command, args = entry.get("command"), entry.get("args")
    if not isinstance(command, str) or not isinstance(args, list) or not args or args[-1] != "mcp":
        return False
    name = command.replace("\\", "/").rsplit("/", 1)[-1].lower()
    flags = args[:-1]
    pairs_ok = len(flags) % 2 == 0 and all(flag in ("--home", "--db") for flag in flags[::2])
    return name in ("cairn", "cairn.exe") and pairs_ok and "url" not in entry


def register(config: Path, command: str, *, dry_run: bool = False) -> dict[str, Any]:
    """Add or update ``[mcp_servers.cairn]`` in ``config``; the change, for the install summary."""
    wanted = server_for(command)
    doc, text = _load(config)
    current = _servers(doc).get(NAME)
    result: dict[str, Any] = {"path": str(config), "server": wanted, "dry_run": dry_run}
    if current is not None and not is_ours(current, wanted):
        return {**result, "action": "left alone", "server": current}
    if current is not None and {k: current.get(k) for k in ("command", "args")} == wanted:
        return {**result, "action": "unchanged"}
    if current is None:
        new_text = _append(text or "", wanted)
        action = "registered"
    else:
        new_text = _replace(config, text or "", wanted)
        action = "updated"
    _check(config, doc, new_text, wanted)
    if not dry_run:
        _write(config, new_text)
    return {**result, "action": action}


def unregister(config: Path, *, dry_run: bool = False) -> dict[str, Any]:
    """Remove Cairn's ``[mcp_servers.cairn]`` from ``config`` (the file too, when nothing else is left)."""
    result: dict[str, Any] = {"path": str(config), "dry_run": dry_run, "deleted": False}
    if not config.exists():
        return {**result, "action": "nothing to remove"}
    doc, text = _load(config)
    current = _servers(doc).get(NAME)
    if current is None:
        return {**result, "action": "nothing to remove"}
    if not is_ours(current):
        return {**result, "action": "left alone", "server": current}
    start, end = _block(config, text or "")
    lines = (text or "").splitlines(keepends=True)
    kept = lines[:start] + lines[end:]
    if start > 0 and kept[start - 1] == "\n" and (start == len(kept) or kept[start] == "\n"):
        del kept[start - 1]  # the blank line the install put before our table
    new_text = "".join(kept)
    _check(config, doc, new_text, None)
    empty = not new_text.strip()
    if not dry_run:
        if empty:
            config.unlink()
        else:
            _write(config, new_text)
    return {**result, "action": "removed", "deleted": empty}


# ------------------------------------------------------------------------------------------ text edits


def _table(server: dict[str, Any]) -> str:
    # JSON's string escapes are TOML basic-string escapes; the result is parsed again before writing.
    args = ", ".join(json.dumps(a) for a in server["args"])
    return f"command = {json.dumps(server['command'])}\nargs = [{args}]\n"


def _append(text: str, server: dict[str, Any]) -> str:
    head = "[mcp_servers.cairn]  # Cairn's MCP server: cairn install codex (--uninstall removes it)\n"
    if not text.strip():
        return head + _table(server)
    sep = "" if text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
    return text + sep + head + _table(server)


def _block(config: Path, text: str) -> tuple[int, int]:
    """The line range of the ``[mcp_servers.cairn]`` table (and its subtables) in ``text``."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if start is None:
        raise _manual(config, "[mcp_servers.cairn] is not written as its own table")
    end = start + 1
    while end < len(lines) and not (_ANY_HEADER.match(lines[end]) and not _SUBTABLE.match(lines[end])):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # the blank lines before the next table belong to neither
    return start, end


def _replace(config: Path, text: str, server: dict[str, Any]) -> str:
    """Our table with new ``command``/``args`` lines; every other line of it kept."""
    start, end = _block(config, text)
    lines = text.splitlines(keepends=True)
    body: list[str] = []
    skipping = in_subtable = False
    for line in lines[start + 1 : end]:
        if skipping:  # the rest of a multi-line args array
            skipping = "]" not in line
            continue
        in_subtable = in_subtable or bool(_ANY_HEADER.match(line))  # [mcp_servers.cairn.env]: not our keys
        match = None if in_subtable else _KEY.match(line)
        if match:
            skipping = match.group(1) == "args" and line.count("[") > line.count("]")
            continue
        body.append(line)
    return "".join([*lines[: start + 1], _table(server), *body, *lines[end:]])


# ----------------------------------------------------------------------------------------- load/check


def _load(config: Path) -> tuple[dict[str, Any], str | None]:
    try:
        text = config.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError) as exc:
        raise CairnError("SETUP", f"cannot read {config}: {exc}; nothing changed") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        raise CairnError(
            "SETUP", f"{config} is not valid TOML ({exc}); fix or move it, then run install again. Nothing changed."
        ) from None


def _servers(doc: dict[str, Any]) -> dict[str, Any]:
    servers = doc.get("mcp_servers")
    return servers if isinstance(servers, dict) else {}


def _check(config: Path, before: dict[str, Any], new_text: str, server: dict[str, Any] | None) -> None:
    """The edit changed ``mcp_servers.cairn`` and nothing else, or nothing is written."""
    try:
        after = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise _manual(config, f"the edit would not parse ({exc})") from None
    expected = json.loads(json.dumps(before, default=str))
    servers = expected.setdefault("mcp_servers", {})
    if server is None:
        servers.pop(NAME, None)
        if not servers:
            del expected["mcp_servers"]
    else:
        servers[NAME] = {**servers.get(NAME, {}), **server}
    if json.loads(json.dumps(after, default=str)) != expected:
        raise _manual(config, "the edit would change more than [mcp_servers.cairn]")


def _manual(config: Path, why: str) -> CairnError:
    return CairnError(
        "SETUP",
        f"cannot edit {config} safely: {why}. Nothing changed; edit [mcp_servers.cairn] by hand "
        '(command = "cairn", args = ["mcp"]) or remove it, then run install again.',
    )


def _write(path: Path, text: str) -> None:
    from cairn.hosts.install import _write as write_atomically  # the installer's one atomic write

    write_atomically(path, text)


def summary(mcp: dict[str, Any]) -> list[str]:
    """The install summary's lines for the MCP server."""
    where, action = mcp["path"], mcp["action"]
    dry = mcp.get("dry_run")
    if action in ("registered", "updated"):
        verb = {"registered": "register", "updated": "update"}[action]
        verb = f"would {verb}" if dry else action
        line = shlex.join([mcp["server"]["command"], *mcp["server"]["args"]])
        return [f"{verb} Cairn's MCP server in {where}: [mcp_servers.cairn] runs {line}"]
    if action == "unchanged":
        return [f"Cairn's MCP server already registered in {where}"]
    if action == "removed":
        line = f"{'would remove' if dry else 'removed'} Cairn's MCP server from {where}"
        return [line + (" (and the file: nothing else was in it)" if mcp.get("deleted") else "")]
    if action == "left alone":
        return [f"{where} already has an [mcp_servers.cairn] that Cairn did not write; left as it is"]
    return []
