"""``cairn serve``: a real daemon process on a real Unix socket, and real CLI clients.

What must hold: the daemon answers exactly what in-process work answers; it sees writes made by
other processes; only its owner can reach it; it cleans up after itself and refuses to run twice;
it runs the sweeps and drains the embedding queue on its own.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.daemon import protocol
from cairn.runtime.client import ask_daemon
from tests.conftest import run_cli_process

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)

PING = {"v": protocol.PROTOCOL, "op": "ping", "params": {}}


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "CAIRN_EMBED_MODEL": "hash-test-64", "CAIRN_DRAIN_SECONDS": "0.5", **extra}
    env.pop("CAIRN_NO_DAEMON", None)
    return env


def start_daemon(home: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), *extra, "serve", "--no-http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or _env(),
        cwd=home,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"daemon exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
            if ask_daemon(home, PING) is not None:
                return proc
            time.sleep(0.1)
        raise AssertionError("daemon did not come up within 90 s")
    except BaseException:
        proc.kill()  # never leave a daemon behind a failed test
        proc.wait(timeout=30)
        raise


def stop_daemon(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


@pytest.fixture
def daemon(cairn_home: Path) -> Iterator[subprocess.Popen[str]]:
    proc = start_daemon(cairn_home)
    yield proc
    stop_daemon(proc)


def cli_json(home: Path, *args: str, no_daemon: bool = False) -> dict:
    # The daemon's embedding model (see _env): an in-process answer compared with the daemon's must
    # rank with the same vectors, or "equal" holds only while the full-text arm decides alone.
    env = {"CAIRN_EMBED_MODEL": "hash-test-64", **({"CAIRN_NO_DAEMON": "1"} if no_daemon else {})}
    proc = run_cli_process(home, "--json", *args, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["data"]


def seed(home: Path) -> None:
    for scope, key, value in [
        ("repo::acme/api", "retry-backoff", "Billing retries need jittered exponential backoff."),
        ("global", "typecheck-first", "Run the typecheck before claiming a change is done."),
        ("repo::acme/web", "css-grid", "The dashboard grid breaks below 600px; use minmax."),
    ]:
        assert run_cli_process(home, "write", scope, key, value).returncode == 0


def test_context_through_the_daemon_equals_in_process(cairn_home: Path, daemon: subprocess.Popen[str]) -> None:
    seed(cairn_home)
    args = ("context", "--repo", "acme/api", "--branch", "feat/retry-backoff")
    warm = cli_json(cairn_home, *args)
    cold = cli_json(cairn_home, *args, no_daemon=True)
    assert warm.pop("served_by") == "daemon"
    assert cold.pop("served_by") == "process"
    assert warm == cold
    assert warm["eligible"] == 2  # acme/web's lesson is outside the ladder
    assert "css-grid" not in warm["text"]


def test_recall_through_the_daemon_equals_in_process(cairn_home: Path, daemon: subprocess.Popen[str]) -> None:
    seed(cairn_home)
    failure = "billing retries failed: 429 too many requests, backoff exhausted"
    args = ("recall", "--text", failure, "--repo", "acme/api")
    warm, cold = cli_json(cairn_home, *args), cli_json(cairn_home, *args, no_daemon=True)
    assert (warm.pop("served_by"), cold.pop("served_by")) == ("daemon", "process")
    assert warm == cold


def test_daemon_sees_writes_archives_and_forgets_from_other_processes(
    cairn_home: Path, daemon: subprocess.Popen[str]
) -> None:
    seed(cairn_home)
    first = cli_json(cairn_home, "context", "--repo", "acme/api")
    assert first["served_by"] == "daemon" and first["eligible"] == 2
    wrote = run_cli_process(cairn_home, "write", "repo::acme/api", "new-one", "Fresh lesson from another process.")
    assert wrote.returncode == 0
    after_write = cli_json(cairn_home, "context", "--repo", "acme/api")
    assert after_write["eligible"] == 3 and "new-one" in after_write["text"]
    assert run_cli_process(cairn_home, "archive", "repo::acme/api", "new-one").returncode == 0
    assert run_cli_process(cairn_home, "forget", "global", "typecheck-first", "--reason", "wrong").returncode == 0
    after = cli_json(cairn_home, "context", "--repo", "acme/api")
    assert after["served_by"] == "daemon"
    assert after["eligible"] == 1
    assert "new-one" not in after["text"] and "typecheck" not in after["text"]


def test_socket_and_home_are_owner_only(cairn_home: Path, daemon: subprocess.Popen[str]) -> None:
    sock = Path(protocol.socket_path(cairn_home))
    assert stat.S_ISSOCK(sock.stat().st_mode)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_IMODE(cairn_home.stat().st_mode) & 0o077 == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_user_is_refused_even_if_the_socket_mode_is_widened() -> None:
    """File modes are the first wall; SO_PEERCRED is the second: a widened socket still refuses others."""
    import shutil
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="cairn-peer-"))
    proc = start_daemon(home)
    try:
        sock = protocol.socket_path(home)
        os.chmod(home, 0o755)
        os.chmod(sock, 0o666)
        # The probe lets the daemon speak first: it waits until the daemon's answer is readable (or
        # the daemon clearly waits for the request) and only then writes. A daemon that refused and
        # closed before reading made that write fail with a broken pipe and the refusal went unread,
        # which is what a loaded machine produced by chance; here the order is forced every run.
        probe = (
            "import json, select, socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
            "select.select([s], [], [], 3)\n"
            "s.sendall(json.dumps({'v': 1, 'op': 'context', 'params': {}}).encode() + b'\\n')\n"
            "print(s.recv(65536).decode())\n"
        )
        other = subprocess.run(
            ["/usr/bin/python3", "-I", "-c", probe, sock],
            capture_output=True,
            text=True,
            user=65534,
            cwd="/",
            timeout=60,
        )
        assert other.returncode == 0, other.stderr
        answer = json.loads(other.stdout)
        assert answer["ok"] is False and answer["error"]["code"] == "FORBIDDEN"
    finally:
        stop_daemon(proc)
        shutil.rmtree(home, ignore_errors=True)


def test_an_answer_sent_before_the_request_is_still_read() -> None:
    """The client reads a refusal even when the daemon answered and closed before the client wrote."""
    from cairn.runtime.client import exchange

    ours, daemon_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    refusal = {"ok": False, "error": {"code": "FORBIDDEN", "message": "not the daemon's owner", "data": None}}
    daemon_end.sendall(protocol.encode(refusal))
    daemon_end.close()
    try:
        with pytest.raises(BrokenPipeError), ours.dup() as twin:  # the interleaving itself: writing fails
            twin.sendall(b"x" * 4096)
        raw = exchange(ours, protocol.encode(PING))
    finally:
        ours.close()
    assert protocol.decode(raw) == refusal


def test_stopping_says_how_many_requests_once(cairn_home: Path) -> None:
    proc = start_daemon(cairn_home)  # answered one ping, the one that saw it up
    for _ in range(2):
        assert cli_json(cairn_home, "context", "--repo", "acme/api")["served_by"] == "daemon"
    code, out, err = stop_daemon(proc)
    assert code == 0, err
    assert (out + err).count("stopped after") == 1, (out, err)
    assert "stopped after 3 request(s): 3 on the socket, 0 over HTTP" in out


def test_a_second_daemon_on_the_same_home_is_refused(cairn_home: Path, daemon: subprocess.Popen[str]) -> None:
    proc = run_cli_process(cairn_home, "--json", "serve")
    assert proc.returncode == 2
    reason = json.loads(proc.stdout)["reason"]
    assert reason["code"] == "SETUP" and "already serves" in reason["message"]
    assert ask_daemon(cairn_home, PING) is not None  # the first one is untouched


def test_stop_removes_socket_and_pid_and_prints_one_envelope(cairn_home: Path) -> None:
    proc = start_daemon(cairn_home, "--json")
    assert (cairn_home / protocol.PID_NAME).read_text().strip() == str(proc.pid)
    code, out, _err = stop_daemon(proc)
    assert code == 0
    envelope = json.loads(out)
    assert envelope["status"] == "ok" and envelope["verb"] == "serve"
    assert not Path(protocol.socket_path(cairn_home)).exists()
    assert not (cairn_home / protocol.PID_NAME).exists()


def test_a_stale_socket_from_a_dead_daemon_is_replaced(cairn_home: Path) -> None:
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(protocol.socket_path(cairn_home))
    stale.close()  # the file stays, nobody listens: what a kill -9 leaves behind
    assert ask_daemon(cairn_home, PING) is None
    proc = start_daemon(cairn_home)
    try:
        assert ask_daemon(cairn_home, PING)["data"]["pid"] == proc.pid
    finally:
        stop_daemon(proc)


def test_clients_fall_back_in_process_when_no_daemon_runs(cairn_home: Path) -> None:
    seed(cairn_home)
    data = cli_json(cairn_home, "context", "--repo", "acme/api")
    assert data["served_by"] == "process" and data["eligible"] == 2


def test_daemon_sweeps_expired_lessons_and_drains_the_embedding_queue(cairn_home: Path) -> None:
    assert run_cli_process(cairn_home, "write", "global", "short-lived", "Gone soon.", "--ttl", "1s").returncode == 0
    assert run_cli_process(cairn_home, "write", "global", "stays", "Embed me.").returncode == 0
    time.sleep(1.5)
    proc = start_daemon(cairn_home)
    try:
        deadline = time.monotonic() + 60
        db = cairn_home / "cairn.db"
        while time.monotonic() < deadline:
            with sqlite3.connect(db) as conn:
                queued = conn.execute("SELECT count(*) FROM embed_queue").fetchone()[0]
                left = conn.execute("SELECT count(*) FROM lessons WHERE key = 'short-lived'").fetchone()[0]
            if queued == 0 and left == 0:
                break
            time.sleep(0.3)
        assert (queued, left) == (0, 0)
        audit = cli_json(cairn_home, "audit", "--limit", "50")
        purges = [e for e in audit["entries"] if e["action"] == "purge"]
        assert [(e["key"], e["actor"]) for e in purges] == [("short-lived", "cairn-serve")]
    finally:
        stop_daemon(proc)


def test_daemon_errors_keep_their_codes(cairn_home: Path, daemon: subprocess.Popen[str]) -> None:
    proc = run_cli_process(cairn_home, "--json", "recall", "--text", "   ")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["reason"]["code"] == "INVALID_INPUT"
    answer = ask_daemon(cairn_home, {"v": protocol.PROTOCOL, "op": "drop-tables", "params": {}})
    assert answer["ok"] is False and answer["error"]["code"] == "INVALID_INPUT"
    answer = ask_daemon(cairn_home, {"v": 99, "op": "ping", "params": {}})
    assert answer["ok"] is False and answer["error"]["code"] == "SETUP"
    assert ask_daemon(cairn_home, PING)["ok"]  # still serving after bad requests
