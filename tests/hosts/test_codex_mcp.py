"""``cairn install codex`` registers Cairn's MCP server in Codex's ``config.toml`` (``[mcp_servers.cairn]``,
``command`` + ``args``, as Codex's config reference documents it): real files in a temporary ``$HOME``,
through the real entry point, and the registered command started by the MCP SDK's client."""

from __future__ import annotations

import tomllib
from pathlib import Path

import anyio
import pytest

from cairn.hosts.codex_mcp import is_ours, server_for
from tests.hosts.conftest import VENV_BIN, Runner

EXISTING = """\
# my Codex settings
model = "gpt-5"   # the default model

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]

[mcp_servers.docs.env]
DOCS_TOKEN_VAR = "DOCS"

[features]
hooks = true
"""


def _config(runner: Runner) -> Path:
    return runner.user_home / ".codex" / "config.toml"


def _servers(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8")).get("mcp_servers", {})


def _install(runner: Runner, *args: str) -> dict:
    env = runner.envelope("install", "codex", *args, env={"PATH": f"{VENV_BIN}:/usr/bin:/bin"})
    assert env["returncode"] == (0 if env["status"] == "ok" else 2), env
    return env


def test_install_registers_the_server_once_and_uninstall_removes_it(runner: Runner) -> None:
    data = _install(runner)["data"]
    config = _config(runner)
    assert data["mcp"]["action"] == "registered" and data["mcp"]["path"] == str(config)
    cairn = str((VENV_BIN / "cairn").resolve())
    assert _servers(config) == {"cairn": {"command": cairn, "args": ["--home", str(runner.home), "mcp"]}}
    before = config.read_bytes()

    again = _install(runner)["data"]
    assert again["mcp"]["action"] == "unchanged" and config.read_bytes() == before

    gone = _install(runner, "--uninstall")["data"]
    assert gone["mcp"] == {**gone["mcp"], "action": "removed", "deleted": True}
    assert not config.parent.exists()  # hooks.json and config.toml were both ours
    assert _install(runner, "--uninstall")["data"]["mcp"]["action"] == "nothing to remove"


def test_other_settings_survive_and_uninstall_restores_the_bytes(runner: Runner) -> None:
    config = _config(runner)
    config.parent.mkdir()
    config.write_text(EXISTING, encoding="utf-8")
    _install(runner)
    text = config.read_text(encoding="utf-8")
    assert text.startswith(EXISTING)  # appended; not a byte of the rest moved
    doc = tomllib.loads(text)
    original = tomllib.loads(EXISTING)
    assert doc["mcp_servers"].pop("cairn")["args"][-1] == "mcp"
    assert doc == original

    _install(runner, "--uninstall")
    assert config.read_text(encoding="utf-8") == EXISTING


def test_a_moved_executable_is_followed_and_keys_a_person_added_stay(runner: Runner) -> None:
    config = _config(runner)
    config.parent.mkdir()
    config.write_text(
        'model = "gpt-5"\n\n[mcp_servers.cairn]\ncommand = "/old/bin/cairn"\nargs = [\n  "mcp",\n]\n'
        'startup_timeout_sec = 20\n\n[mcp_servers.cairn.env]\nCAIRN_SESSION = "codex"\ncommand = "x"\n\n'
        "[features]\nhooks = true\n",
        encoding="utf-8",
    )
    data = _install(runner)["data"]
    assert data["mcp"]["action"] == "updated"
    doc = tomllib.loads(config.read_text(encoding="utf-8"))
    entry = doc["mcp_servers"]["cairn"]
    assert entry["command"] == str((VENV_BIN / "cairn").resolve()) and entry["args"][-1] == "mcp"
    assert entry["startup_timeout_sec"] == 20 and entry["env"] == {
        "CAIRN_SESSION": "codex",
        "command": "x",
    }  # not our key
    assert doc["model"] == "gpt-5" and doc["features"] == {"hooks": True}
    assert config.read_text(encoding="utf-8").count("[mcp_servers.cairn]") == 1


def test_a_cairn_entry_a_person_wrote_is_left_alone(runner: Runner) -> None:
    """A team server's entry under the same name is not ours to replace or remove."""
    config = _config(runner)
    config.parent.mkdir()
    mine = '[mcp_servers.cairn]\nurl = "https://cairn.example.com/mcp/"\nbearer_token_env_var = "CAIRN_TOKEN"\n'
    config.write_text(mine, encoding="utf-8")
    proc = runner("install", "codex")
    assert proc.returncode == 0 and "did not write; left as it is" in proc.stdout
    assert config.read_text(encoding="utf-8") == mine
    assert _install(runner, "--uninstall")["data"]["mcp"]["action"] == "left alone"
    assert config.read_text(encoding="utf-8") == mine


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('model = "gpt-5\n', "is not valid TOML"),
        # An inline table is closed: a [mcp_servers.cairn] table after it would not parse.
        ('mcp_servers = { docs = { command = "npx" } }\n', "cannot edit"),
    ],
)
def test_a_config_it_cannot_edit_is_refused_before_anything_is_written(runner: Runner, text: str, why: str) -> None:
    config = _config(runner)
    config.parent.mkdir()
    config.write_text(text, encoding="utf-8")
    refused = _install(runner)
    assert refused["status"] == "error" and refused["reason"]["code"] == "SETUP"
    assert why in refused["reason"]["message"] and str(config) in refused["reason"]["message"]
    assert config.read_text(encoding="utf-8") == text
    assert not (config.parent / "hooks.json").exists()  # the hooks were not installed either


