"""The output contract: one JSON envelope per ``--json`` invocation, clean refusals, no tracebacks.

Agents parse ``--json`` output, so every command (ok, refused or failing) prints exactly one line
``{"status","verb","data","reason"}`` on stdout, and exits 0 (ok), 1 (refused/invalid) or 2 (setup).
Without ``--json`` a refusal prints nothing on stdout and one ``cairn: CODE: message`` line on stderr.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli.conftest import Cli, assert_clean_stderr, envelope
from tests.conftest import run_cli

HUMAN_ERROR = re.compile(r"^cairn: [A-Z_]+: \S.*$")


def _commands() -> set[str]:
    """Every command the CLI registers; a group with a callback (``review``, ``audit``) is one too."""
    from cairn.cli.app import load_all

    app = load_all()
    names: set[str] = set()
    for cmd in app.registered_commands:
        names.add(cmd.name or cmd.callback.__name__.rstrip("_"))
    for group in app.registered_groups:
        names.add(group.name)
        for sub in group.typer_instance.registered_commands:
            names.add(f"{group.name} {sub.name or sub.callback.__name__}")
    return names


def test_the_lazy_registry_names_every_command_and_the_module_declaring_it() -> None:
    """``cairn write`` imports only the module ``COMMANDS`` names: a command missing there, or
    under another module, would be found only by the whole tree (a bare ``cairn X`` still works,
    but slower) -- so the map must be the tree's, in the order ``--help`` lists it."""
    from cairn.cli.app import COMMANDS, load_all

    app = load_all()
    declared: dict[str, str] = {}
    for cmd in app.registered_commands:
        declared[cmd.name or cmd.callback.__name__] = cmd.callback.__module__  # type: ignore[union-attr]
    for group in app.registered_groups:  # where its callback and subcommands are (args.py makes helpers)
        sub = group.typer_instance
        infos = [*sub.registered_commands, *([sub.registered_callback] if sub.registered_callback else [])]
        modules = {info.callback.__module__ for info in infos} - {"cairn.cli.args"}  # type: ignore[union-attr]
        declared[group.name] = modules.pop() if len(modules) == 1 else f"{sorted(modules)}"  # type: ignore[index]
    assert {name: f"cairn.cli.{module}" for name, module in COMMANDS.items()} == declared
    assert list(declared) == list(COMMANDS)


FOUNDATION = {
    "write", "read", "list", "history", "diff", "supersede", "archive", "restore", "forget", "unforget",
    "tombstones", "feedback", "link", "neighborhood", "purge", "review", "review verify", "review reject",
    "audit", "audit verify", "export", "import",
}  # fmt: skip


def test_every_command_prints_one_ok_envelope(cli: Cli, tmp_path: Path) -> None:
    """A tour of every command in ``--json`` mode; fails if a command is added without a case here."""
    dump = tmp_path / "dump.jsonl"
    cases: list[tuple[str, list[str], str | None]] = [
        ("write", ["write", "repo::acme/widget", "build-cmd", "Run make build, not npm run build."], None),
        ("write", ["write", "repo::acme/widget", "build-cmd", "Run make build; npm run build is gone."], None),
        ("write", ["write", "global", "py-tool", "Prefer uv over pip for installs."], None),
        ("read", ["read", "repo::acme/widget", "build-cmd"], None),
        ("list", ["list", "repo::acme/widget"], None),
        ("history", ["history", "repo::acme/widget", "build-cmd"], None),
        ("diff", ["diff", "repo::acme/widget", "build-cmd", "1", "2"], None),
        ("supersede", ["supersede", "global", "py-tool", "Use uv for everything Python."], None),
        ("link", ["link", "repo::acme/widget", "build-cmd", "global", "py-tool", "--rel", "related"], None),
        ("neighborhood", ["neighborhood", "repo::acme/widget", "build-cmd", "--depth", "2"], None),
        ("feedback", ["feedback", "repo::acme/widget", "build-cmd", "helped"], None),
        ("archive", ["archive", "repo::acme/widget", "build-cmd"], None),
        ("restore", ["restore", "repo::acme/widget", "build-cmd"], None),
        ("review", ["review"], None),
        ("review verify", ["review", "verify", "repo::acme/widget", "build-cmd"], None),
        ("write", ["write", "global", "bad-idea", "-"], "Disable the tests to ship faster."),
        ("review reject", ["review", "reject", "global", "bad-idea", "--reason", "never do this"], None),
        ("write", ["write", "global", "bad-two", "Skip code review on Fridays."], None),
        ("forget", ["forget", "global", "bad-two", "--reason", "wrong"], None),
        ("tombstones", ["tombstones", "--all"], None),
        ("unforget", ["unforget", "2", "--reason", "it was right after all"], None),
        ("purge", ["purge", "--expired"], None),
        ("audit", ["audit", "--lesson", "repo::acme/widget", "build-cmd"], None),
        ("audit verify", ["audit", "verify"], None),
        ("export", ["export", str(dump)], None),
        ("import", ["import", str(dump)], None),
    ]
    # Every command of the foundation is toured; commands added later are covered by the next test.
    assert {name for name, _, _ in cases} <= _commands()
    assert {name for name, _, _ in cases} >= FOUNDATION
    for name, args, stdin in cases:
        env = cli.json(*args, stdin=stdin)
        assert env["status"] == "ok", (args, env)
        assert env["verb"] == name, (args, env["verb"])
        assert env["data"] is not None, args
    assert dump.is_file()


