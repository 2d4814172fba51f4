"""Several processes on one store lose nothing and never show "database is locked".

Each worker is a separate OS process that runs the real CLI entry point (``cairn.cli.main.main``)
in a loop, so 4 x 25 writes contend for the write lock without paying 100 interpreter start-ups;
a smaller test runs the ``cairn`` executable itself, one subprocess per write. All workers wait
on a start file so they begin writing at the same moment, on a store none of them has created yet
(the schema creation race is part of the test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.cli.conftest import Cli, assert_clean_stderr
from tests.conftest import run_cli_process

WORKERS = 4
WRITES = 25

DRIVER = r"""
import json, os, sys, time
from pathlib import Path
go, n, args = Path(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
from cairn.cli.main import main  # import before the barrier: the race is on the store, not on imports
import cairn.cli.app, cairn.service.api  # noqa: F401
while not go.exists():
    time.sleep(0.005)
codes = []
for i in range(n):
    argv = [a.replace("{i}", str(i)) for a in args]
    codes.append(main(["--json", *argv]))
sys.stderr.flush()
sys.exit(max(codes))
"""


def _run_workers(home: Path, tmp_path: Path, args_for: list[list[str]]) -> list[subprocess.CompletedProcess[str]]:
    go = tmp_path / "go"
    env = {**os.environ, "CAIRN_HOME": str(home)}
    env.pop("CAIRN_SESSION", None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(go), str(WRITES), json.dumps(args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for args in args_for
    ]
    time.sleep(2.0)  # let every worker finish importing; they then spin on the start file
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    for r in results:
        assert_clean_stderr(r)
        assert r.stderr == "", r.stderr
        failed = [line for line in r.stdout.splitlines() if '"status": "ok"' not in line]
        assert r.returncode == 0, (r.returncode, failed)
        envelopes = [json.loads(line) for line in r.stdout.splitlines()]
        assert len(envelopes) == WRITES
        assert all(e["status"] == "ok" for e in envelopes), [e for e in envelopes if e["status"] != "ok"][:3]
    return results


@pytest.mark.slow
def test_same_content_same_address_counts_every_write(cli: Cli, tmp_path: Path) -> None:
    value = "Always run the migrations before the tests."
    args = [["write", "repo::acme/widget", "migrate-first", value, "--session", f"worker-{w}"] for w in range(WORKERS)]
    results = _run_workers(cli.home, tmp_path, args)
    actions = [json.loads(line)["data"]["action"] for r in results for line in r.stdout.splitlines()]
    assert actions.count("created") == 1

    lesson = cli.ok("read", "repo::acme/widget", "migrate-first")["lesson"]
    assert lesson["seen_count"] == WORKERS * WRITES
    assert lesson["trust"] == "verified"  # 4 distinct sessions >= the default threshold of 3
    listed = cli.ok("list", "--limit", "10000")["lessons"]
    assert [(x["scope"], x["key"]) for x in listed] == [("repo::acme/widget", "migrate-first")]
    history = cli.ok("history", "repo::acme/widget", "migrate-first")["versions"]
    assert [v["seen_count"] for v in history] == list(range(1, WORKERS * WRITES + 1))
    verify = cli.ok("audit", "verify")
    assert verify["ok"] is True and verify["checked"] == WORKERS * WRITES


@pytest.mark.slow
def test_different_addresses_all_land(cli: Cli, tmp_path: Path) -> None:
    args = [
        ["write", f"project::p{w}", "lesson-{i}", f"Worker {w} lesson {{i}}: keep the build green.", "--tag", f"w{w}"]
        for w in range(WORKERS)
    ]
    _run_workers(cli.home, tmp_path, args)
    listed = cli.ok("list", "--limit", "10000")["lessons"]
    assert len(listed) == WORKERS * WRITES
    assert {(x["scope"], x["key"]) for x in listed} == {
        (f"project::p{w}", f"lesson-{i}") for w in range(WORKERS) for i in range(WRITES)
    }
    assert all(x["seen_count"] == 1 and x["version"] == 1 for x in listed)
    assert len(cli.ok("list", "--tag", "w2", "--limit", "10000")["lessons"]) == WRITES
    verify = cli.ok("audit", "verify")
    assert verify["ok"] is True and verify["checked"] == WORKERS * WRITES


@pytest.mark.slow
def test_cli_subprocesses_racing_on_a_fresh_store(cli: Cli) -> None:
    """The executable itself, one process per write, 4 at a time, starting on a store that does not exist."""
    per_worker = 5
    value = "Pin the Python version in .python-version."
    results: list[subprocess.CompletedProcess[str]] = []
    lock = threading.Lock()

    def worker(w: int) -> None:
        for _ in range(per_worker):
            proc = run_cli_process(cli.home, "--json", "write", "global", "pin-python", value, "--session", f"w{w}")
            with lock:
                results.append(proc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == WORKERS * per_worker
    for proc in results:
        assert_clean_stderr(proc)
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        assert json.loads(proc.stdout)["status"] == "ok"
    lesson = cli.ok("read", "global", "pin-python")["lesson"]
    assert lesson["seen_count"] == WORKERS * per_worker
    assert cli.ok("audit", "verify")["checked"] == WORKERS * per_worker
