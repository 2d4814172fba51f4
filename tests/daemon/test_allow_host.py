"""`cairn serve --allow-host`: the Host/Origin allowlist of a real server process (flag and env)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.conftest import run_cli_process
from tests.daemon.test_daemon import _env, stop_daemon
from tests.daemon.test_http_serve import _free_port


def _status(base: str, headers: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(base + "/v1/health", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, ""
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}").get("code", "")


def _serve(home: Path, port: int, *flags: str, **env: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "serve", "--no-warm", "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(**env), cwd=home,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            if _status(f"http://127.0.0.1:{port}", {})[0] == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    stop_daemon(proc)
    raise AssertionError("cairn serve did not answer within 90 s")


def test_allow_host_flag_and_env_add_names_and_nothing_else(cairn_home: Path) -> None:
    for flags, env in ((("--allow-host", "cairn.test", "--allow-host", "mem.example:8443"), {}),
                       ((), {"CAIRN_ALLOW_HOSTS": "cairn.test mem.example:8443"})):  # fmt: skip
        port = _free_port()
        proc = _serve(cairn_home, port, *flags, **env)
        try:
            base = f"http://127.0.0.1:{port}"
            assert _status(base, {"Host": "cairn.test"})[0] == 200
            assert _status(base, {"Host": "cairn.test", "Origin": "https://cairn.test"})[0] == 200
            assert _status(base, {"Host": "mem.example:8443"})[0] == 200
            assert _status(base, {"Host": "mem.example:9000"}) == (403, "FORBIDDEN")  # that name on another port
            assert _status(base, {"Host": "evil.example"}) == (403, "FORBIDDEN")
            assert _status(base, {"Origin": "http://evil.example"}) == (403, "FORBIDDEN")
            assert _status(base, {"Host": f"localhost:{port}"})[0] == 200  # loopback names stay allowed
        finally:
            code, _out, err = stop_daemon(proc)
        assert code == 0, err


def test_a_serve_stopped_the_moment_its_http_api_answers_exits_cleanly(cairn_home: Path) -> None:
    """SIGTERM right after the first answer: the handler is in place before anything listens."""
    for _ in range(3):
        proc = _serve(cairn_home, _free_port())
        code, _out, err = stop_daemon(proc)
        assert code == 0, err
        assert not (cairn_home / "cairn.pid").exists()


def test_a_malformed_allow_host_stops_the_start(cairn_home: Path) -> None:
    proc = run_cli_process(cairn_home, "--json", "serve", "--no-warm", "--allow-host", "http://x/y", env=_env())
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["reason"]["code"] == "INVALID_INPUT"