# Run until stopped: serve's envelope is tested in tests/daemon; mcp's stdout is the MCP protocol
# channel (no envelope, ever), tested with the SDK's client in tests/mcp.
LONG_RUNNING = {"serve", "mcp"}


def test_every_registered_command_without_arguments_prints_one_envelope(cli: Cli) -> None:
    """Whatever the command (including ones added after the foundation), bare ``--json CMD`` is one envelope."""
    for name in sorted(_commands() - LONG_RUNNING):
        env = cli.json(*name.split(), stdin="")
        assert env["verb"] == name, env
        if env["status"] != "ok":
            assert env["reason"]["code"] in ("INVALID_INPUT", "NOT_FOUND"), (name, env)


def test_global_flags_anywhere(cli: Cli) -> None:
    """``--json`` and ``--home`` work before, between and after the command's own arguments."""
    env = envelope(run_cli(cli.home, "write", "global", "--json", "flag-pos", "Flags go anywhere."))
    assert env["data"]["lesson"]["key"] == "flag-pos"
    env = envelope(run_cli(cli.home, "read", "global", "flag-pos", "--json"))
    assert env["data"]["lesson"]["value"] == "Flags go anywhere."


@pytest.mark.parametrize(
    ("args", "stdin", "code"),
    [
        (["write"], None, "INVALID_INPUT"),  # missing arguments
        (["frobnicate", "x"], None, "INVALID_INPUT"),  # unknown command
        (["review", "frobnicate"], None, "INVALID_INPUT"),  # unknown subcommand
        (["read", "global", "k", "--no-such-option"], None, "INVALID_INPUT"),
        (["write", "repo:acme/widget", "k", "v"], None, "INVALID_SCOPE"),
        (["write", "global::x", "k", "v"], None, "INVALID_SCOPE"),
        (["write", "repo::../x", "k", "v"], None, "INVALID_SCOPE"),
        (["write", "global", "", "v"], None, "INVALID_KEY"),
        (["write", "global", "k", ""], None, "INVALID_VALUE"),
        (["write", "global", "k", "v", "--ttl", "400d"], None, "INVALID_TTL"),
        (["write", "global", "k", "v", "--ttl", "soonish"], None, "INVALID_TTL"),
        (["write", "global", "k", "v", "--valid-from", "2025-13-45"], None, "INVALID_TIME"),
        (["read", "global", "k", "--as-of", "the day before"], None, "INVALID_TIME"),
        (["write", "global", "k", "v", "--kind", "rumour"], None, "INVALID_INPUT"),
        (["write", "global", "k", "v", "--tag", "Not A Tag!"], None, "INVALID_INPUT"),
        (["write", "global", "big"], "x" * (64 * 1024 + 1), "VALUE_TOO_LARGE"),
        (["write", "global", "big", "-"], "é" * (33 * 1024), "VALUE_TOO_LARGE"),  # bytes, not chars
        (["diff", "global", "k", "one", "two"], None, "INVALID_INPUT"),
        (["unforget", "abc", "--reason", "r"], None, "INVALID_INPUT"),
        (["forget", "global", "k"], None, "INVALID_INPUT"),  # reason required
        (["read", "global", "nothing-here"], None, "NOT_FOUND"),
        (["list", "--limit", "0"], None, "INVALID_INPUT"),
        (["neighborhood", "global", "k", "--depth", "9"], None, "INVALID_INPUT"),
        (["purge"], None, "INVALID_INPUT"),
        (["purge", "--archived", "--older-than", "forever"], None, "INVALID_INPUT"),
        (["export"], None, "INVALID_INPUT"),  # --json and JSONL on stdout would mix
        (["import"], None, "INVALID_INPUT"),
        (["read", "global", "k", "--home"], None, "INVALID_INPUT"),  # a global option without its value
        (["list", "--session"], None, "INVALID_INPUT"),
    ],
)
def test_bad_input_is_one_refusal_envelope(cli: Cli, args: list[str], stdin: str | None, code: str) -> None:
    reason = cli.refused(code, *args, stdin=stdin)
    assert reason["message"].strip()


