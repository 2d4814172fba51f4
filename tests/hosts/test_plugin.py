"""The Claude Code plugin (``plugins/cairn``, offered by the repository's marketplace): its files hold to the
plugin format, its hooks are the ones ``cairn install claude-code`` writes, and each hook command and the
MCP server run as Claude Code would run them (a shell command with the event on stdin; an MCP client over
stdio).

The format checks are written from Claude Code's plugin documentation (code.claude.com/docs/en/plugins/
manifest-reference, …/plugins/marketplace-reference, …/hooks, …/mcp): the manifest at
``.claude-plugin/plugin.json`` with a kebab-case ``name``; components at the plugin root in the standard
layout (``hooks/hooks.json``, ``.mcp.json``), which load without being named in the manifest; hooks as
``{"hooks": {Event: [{"matcher"?, "hooks": [{"type": "command", "command", "timeout"?}]}]}}``; MCP
servers as ``{"mcpServers": {name: {"command", "args"?, "env"?}}}``; a marketplace at
``.claude-plugin/marketplace.json`` with ``name``, ``owner.name`` and ``plugins[].{name, source}``,
relative sources starting with ``./``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

import cairn
from cairn.hosts.install import install
from tests.conftest import ROOT
from tests.hosts.conftest import FROB_FAILURE, LESSONS, Runner

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)

# The plugin has a directory of its own: installing a plugin copies its whole directory, and the
# repository root of a checkout holds a virtualenv.
PLUGIN = ROOT / "plugins" / "cairn"
MANIFEST = PLUGIN / ".claude-plugin" / "plugin.json"
HOOKS = PLUGIN / "hooks" / "hooks.json"
MCP = PLUGIN / ".mcp.json"
MARKETPLACE = ROOT / ".claude-plugin" / "marketplace.json"

KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
SEMVER = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
# The manifest's documented top-level fields; Claude Code strips any other key (and the validator warns).
MANIFEST_FIELDS = {
    "$schema", "name", "version", "description", "author", "homepage", "repository", "license", "keywords",
    "commands", "agents", "skills", "hooks", "mcpServers", "outputStyles", "lspServers", "userConfig",
    "channels", "monitors",
}  # fmt: skip
PATH_FIELDS = ("commands", "agents", "skills", "hooks", "mcpServers", "outputStyles", "lspServers")
# Claude Code's hook events (hooks reference); a misspelt event would load and never fire.
EVENTS = {
    "SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
    "Notification", "Stop", "SubagentStart", "SubagentStop", "PreCompact", "PermissionRequest",
}  # fmt: skip
TOOL_EVENTS = {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest"}
RESERVED_MARKETPLACES = {
    "claude-code-marketplace", "claude-code-plugins", "claude-plugins-official", "anthropic-marketplace",
    "anthropic-plugins", "agent-skills", "anthropic-agent-skills",
}  # fmt: skip


def _load(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict), f"{path}: not a JSON object"
    return doc


# ------------------------------------------------------------------------------------------- format


def manifest_problems(doc: dict[str, Any]) -> list[str]:
    """What Claude Code's manifest rules refuse or strip in ``doc`` (empty: valid)."""
    out = []
    name = doc.get("name")
    if not isinstance(name, str) or not KEBAB.fullmatch(name):
        out.append(f"name must be kebab-case: {name!r}")
    if "version" in doc and not (isinstance(doc["version"], str) and SEMVER.fullmatch(doc["version"])):
        out.append(f"version must be semver: {doc['version']!r}")
    for key in ("description", "homepage", "repository", "license"):
        if key in doc and not isinstance(doc[key], str):
            out.append(f"{key} must be a string")
    author = doc.get("author")
    if author is not None and not (isinstance(author, dict) and isinstance(author.get("name"), str)):
        out.append("author must be an object with a name")
    keywords = doc.get("keywords")
    if keywords is not None and not (isinstance(keywords, list) and all(isinstance(k, str) for k in keywords)):
        out.append("keywords must be a list of strings")
    out.extend(f"unknown field {key!r} (Claude Code strips it)" for key in sorted(set(doc) - MANIFEST_FIELDS))
    for key in PATH_FIELDS:
        paths = doc.get(key)
        for p in [paths] if isinstance(paths, str) else paths if isinstance(paths, list) else []:
            if not (isinstance(p, str) and p.startswith("./") and ".." not in Path(p).parts):
                out.append(f"{key}: {p!r} must be relative to the plugin root and start with ./")
    if doc.get("hooks") in ("./hooks/hooks.json", "hooks/hooks.json"):
        out.append("hooks/hooks.json loads by itself; naming it in the manifest loads it twice")
    return out