def test_dry_run_writes_nothing(runner: Runner) -> None:
    proc = runner("install", "codex", "--dry-run")
    assert proc.returncode == 0 and "would register Cairn's MCP server" in proc.stdout
    assert not _config(runner).exists()
    _install(runner)
    before = _config(runner).read_bytes()
    proc = runner("install", "codex", "--uninstall", "--dry-run")
    assert "would remove Cairn's MCP server" in proc.stdout and _config(runner).read_bytes() == before


def test_ownership_and_the_server_line() -> None:
    assert server_for("'/opt/my tools/cairn' --home /h") == {
        "command": "/opt/my tools/cairn",
        "args": ["--home", "/h", "mcp"],
    }
    assert is_ours({"command": "/x/cairn", "args": ["mcp"]})
    assert is_ours({"command": "cairn", "args": ["--home", "/h", "--db", "postgresql://db/c", "mcp"]})
    assert not is_ours({"command": "cairn", "args": ["mcp", "--url", "https://x"]})
    assert not is_ours({"command": "cairn", "args": ["--verbose", "mcp"]})
    assert not is_ours({"command": "npx", "args": ["cairn-mcp"]})
    assert not is_ours({"url": "https://cairn.example.com/mcp/"})
    wanted = {"command": "uvx", "args": ["cairn", "mcp"]}  # --command uvx cairn: what this install writes
    assert is_ours(dict(wanted), wanted) and not is_ours(dict(wanted))


def test_the_registered_server_runs(seeded: Runner) -> None:
    """Codex starts ``command`` with ``args``: the SDK's client does the same and lists Cairn's tools."""
    from mcp import Client, StdioServerParameters

    _install(seeded)
    entry = _servers(_config(seeded))["cairn"]
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=seeded.env({"CAIRN_NO_DAEMON": "1"})
    )

    async def session() -> None:
        async with Client(params) as client:
            assert {"write", "search", "context"} <= {t.name for t in (await client.list_tools()).tools}
            found = await client.call_tool("search", {"query": "zorp cache corruption", "mode": "fts"})
            assert found.structured_content["results"][0]["key"] == "zorp-cache"

    anyio.run(session)
    _install(seeded, "--uninstall")