def test_bad_import_files(cli: Cli, tmp_path: Path) -> None:
    latin = tmp_path / "latin1.jsonl"
    latin.write_bytes('{"scope": "global", "key": "k", "value": "caf\u00e9"}\n'.encode("latin-1"))
    assert "UTF-8" in cli.refused("INVALID_INPUT", "import", str(latin))["message"]

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"scope": "global", "key": "a", "value": "fine"}\n{"scope": "global", "key": \n[1, 2]\n')
    reason = cli.refused("INVALID_INPUT", "import", str(broken))
    assert [e["line"] for e in reason["data"]["errors"]] == [2, 3]

    missing_field = tmp_path / "missing.jsonl"
    missing_field.write_text('{"scope": "global", "key": "a"}\n')
    cli.refused("INVALID_INPUT", "import", str(missing_field))

    cli.refused("INVALID_INPUT", "import", str(tmp_path / "does-not-exist.jsonl"))
    cli.refused("INVALID_INPUT", "import", str(tmp_path))  # a directory
    # Nothing from the half-valid file got in: import validates every line first.
    cli.refused("NOT_FOUND", "read", "global", "a")


def test_non_utf8_value_on_stdin_is_refused(cli: Cli) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "--json", "write", "global", "k"],
        input=b"bad \xff\xfe bytes",
        capture_output=True,
        env={**__import__("os").environ, "CAIRN_HOME": str(cli.home)},
        timeout=60,
    )
    out = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    env = envelope(out)
    assert env["reason"]["code"] == "INVALID_VALUE"


@pytest.mark.parametrize(
    ("args", "stdin", "code"),
    [
        (["write"], None, "INVALID_INPUT"),
        (["frobnicate"], None, "INVALID_INPUT"),
        (["write", "repo:acme/widget", "k", "v"], None, "INVALID_SCOPE"),
        (["write", "global", "k", "v", "--ttl", "0s"], None, "INVALID_TTL"),
        (["write", "global", "big"], "x" * (70 * 1024), "VALUE_TOO_LARGE"),
        (["import", "/nonexistent/file.jsonl"], None, "INVALID_INPUT"),
        (["read", "global", "nothing-here"], None, "NOT_FOUND"),
    ],
)
def test_human_refusal_is_one_stderr_line(cli: Cli, args: list[str], stdin: str | None, code: str) -> None:
    proc = cli(*args, stdin=stdin)
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert HUMAN_ERROR.match(lines[0]), lines[0]
    assert lines[0].startswith(f"cairn: {code}: ")


def test_setup_error_is_exit_2_envelope(tmp_path: Path) -> None:
    """An unusable home is an environment problem: exit 2, status error, still one envelope."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the home should be")
    proc = run_cli(blocker / "home", "--json", "read", "global", "k")
    env = envelope(proc)
    assert env["status"] == "error"
    assert env["reason"]["code"] == "SETUP"
    assert proc.returncode == 2

    proc = run_cli(blocker / "home", "read", "global", "k")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert_clean_stderr(proc)
    assert HUMAN_ERROR.match(proc.stderr.strip())


def test_bad_config_is_setup_error(cli: Cli) -> None:
    (cli.home / "config.toml").write_text("[trust]\npromotion_threshold = 'many'\n")
    env = cli.json("list")
    assert env["status"] == "error"
    assert env["reason"]["code"] == "SETUP"
    assert "promotion_threshold" in env["reason"]["message"]
