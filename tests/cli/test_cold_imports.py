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
    # pydantic came with typer's coercion of each argument; plain strings and numbers skip it (cli/coerce.py)
    assert not (modules & (NEVER | {"numpy", "pydantic"}))
    # nor the remote client (no --url, no CAIRN_URL), nor a git config parser (no checkout here)
    assert not (modules & {"cairn.runtime.remote", "cairn.service.catalog", "configparser"})
    assert "cairn.webhooks.github" not in modules  # no lesson here came from a webhook
    assert "cairn.core.similarity" not in modules  # nothing forgotten: no paraphrase to compare with


@pytest.mark.parametrize(
    "argv",
    [["search", "retry"], ["recall", "--text", "TimeoutError: retry budget exhausted", "--repo", "acme/api"]],
    ids=["search-hybrid", "recall"],
)
def test_meaning_search_loads_the_model_and_not_the_write_rules(home: Path, argv: list[str]) -> None:
    """A hybrid search embeds its query (and a slice of the queue) in a cold process: the model
    loads, but not the paraphrase check of writes, nor another service, nor pydantic."""
    modules = loaded(home, argv)
    assert "cairn.search.embed" in modules
    unused = {"cairn.service.paraphrase", "cairn.core.similarity", "cairn.service.consolidation", "pydantic"}
    assert not (modules & (unused | {"alembic", "sqlalchemy.orm", "cairn.runtime.remote"}))


# The modules of the command tree (cli/app.py's COMMANDS): a command imports only the one declaring it.
TREE = {f"cairn.cli.{m}" for m in ("lessons", "retrieval", "operate", "review", "consolidate", "accounts",
                                    "gateway", "webhooks", "sync")}  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "own"),
    [
        (["write", "repo::acme/api", "tree", "Build only the command that runs"], "cairn.cli.lessons"),
        (["read", "repo::acme/api", "retry"], "cairn.cli.lessons"),
        (["list", "--limit", "5"], "cairn.cli.lessons"),
        (["search", "retry", "--mode", "fts"], "cairn.cli.retrieval"),
        (["status"], "cairn.cli.operate"),
        (["org", "list"], "cairn.cli.accounts"),
    ],
    ids=["write", "read", "list", "search-fts", "status", "org-list"],
)
def test_a_command_builds_only_its_own_part_of_the_tree(home: Path, argv: list[str], own: str) -> None:
    modules = loaded(home, argv)
    assert own in modules
    assert not (modules & (TREE - {own}))


def test_an_unknown_command_still_gets_the_whole_trees_suggestion(home: Path) -> None:
    env = {**os.environ, "CAIRN_HOME": str(home), "CAIRN_NO_DAEMON": "1", "CAIRN_SERVE_AUTO_START": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "wirte", "x"], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 1
    assert "No such command 'wirte'. Did you mean 'write'?" in proc.stderr


CONFUSABLES_PROBE = (
    "import json, sys\n"
    "from cairn.cli.main import main\n"
    "code = main(sys.argv[2:])\n"
    "from cairn.core import confusables\n"
    "open(sys.argv[1], 'w').write(json.dumps(confusables._translation.cache_info().currsize))\n"
    "sys.exit(code)\n"
)


@pytest.mark.parametrize(("text", "whole"), [("Pin the lockfile in CI, café", 0), ("Pin the lockfile in СI", 1)])
def test_a_latin1_write_reads_only_the_latin1_confusables(home: Path, text: str, whole: int) -> None:
    """The tombstone check skeletonizes every write: a Latin-1 lesson needs the mappings of its own
    range, not all ~6,300 (a Cyrillic С needs them all)."""
    out = home / "confusables.json"
    env = {**os.environ, "CAIRN_HOME": str(home), "CAIRN_NO_DAEMON": "1", "CAIRN_SERVE_AUTO_START": "0"}
    argv = ["write", "repo::acme/api", f"latin-{whole}", text]
    proc = subprocess.run(
        [sys.executable, "-c", CONFUSABLES_PROBE, str(out), *argv],
        capture_output=True, text=True, env=env, cwd=home, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == whole


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
