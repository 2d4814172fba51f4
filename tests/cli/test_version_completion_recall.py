"""``cairn --version``, shell completion, and ``cairn recall`` taking its text as an argument.

Held to: the version is the installed package's, printed without loading the command tree; the
completion script typer prints really completes in a real bash, through the fast entry point; the
failure text of ``recall`` may be the argument, ``--text`` or stdin (and the same text gives the same
answer each way), never two of them at once; the hot-path commands' help reads like every other
command's.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import envelope
from tests.conftest import run_cli
from tests.hosts.conftest import FROB_FAILURE, LESSONS

ENV = {"CAIRN_EMBED_MODEL": "hash-test-64", "CAIRN_NO_DAEMON": "1"}


def test_version_is_the_installed_package_version(cairn_home: Path) -> None:
    installed = importlib.metadata.version("cairn-lessons")  # the distribution; the package is cairn
    for flag in ("--version", "-V"):
        proc = run_cli(cairn_home, flag)
        assert proc.returncode == 0 and proc.stdout == f"cairn {installed}\n", proc.stderr
    env = envelope(run_cli(cairn_home, "--json", "--version"))
    assert env["verb"] == "version" and env["data"] == {"version": installed}
    refused = envelope(run_cli(cairn_home, "--json", "--version", "now"))
    assert refused["reason"]["code"] == "INVALID_INPUT"


def test_version_stays_on_the_fast_path() -> None:
    probe = (
        "import sys\n"
        "from cairn.cli.main import main\n"
        "code = main(['--version'])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'typer', 'sqlalchemy', 'numpy', 'click'})\n"
        "print(code, heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "0 []"


def _bash_complete(cairn_home: Path, words: list[str]) -> list[str]:
    """Load the script ``cairn completion bash`` prints into a real bash and ask it to complete."""
    bin_dir = str(Path(sys.executable).parent)
    script = (
        "source <(cairn --show-completion bash) || exit 3\n"
        f"COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}\n"
        "_cairn_completion cairn\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "CAIRN_HOME": str(cairn_home)}
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return [line for line in proc.stdout.splitlines() if line]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completion_completes_commands_and_subcommands(cairn_home: Path) -> None:
    assert _bash_complete(cairn_home, ["cairn", "rev"]) == ["review"]
    assert set(_bash_complete(cairn_home, ["cairn", "review", "''"])) >= {"verify", "reject"}
    assert "recall" in _bash_complete(cairn_home, ["cairn", "re"])
    assert _bash_complete(cairn_home, ["cairn", "zzz"]) == []  # nothing made up


def test_completion_prints_the_script_for_each_shell(cairn_home: Path) -> None:
    for shell in ("bash", "zsh", "fish", "powershell"):
        proc = run_cli(cairn_home, "completion", shell)
        assert proc.returncode == 0 and "_CAIRN_COMPLETE" in proc.stdout, (shell, proc.stderr)
    bad = envelope(run_cli(cairn_home, "--json", "completion", "tcsh"))
    assert bad["reason"]["code"] == "INVALID_INPUT" and "bash" in bad["reason"]["message"]
    # typer's own flag is there too (it detects the shell, so it is not driven from here).
    assert "--install-completion" in run_cli(cairn_home, "--help").stdout


def _recall(cairn_home: Path, *args: str, stdin: str | None = None) -> dict:
    data = envelope(run_cli(cairn_home, "--json", "recall", *args, stdin=stdin, env=ENV))["data"]
    data.pop("served_by", None)
    return data


def test_recall_takes_the_text_as_argument_option_or_stdin(cairn_home: Path) -> None:
    for key, value in LESSONS.items():  # wording the failure repeats, and unrelated lessons beside it
        assert run_cli(cairn_home, "write", "global", key, value, env=ENV).returncode == 0
    text = FROB_FAILURE
    by_arg = _recall(cairn_home, text)
    assert [h["key"] for h in by_arg["lessons"]][:1] == ["frobnicate-lock"]
    assert by_arg == _recall(cairn_home, "--text", text) == _recall(cairn_home, stdin=text)

    both = envelope(run_cli(cairn_home, "--json", "recall", text, "--text", text, env=ENV))
    assert both["reason"]["code"] == "INVALID_INPUT" and "not both" in both["reason"]["message"]
    none = envelope(run_cli(cairn_home, "--json", "recall", stdin="", env=ENV))
    assert none["reason"]["code"] == "INVALID_INPUT" and 'cairn recall "TEXT"' in none["reason"]["message"]
    extra = envelope(run_cli(cairn_home, "--json", "recall", "one", "two", env=ENV))
    assert extra["reason"]["code"] == "INVALID_INPUT"


@pytest.mark.parametrize("verb", ["recall", "context"])
def test_fast_commands_help_reads_like_every_other_command(cairn_home: Path, verb: str) -> None:
    fast = run_cli(cairn_home, verb, "--help")
    typer_help = run_cli(cairn_home, "search", "--help")
    assert fast.returncode == 0 and typer_help.returncode == 0
    lines = fast.stdout.splitlines()
    assert lines[0].startswith(f"Usage: cairn {verb} [OPTIONS]")
    assert lines[1] == "" and lines[2].startswith("  ")  # the description, indented like typer's
    assert "Options:" in lines and "usage:" not in fast.stdout and "-h, --help" not in fast.stdout
    # Same row layout as typer: option, its type in <>, two spaces, the help; --help last.
    assert any(line.startswith("  --repo <str>") for line in lines)
    assert lines[-1].split() == ["--help", "Show", "this", "message", "and", "exit."]
    assert typer_help.stdout.splitlines()[-1].split() == lines[-1].split()
    if verb == "recall":
        assert "Arguments:" in lines and any(line.startswith("  text <str>") for line in lines)
    assert json.dumps(fast.stdout)  # plain text