def hooks_problems(doc: dict[str, Any]) -> list[str]:
    out = []
    out.extend(f"unknown top-level key {k!r}" for k in sorted(set(doc) - {"description", "hooks"}))
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict) or not hooks:
        return [*out, '"hooks" must be a non-empty object of events']
    for event, groups in hooks.items():
        if event not in EVENTS:
            out.append(f"unknown event {event!r}")
        if not isinstance(groups, list) or not groups:
            out.append(f"{event}: a non-empty list of matcher groups")
            continue
        for group in groups:
            if not isinstance(group, dict) or set(group) - {"matcher", "hooks"}:
                out.append(f"{event}: a group is {{matcher?, hooks}}: {group!r}")
                continue
            if "matcher" in group and (event not in TOOL_EVENTS or not isinstance(group["matcher"], str)):
                out.append(f"{event}: a matcher (a string) belongs to tool events only")
            for hook in group.get("hooks") or [None]:
                ok = isinstance(hook, dict) and hook.get("type") == "command" and isinstance(hook.get("command"), str)
                timeout = hook.get("timeout", 1) if isinstance(hook, dict) else None
                if not ok or not isinstance(timeout, int | float) or timeout <= 0:
                    out.append(f"{event}: a hook is {{type: command, command, timeout > 0}}: {hook!r}")
    return out


def mcp_problems(doc: dict[str, Any]) -> list[str]:
    servers = doc.get("mcpServers")
    if set(doc) != {"mcpServers"} or not isinstance(servers, dict) or not servers:
        return ['the file is {"mcpServers": {name: server}}']
    out = []
    for name, server in servers.items():
        if not isinstance(server, dict) or not isinstance(server.get("command"), str):
            out.append(f"{name}: a stdio server has a command")
            continue
        args = server.get("args", [])
        if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
            out.append(f"{name}: args is a list of strings")
        env = server.get("env", {})
        if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            out.append(f"{name}: env maps names to strings")
    return out


def test_the_manifest_is_valid_and_names_the_version() -> None:
    doc = _load(MANIFEST)
    assert manifest_problems(doc) == []
    assert doc["name"] == "cairn"
    assert doc["version"] == cairn.__version__  # released together with the package
    assert doc.get("description") and doc.get("author")  # the validator warns without them
    # Components sit at the plugin root, never inside .claude-plugin/; nothing else is copied on install.
    assert {p.name for p in MANIFEST.parent.iterdir()} == {"plugin.json"}
    assert {p.name for p in PLUGIN.iterdir()} == {".claude-plugin", "hooks", ".mcp.json", "README.md"}


def test_the_checks_refuse_what_claude_code_refuses() -> None:
    """The validators above can fail (each rule once)."""
    assert manifest_problems({"name": "Cairn Plugin", "version": "1", "hooks": "../x.json", "nme": 1}) == [
        "name must be kebab-case: 'Cairn Plugin'",
        "version must be semver: '1'",
        "unknown field 'nme' (Claude Code strips it)",
        "hooks: '../x.json' must be relative to the plugin root and start with ./",
    ]
    assert manifest_problems({"name": "cairn", "hooks": "./hooks/hooks.json"}) == [
        "hooks/hooks.json loads by itself; naming it in the manifest loads it twice"
    ]
    bad_hooks = {"hooks": {"SessionStarts": [{"hooks": [{"type": "command", "command": "x"}]}]}}
    assert hooks_problems(bad_hooks) == ["unknown event 'SessionStarts'"]
    assert hooks_problems({"hooks": {"SessionStart": [{"matcher": "*", "hooks": [{"type": "command"}]}]}}) == [
        "SessionStart: a matcher (a string) belongs to tool events only",
        "SessionStart: a hook is {type: command, command, timeout > 0}: {'type': 'command'}",
    ]
    assert mcp_problems({"cairn": {"command": "cairn"}}) == ['the file is {"mcpServers": {name: server}}']
    assert mcp_problems({"mcpServers": {"cairn": {"command": "cairn", "args": "mcp"}}}) == [
        "cairn: args is a list of strings"
    ]


def test_the_hooks_are_the_ones_cairn_install_writes(tmp_path: Path) -> None:
    """One definition: the plugin's hooks are ``cairn install claude-code --command cairn``'s, event for event."""
    doc = _load(HOOKS)
    assert hooks_problems(doc) == []
    install("claude-code", tmp_path / "settings.json", "cairn")
    assert doc["hooks"] == _load(tmp_path / "settings.json")["hooks"], "regenerate hooks/hooks.json from PLAN"


def test_the_mcp_server_is_cairn_mcp() -> None:
    doc = _load(MCP)
    assert mcp_problems(doc) == []
    assert doc["mcpServers"] == {"cairn": {"command": "cairn", "args": ["mcp"]}}


