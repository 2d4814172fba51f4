"""`cairn serve`: the daemon also serves the HTTP API and MCP on loopback by default, with tokens."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.conftest import run_cli_process
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
    made = json.loads(run_cli_process(cairn_home, "--json", "user", "create", "dev").stdout)
    token = made["data"]["token"]
    env = {**_env(), "CAIRN_TOKEN": token}
    run_cli_process(cairn_home, "write", "global", "served", "Served over HTTP.", env=env)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(cairn_home), "serve", "--no-warm"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(CAIRN_HTTP_PORT=str(port)), cwd=cairn_home,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        answered = 0  # HTTP requests that got an answer: the daemon's own count must match
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                health = _get(base + "/v1/health")[0]
                answered += 1
                if health == 200:
                    break
            except OSError:
                time.sleep(0.2)
        status, body = _get(base + "/v1/lesson?scope=global&key=served", token)
        assert status == 200 and body["lesson"]["value"] == "Served over HTTP."
        assert _get(base + "/v1/lesson?scope=global&key=served")[0] == 401
        # The local account's lessons are not the token account's: tenancy holds on the daemon too.
        run_cli_process(cairn_home, "write", "global", "local-only", "The operator's own lesson.")
        assert _get(base + "/v1/lesson?scope=global&key=local-only", token)[0] == 404
        answered += 3
    finally:
        code, out, err = stop_daemon(proc)
    assert code == 0, err
    # Stopping says what was served, once (stdout), with HTTP requests counted, not "0 request(s)".
    assert (out + err).count("stopped after") == 1, (out, err)
    assert f"{answered} over HTTP" in out, out


def _serve(home: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "--json", "serve", "--no-warm", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or _env(), cwd=home,
    )  # fmt: skip


def test_a_taken_default_port_leaves_the_socket_serving(cairn_home: Path, tmp_path: Path) -> None:
    from cairn.daemon import protocol
    from cairn.runtime.client import ask_daemon

    log = tmp_path / "serve.log"  # a file, so the test can wait for the note without blocking on a pipe
    with socket.socket() as taken, log.open("w") as err_file:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "cairn.cli.main", "--home", str(cairn_home), "--json", "serve", "--no-warm"],
            stdout=subprocess.PIPE, stderr=err_file, text=True, env=_env(CAIRN_HTTP_PORT=str(port)), cwd=cairn_home,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            answer = None
            while time.monotonic() < deadline and answer is None:
                assert proc.poll() is None, log.read_text()
                answer = ask_daemon(cairn_home, {"v": protocol.PROTOCOL, "op": "ping", "params": {}})
                time.sleep(0.1)
            assert answer is not None and answer["ok"], "the socket must serve although the HTTP port is taken"
            # The HTTP thread gives up in the background (after importing the HTTP stack: seconds
            # on a loaded machine); the daemon keeps running and says why.
            while "serving the socket only" not in log.read_text():
                assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
                time.sleep(0.2)
            assert ask_daemon(cairn_home, {"v": protocol.PROTOCOL, "op": "ping", "params": {}}) is not None
        finally:
            code, _out, _err = stop_daemon(proc)
    assert code == 0


def test_a_taken_port_the_user_chose_stops_the_start_cleanly(cairn_home: Path) -> None:
    from cairn.daemon import protocol

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _serve(cairn_home, "--port", str(port))
        out, _err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    reason = json.loads(out)["reason"]
    assert reason["code"] == "SETUP" and str(port) in reason["message"]
    assert not Path(protocol.socket_path(cairn_home)).exists()  # nothing left behind
    assert not (cairn_home / protocol.PID_NAME).exists()


def test_no_http_serves_the_socket_only(cairn_home: Path) -> None:
    port = _free_port()
    proc = _serve(cairn_home, "--no-http", env=_env(CAIRN_HTTP_PORT=str(port)))
    try:
        from cairn.daemon import protocol
        from cairn.runtime.client import ask_daemon

        deadline = time.monotonic() + 90
        while ask_daemon(cairn_home, {"v": protocol.PROTOCOL, "op": "ping", "params": {}}) is None:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        time.sleep(1)
        try:
            _get(f"http://127.0.0.1:{port}/v1/health")
            listening = True
        except OSError:
            listening = False
        assert not listening
        time.sleep(1.5)  # a drain round (CAIRN_DRAIN_SECONDS=0.5 in _env) on the fresh home
    finally:
        code, _out, err = stop_daemon(proc)
    assert code == 0
    assert "failed" not in err, err  # a fresh home (no store yet) must not make the background work fail
