"""``cairn install``: real files in a temporary ``$HOME`` and project, through the real entry point.

Held to: the host's config shape; idempotence (twice = one entry per event, and an unchanged file);
``--uninstall`` removing exactly Cairn's entries (the file deleted when we created it, restored byte for
byte when it held other settings); a config that is not JSON refused and left untouched; and, end to
end, the installed command run the way the host runs it (``sh -c``) answering a real payload.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.hosts.conftest import VENV_BIN, Runner

HOSTS = {
    "claude-code": (".claude/settings.json", {"SessionStart", "UserPromptSubmit", "PostToolUseFailure"}),
    "cursor": (".cursor/hooks.json", {"sessionStart", "beforeSubmitPrompt", "postToolUseFailure"}),
    "codex": (".codex/hooks.json", {"SessionStart", "UserPromptSubmit", "PostToolUse"}),
}


def commands(doc: dict[str, Any], host: str) -> dict[str, list[str]]:
    """Every hook command per event, in the host's own file shape."""
    out: dict[str, list[str]] = {}
    for event, groups in doc.get("hooks", {}).items():
        for group in groups:
            if host == "cursor":
                out.setdefault(event, []).append(group["command"])
            else:
                out.setdefault(event, []).extend(h["command"] for h in group["hooks"])
    return out


def ours(cmds: list[str]) -> list[str]:
    return [c for c in cmds if " hook " in c and "cairn" in c]


@pytest.mark.parametrize("host", list(HOSTS))
def test_install_twice_then_uninstall(runner: Runner, host: str) -> None:
    rel, events = HOSTS[host]
    path = runner.user_home / rel
    first = runner.envelope("install", host)
    assert first["status"] == "ok" and first["returncode"] == 0, first
    data = first["data"]
    assert data["action"] == "installed" and data["path"] == str(path) and data["scope"] == "user"
    assert set(data["added"]) == events
    doc = json.loads(path.read_text())
    cmds = commands(doc, host)
    assert set(cmds) == events
    for event, listed in cmds.items():
        assert len(listed) == 1 and " hook " in listed[0] and f"--host {host}" in listed[0], (event, listed)
        assert f"--home {runner.home}" in listed[0]  # the store the install ran against
    if host == "cursor":
        assert doc["version"] == 1
    else:
        groups = doc["hooks"]["SessionStart"]
        assert groups[0]["hooks"][0]["type"] == "command" and groups[0]["hooks"][0]["timeout"] == 30
    before = path.read_bytes()

    second = runner.envelope("install", host)
    assert second["data"]["action"] == "unchanged" and second["data"]["added"] == []
    assert path.read_bytes() == before

    gone = runner.envelope("install", host, "--uninstall")
    assert gone["data"]["action"] == "uninstalled" and set(gone["data"]["removed"]) == events
    assert gone["data"]["deleted"] is True
    assert not path.exists() and not path.parent.exists()  # we created both; nothing of ours is left

    again = runner.envelope("install", host, "--uninstall")
    assert again["data"]["action"] == "nothing to remove" and again["returncode"] == 0


EXISTING_CLAUDE = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "env": {"FOO": "1"},
    "hooks": {
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hello"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
    },
    "model": "opus",
}
EXISTING_CODEX = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify.sh", "timeout": 5}]}]}}
EXISTING_CURSOR = {
    "version": 1,
    "hooks": {"afterFileEdit": [{"command": "./fmt.sh"}], "sessionStart": [{"command": "./hello.sh"}]},
}


