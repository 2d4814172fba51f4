"""`make run`'s main job (scripts/demo.sh): the tour on a fresh store, then the dashboard serving it.

Runs the script as `make run` does (the venv's `cairn` first on PATH), reads the URL and token it
prints, signs in to the dashboard with them and finds the tour's lessons there.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.web.conftest import Client, csrf_of

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_run_seeds_a_store_and_serves_its_dashboard(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "CAIRN_DEMO_HOME": str(tmp_path / "demo"),
        "CAIRN_DEMO_PORT": str(port),
        "CAIRN_EMBED_MODEL": "hash-test-64",
    }
    env.pop("CAIRN_TOKEN", None)
    proc = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "demo.sh")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, env=env, cwd=tmp_path, start_new_session=True,
    )  # fmt: skip
    printed: list[str] = []
    try:
        token = url = None
        deadline = time.monotonic() + 240
        assert proc.stdout is not None
        while token is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "".join(printed)
            printed.append(line)
            if m := re.search(r"Dashboard: (http://127\.0\.0\.1:\d+/ui/)", line):
                url = m.group(1)
            if m := re.search(r"Sign in with this token: (cairn_\S+)", line):
                token = m.group(1)
        tour = "".join(printed)
        assert url == f"http://127.0.0.1:{port}/ui/" and token, tour
        # The tour showed the refusals it is about.
        assert "INVALID_SCOPE" in tour and "TOMBSTONED" in tour and "audit chain verified" in tour
        client = Client(f"http://127.0.0.1:{port}")
        while True:
            try:
                page = client.get("/ui/signin")
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "".join(printed)
                time.sleep(0.2)
        signed = client.post("/ui/signin", {"csrf": csrf_of(page.text), "token": token, "next": ""})
        assert signed.status == 303
        lessons = client.get("/ui/lessons").text
        assert "docker-layer-caching" in lessons and "flaky-e2e" in lessons
        review = client.get("/ui/review").text
        assert "flaky-e2e" in review  # an agent's lesson awaits a person
        assert "old-node" in client.get("/ui/archive").text
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