def test_the_marketplace_offers_this_plugin() -> None:
    """``/plugin marketplace add <this repository>`` then ``/plugin install cairn@cairn``."""
    doc = _load(MARKETPLACE)
    assert isinstance(doc.get("name"), str) and KEBAB.fullmatch(doc["name"])
    assert doc["name"] not in RESERVED_MARKETPLACES
    assert isinstance(doc.get("owner"), dict) and isinstance(doc["owner"].get("name"), str)
    (entry,) = doc["plugins"]
    assert entry["name"] == _load(MANIFEST)["name"]
    assert entry["source"].startswith("./")  # relative to the directory holding .claude-plugin/
    assert (ROOT / entry["source"]).resolve() == PLUGIN.resolve()
    assert {p.name for p in MARKETPLACE.parent.iterdir()} == {"marketplace.json"}


# ---------------------------------------------------------------------------------------------- run


def _plugin_env(runner: Runner, project: Path) -> dict[str, str]:
    """What Claude Code gives a plugin's commands: its own environment plus the plugin and project roots."""
    bin_dir = str(Path(sys.executable).parent)  # where `cairn` is installed, as uv tool / pipx put it on PATH
    return runner.env(
        {
            "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
            "CLAUDE_PLUGIN_ROOT": str(PLUGIN),
            "CLAUDE_PROJECT_DIR": str(project),
            "CAIRN_NO_DAEMON": "1",
        }
    )


def _commands() -> dict[str, str]:
    """Each event's command, with ``${CLAUDE_PLUGIN_ROOT}`` left for the shell, as Claude Code runs it."""
    hooks = _load(HOOKS)["hooks"]
    return {event: groups[0]["hooks"][0]["command"] for event, groups in hooks.items()}


def _run(command: str, payload: dict[str, Any], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["/bin/sh", "-c", command], input=json.dumps(payload), capture_output=True, text=True, env=env, cwd=cwd
    )
    assert proc.returncode == 0, (command, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc


def _context(proc: subprocess.CompletedProcess[str], event: str) -> str:
    out = json.loads(proc.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == event
    return out["hookSpecificOutput"]["additionalContext"]


@pytest.fixture
def project(seeded: Runner, tmp_path: Path) -> Path:
    """A checkout of acme/widget: the working directory Claude Code runs the hooks in."""
    checkout = tmp_path / "widget"
    checkout.mkdir()
    subprocess.run(["git", "-C", str(checkout), "init", "-q", "-b", "main"], check=True)
    subprocess.run(
        ["git", "-C", str(checkout), "remote", "add", "origin", "https://github.com/acme/widget"], check=True
    )
    return checkout


def test_each_hook_command_answers_claude_code(seeded: Runner, project: Path) -> None:
    env, commands = _plugin_env(seeded, project), _commands()
    assert set(commands) == {"SessionStart", "UserPromptSubmit", "PostToolUseFailure"}
    session = str(uuid.uuid4())
    base = {"session_id": session, "transcript_path": str(project / "t.jsonl"), "cwd": str(project)}
    base["permission_mode"] = "default"

    start = _run(
        commands["SessionStart"], {**base, "hook_event_name": "SessionStart", "source": "startup"}, env, project
    )
    block = _context(start, "SessionStart")
    assert block.startswith("Cairn: ") and all(key in block for key in LESSONS)
    assert "branch::acme/widget::main" in block.splitlines()[0]  # the ladder of the checkout in cwd

    # The block is in: the first prompt adds nothing.
    prompt = {**base, "hook_event_name": "UserPromptSubmit", "prompt": "fix the build"}
    assert _run(commands["UserPromptSubmit"], prompt, env, project).stdout == ""
    # A session whose start hook never ran gets it with its first prompt.
    other = {**prompt, "session_id": str(uuid.uuid4())}
    assert "frobnicate-lock" in _context(_run(commands["UserPromptSubmit"], other, env, project), "UserPromptSubmit")

    failure = {
        **base,
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": "frob --lock"},
        "tool_use_id": "toolu_01",
        "error": FROB_FAILURE,
        "is_interrupt": False,
    }
    recalled = _context(_run(commands["PostToolUseFailure"], failure, env, project), "PostToolUseFailure")
    assert "frobnicate-lock" in recalled and "zorp-cache" not in recalled


def test_a_missing_store_never_breaks_the_session(runner: Runner, project: Path) -> None:
    """An empty home: exit 0, nothing the host would read as context."""
    env = _plugin_env(runner, project)
    payload = {"session_id": "s-empty", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    assert _run(_commands()["SessionStart"], payload, env, project).stdout == ""


def test_the_mcp_server_runs_as_configured(seeded: Runner, project: Path) -> None:
    """``.mcp.json``'s command and args, started by the MCP SDK's client over stdio."""
    from mcp import Client, StdioServerParameters

    server = _load(MCP)["mcpServers"]["cairn"]
    params = StdioServerParameters(
        command=server["command"], args=server["args"], env=_plugin_env(seeded, project), cwd=str(project)
    )

    async def session() -> None:
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"write", "search", "context", "recall", "forget"} <= names
            found = await client.call_tool("search", {"query": "frobnicate widget lock", "mode": "fts"})
            assert not found.is_error
            assert found.structured_content["results"][0]["key"] == "frobnicate-lock"

    anyio.run(session)