@pytest.mark.parametrize(
    ("host", "existing", "indent"),
    [
        ("claude-code", EXISTING_CLAUDE, 4),
        ("cursor", EXISTING_CURSOR, 2),
        ("codex", EXISTING_CODEX, "\t"),
        ("claude-code", EXISTING_CLAUDE, None),
    ],
)
def test_other_settings_survive_and_uninstall_restores_the_bytes(
    runner: Runner, host: str, existing: dict[str, Any], indent: int | str | None
) -> None:
    path = runner.user_home / HOSTS[host][0]
    path.parent.mkdir(parents=True)
    original = json.dumps(existing, indent=indent) + "\n"
    path.write_text(original)

    assert runner.envelope("install", host)["data"]["action"] == "installed"
    doc = json.loads(path.read_text())
    for key, value in existing.items():
        if key != "hooks":
            assert doc[key] == value
    cmds = commands(doc, host)
    for event, listed in commands(existing, host).items():
        assert cmds[event][: len(listed)] == listed  # theirs first, untouched, in order
    assert all(len(ours(c)) == 1 for c in cmds.values() if ours(c))
    if indent is None:
        assert len(path.read_text().splitlines()) == 1  # a one-line file stays on one line
    else:
        second = path.read_text().splitlines()[1]
        assert second[: len(second) - len(second.lstrip())] == (indent if isinstance(indent, str) else " " * indent)

    runner.envelope("install", host)  # twice: still one of ours per event
    assert all(len(ours(c)) <= 1 for c in commands(json.loads(path.read_text()), host).values())

    gone = runner.envelope("install", host, "--uninstall")
    assert gone["data"]["deleted"] is False
    assert path.read_text() == original


def test_moved_executable_is_updated_in_place(runner: Runner) -> None:
    path = runner.user_home / ".claude/settings.json"
    runner("install", "claude-code", "--command", "/old/bin/cairn")
    data = runner.envelope("install", "claude-code", "--command", "/new/bin/cairn")["data"]
    assert data["action"] == "installed" and set(data["updated"]) == HOSTS["claude-code"][1] and data["added"] == []
    cmds = commands(json.loads(path.read_text()), "claude-code")
    assert all(len(c) == 1 and c[0].startswith("/new/bin/cairn ") for c in cmds.values())


def test_invalid_json_is_refused_and_untouched(runner: Runner) -> None:
    for host in HOSTS:
        path = runner.user_home / HOSTS[host][0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b'{"hooks": {,}\n')
        env = runner.envelope("install", host)
        assert env["status"] == "error" and env["reason"]["code"] == "SETUP" and env["returncode"] == 2
        assert str(path) in env["reason"]["message"]
        assert path.read_bytes() == b'{"hooks": {,}\n'
        env = runner.envelope("install", host, "--uninstall")
        assert env["reason"]["code"] == "SETUP" and path.read_bytes() == b'{"hooks": {,}\n'
    path = runner.user_home / ".claude/settings.json"
    for body in ("[1, 2]\n", '{"hooks": []}\n', '{"hooks": {"SessionStart": {"command": "x"}}}\n'):
        path.write_text(body)
        assert runner.envelope("install", "claude-code")["reason"]["code"] == "SETUP", body
        assert path.read_text() == body


def test_bad_input_is_refused(runner: Runner) -> None:
    env = runner.envelope("install", "vscode")
    assert env["status"] == "refused" and env["reason"]["code"] == "INVALID_INPUT" and env["returncode"] == 1
    assert all(h in env["reason"]["message"] for h in HOSTS)
    assert runner.envelope("install")["reason"]["code"] == "INVALID_INPUT"
    assert runner.envelope("install", "cursor", "--user", "--project")["reason"]["code"] == "INVALID_INPUT"
    assert runner.envelope("install", "cursor", "--bogus")["reason"]["code"] == "INVALID_INPUT"
    assert not (runner.user_home / ".cursor").exists()


