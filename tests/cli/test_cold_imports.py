"""A command run without the daemon loads only what it uses: importing is most of a cold command's
time (bench/README.md), so a module that sneaks onto a path shows up here, not only in a benchmark.

Each command runs in a fresh interpreter through the real entry point (``cairn.cli.main.main``) on a
store that already exists, and the modules it loaded are read from ``sys.modules`` at its end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = (
    "import json, sys\n"
    "from cairn.cli.main import main\n"
    "code = main(sys.argv[2:])\n"
    "open(sys.argv[1], 'w').write(json.dumps(sorted({m.split('.')[0] for m in sys.modules} | set(sys.modules))))\n"
    "sys.exit(code)\n"
)
# Never on a cold command's path: the model's runtime, the migration tool, the ORM.
NEVER = {"onnxruntime", "tokenizers", "alembic", "sqlalchemy.orm"}
CLI = {"typer", "click", "pydantic", "rich"}  # the command tree and what it brings
# Services a session start never calls: the facade makes each service when an operation first uses it.
UNUSED_BY_SESSION_START = {
    "cairn.service.consolidation",
    "cairn.service.lessons",
    "cairn.service.transfer",
    "cairn.service.export",
    "cairn.service.search",
    "cairn.service.sync",
    "cairn.service.purge",
    "cairn.service.webhooks",  # no lesson in the block came from a webhook
    "tomllib",  # no settings file in this home or checkout: nothing to parse
    "difflib",
}
SESSION_START = json.dumps({"session_id": "cold-imports", "hook_event_name": "SessionStart", "source": "startup"})


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("cold")
    lessons = {"retry": "Retry idempotent HTTP calls with backoff", "cache": "Key the cache on the lockfile"}
    for key, text in lessons.items():
        loaded(home, ["write", "repo::acme/api", key, text])
    return home


def loaded(home: Path, argv: list[str], stdin: str | None = None) -> set[str]:
    out = home / "modules.json"
    env = {**os.environ, "CAIRN_HOME": str(home), "CAIRN_NO_DAEMON": "1", "CAIRN_SERVE_AUTO_START": "0"}
    env.pop("CAIRN_EMBED_MODEL", None)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *argv],
        input=stdin, capture_output=True, text=True, env=env, cwd=home, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return set(json.loads(out.read_text()))


@pytest.mark.parametrize(
    "argv",
    [
        ["write", "repo::acme/api", "budget", "Cap retries with a budget"],
        ["read", "repo::acme/api", "retry"],
        ["list", "--limit", "5"],
        ["search", "retry", "--mode", "fts"],
        ["status"],
    ],
    ids=lambda argv: argv[0] if argv[0] != "search" else "search-fts",
)
def test_commands_that_never_rank_do_not_load_numpy_or_the_model(home: Path, argv: list[str]) -> None:
    modules = loaded(home, argv)
    assert "sqlalchemy" in modules and "typer" in modules  # the probe saw the command's own imports
    assert "cairn.service.consolidation" not in modules
    assert not (modules & (NEVER | {"numpy"}))


@pytest.mark.parametrize(
    ("argv", "stdin"),
    [
        (["context", "--repo", "acme/api", "--branch", "main"], None),
        (["hook", "session-start", "--host", "claude-code"], SESSION_START),
    ],
    ids=["context", "hook-session-start"],
)
def test_session_start_loads_neither_the_command_tree_nor_the_model(
    home: Path, argv: list[str], stdin: str | None
) -> None:
    modules = loaded(home, argv, stdin)
    assert "numpy" in modules  # it ranked, in this process
    assert "cairn.service.context" in modules
    assert not (modules & (NEVER | CLI | UNUSED_BY_SESSION_START))


def test_the_executable_collects_garbage_again_once_the_store_is_open(home: Path) -> None:
    """``cairn`` turns cyclic collection off for its imports only: a command that opens the store
    (a long ``cairn import``, ``cairn serve``) runs with it on."""
    probe = (
        "import gc, sys\n"
        "from cairn.cli import main\n"
        "from cairn.runtime import local\n"
        "opened = local.open_service\n"
        "def watch(*a, **k):\n"
        "    assert not gc.isenabled()\n"
        "    svc = opened(*a, **k)\n"
        "    print('enabled after opening:', gc.isenabled())\n"
        "    return svc\n"
        "local.open_service = watch\n"
        "sys.argv = ['cairn', 'list', '--limit', '1']\n"
        "main.entry()\n"
    )
    env = {**os.environ, "CAIRN_HOME": str(home), "CAIRN_NO_DAEMON": "1", "CAIRN_SERVE_AUTO_START": "0"}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "enabled after opening: True" in proc.stdout


ENTRY_PROBE = (
    "import atexit, os, sys\n"
    "out = sys.argv.pop(1)\n"
    "atexit.register(lambda: open(out, 'w').write(os.environ.get('OPENBLAS_NUM_THREADS', '-')))\n"
    "from cairn.cli.main import entry\n"
    "entry()\n"
)


@pytest.mark.parametrize(("preset", "expected"), [(None, "1"), ("3", "3")], ids=["default", "user-set"])
def test_a_cold_context_runs_numpy_with_one_blas_thread_unless_the_user_chose(
    home: Path, preset: str | None, expected: str
) -> None:
    """numpy's BLAS pool starts (and spins) at import: a one-command process asks for one thread."""
    out = home / "blas.txt"
    env = {**os.environ, "CAIRN_HOME": str(home), "CAIRN_NO_DAEMON": "1", "CAIRN_SERVE_AUTO_START": "0"}
    env.pop("OPENBLAS_NUM_THREADS", None)
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    argv = ["context", "--repo", "acme/api", "--branch", "main"]
    proc = subprocess.run(
        [sys.executable, "-c", ENTRY_PROBE, str(out), *argv],
        capture_output=True, text=True, env=env, cwd=home, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "backoff" in proc.stdout  # the block was ranked in this process
    assert out.read_text() == expected


@pytest.mark.parametrize("verb", ["serve", "mcp"])
def test_a_long_running_server_keeps_numpys_default_blas_pool(home: Path, verb: str) -> None:
    out = home / f"blas-{verb}.txt"
    env = {**os.environ, "CAIRN_HOME": str(home), "CAIRN_NO_DAEMON": "1", "CAIRN_SERVE_AUTO_START": "0"}
    env.pop("OPENBLAS_NUM_THREADS", None)
    proc = subprocess.run(
        [sys.executable, "-c", ENTRY_PROBE, str(out), verb, "--help"],
        capture_output=True, text=True, env=env, cwd=home, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert verb in proc.stdout.lower()  # the server's own help: the command was recognised
    assert out.read_text() == "-"
