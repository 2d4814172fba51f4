"""`cairn serve --http`: the daemon also serves the HTTP API and MCP on loopback, with tokens."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.conftest import run_cli
from tests.daemon.test_daemon import _env, stop_daemon


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def test_serve_http_answers_with_the_same_store_and_tokens(cairn_home: Path) -> None:
    made = json.loads(run_cli(cairn_home, "--json", "user", "create", "dev").stdout)
    token = made["data"]["token"]
    env = {**_env(), "CAIRN_TOKEN": token}
    run_cli(cairn_home, "write", "global", "served", "Served over HTTP.", env=env)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(cairn_home), "serve", "--http", "--port", str(port),
         "--no-warm"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=cairn_home,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                if _get(base + "/v1/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        status, body = _get(base + "/v1/lesson?scope=global&key=served", token)
        assert status == 200 and body["lesson"]["value"] == "Served over HTTP."
        assert _get(base + "/v1/lesson?scope=global&key=served")[0] == 401
        # The local account's lessons are not the token account's: tenancy holds on the daemon too.
        run_cli(cairn_home, "write", "global", "local-only", "The operator's own lesson.")
        assert _get(base + "/v1/lesson?scope=global&key=local-only", token)[0] == 404
    finally:
        code, _out, err = stop_daemon(proc)
    assert code == 0, err