def test_project_scope_writes_at_the_git_root(runner: Runner, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "src" / "pkg"
    sub.mkdir(parents=True)
    for host, (rel, _) in HOSTS.items():
        data = runner.envelope("install", host, "--project", cwd=sub)["data"]
        assert data["path"] == str(repo / rel) and data["scope"] == "project"
        assert (repo / rel).is_file() and not (runner.user_home / rel).exists()
        assert any("version control" in n for n in data["notes"])
        runner("install", host, "--project", "--uninstall", cwd=sub)
        assert not (repo / rel).exists()


def test_install_warns_when_another_scope_or_host_already_runs_cairn(runner: Runner, tmp_path: Path) -> None:
    """A session would run both installs' hooks: the second install says where the first one is."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    first = runner.envelope("install", "claude-code", cwd=repo)["data"]
    assert first["warnings"] == [] and first["also_installed"] == []
    # A host that does not read Claude Code's files is not warned about them.
    assert runner.envelope("install", "codex", cwd=repo)["data"]["warnings"] == []

    proj = runner.envelope("install", "claude-code", "--project", cwd=repo)["data"]
    user_file = str(runner.user_home / ".claude/settings.json")
    assert [o["path"] for o in proj["also_installed"]] == [user_file]
    assert len(proj["warnings"]) == 1 and user_file in proj["warnings"][0]
    assert "cairn install claude-code --user --uninstall" in proj["warnings"][0]
    # Cursor reads Claude Code's settings too: both of those files run in a Cursor session.
    cur = runner("install", "cursor", cwd=repo)
    assert cur.returncode == 0
    warned = [line for line in cur.stdout.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 2 and any(user_file in w for w in warned)
    assert any(str(repo / ".claude/settings.json") in w for w in warned)
    # Removing one install warns about nothing; the one left is reported by the next install only.
    assert runner.envelope("install", "claude-code", "--project", "--uninstall", cwd=repo)["data"]["warnings"] == []
    again = runner.envelope("install", "claude-code", cwd=repo)["data"]
    assert [o["host"] for o in again["also_installed"]] == ["cursor"]


def test_dry_run_writes_nothing(runner: Runner) -> None:
    proc = runner("install", "claude-code", "--dry-run")
    assert proc.returncode == 0
    assert "would install" in proc.stdout and '"SessionStart"' in proc.stdout  # the preview
    assert not (runner.user_home / ".claude").exists()
    runner("install", "claude-code")
    before = (runner.user_home / ".claude/settings.json").read_bytes()
    proc = runner("install", "claude-code", "--uninstall", "--dry-run")
    assert "would remove" in proc.stdout
    assert (runner.user_home / ".claude/settings.json").read_bytes() == before


def test_human_summary_and_codex_notes(runner: Runner) -> None:
    (runner.user_home / ".codex").mkdir()
    (runner.user_home / ".codex/config.toml").write_text('model = "gpt-5"\n[features]\nhooks = false\n')
    proc = runner("install", "codex")
    assert proc.returncode == 0
    assert f"installed Cairn hooks for codex in {runner.user_home / '.codex/hooks.json'}" in proc.stdout
    assert "hooks = false" in proc.stdout and "trust" in proc.stdout
    config = (runner.user_home / ".codex/config.toml").read_text()
    assert config.startswith('model = "gpt-5"\n[features]\nhooks = false\n')  # kept; only our MCP table added
    proc = runner("install", "codex", env={"CODEX_HOME": str(runner.user_home / "elsewhere")})
    assert str(runner.user_home / "elsewhere" / "hooks.json") in proc.stdout


@pytest.mark.parametrize("host", list(HOSTS))
def test_installed_command_answers_the_host(seeded: Runner, tmp_path: Path, host: str) -> None:
    """End to end: install with the venv's ``cairn`` on PATH, then run the installed command through a
    shell exactly as the host would, with a session-start payload on stdin."""
    user_home = tmp_path / "home"
    user_home.mkdir()
    r = Runner(seeded.home, user_home)
    path_env = {"PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    assert r("install", host, env=path_env).returncode == 0
    doc = json.loads((user_home / HOSTS[host][0]).read_text())
    native = "sessionStart" if host == "cursor" else "SessionStart"
    (command,) = commands(doc, host)[native]
    assert command.startswith(str(VENV_BIN / "cairn") + " ")  # absolute: works without the venv on PATH
    session = str(uuid.uuid4())
    if host == "cursor":
        payload = {"conversation_id": session, "hook_event_name": native, "workspace_roots": [str(user_home)]}
    else:
        payload = {"session_id": session, "cwd": str(user_home), "hook_event_name": native, "source": "startup"}
    env = r.env()
    env["PATH"] = "/usr/bin:/bin"
    proc = subprocess.run(
        ["/bin/sh", "-c", command], input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    text = out["additional_context"] if host == "cursor" else out["hookSpecificOutput"]["additionalContext"]
    assert "frobnicate-lock" in text
