"""What a sync does to bytes and what it does without a network.

* A purge on the server erases the content from each laptop's SQLite file (read byte for byte,
  after a checkpoint) once it syncs, and the laptop's audit says so.
* Offline: ``cairn sync`` against a real ``cairn serve`` that was stopped fails with UNREACHABLE
  (exit 3) and changes nothing; every other command keeps working on the local store, ``cairn sync status``
  says what the last exchange recorded, and a hook never waits on the configured server.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from cairn.runtime.remote import RemoteCairn
from tests.cli.test_remote import _free_port
from tests.conftest import run_cli
from tests.daemon.test_daemon import _env, stop_daemon
from tests.hosts.test_hook import claude, context_of
from tests.sync.conftest import Laptop, Rig, envelope

SECRET = "The staging root password is hunter2-correct-horse."


def test_a_server_purge_erases_the_content_from_both_laptops_files(rig: Rig) -> None:
    a, b = rig.laptop("a"), rig.laptop("b")
    a.ok("write", "project::staging", "root-password", SECRET)
    a.sync()
    b.sync()
    for laptop in (a, b):
        assert SECRET.encode() in laptop.file_bytes()
    rig.svc.forget(rig.alice, "project::staging", "root-password", "a secret in memory")
    rig.svc.erase_forgotten(rig.alice, "project::staging", "root-password")
    for laptop in (a, b):
        laptop.sync()
        assert SECRET.encode() not in laptop.file_bytes(), laptop.name
        entries = laptop.ok("audit", "--limit", "50")["entries"]
        purges = [e for e in entries if e["key"] == "root-password" and "purge" in e["action"]]
        assert purges, [(e["action"], e["key"]) for e in entries]
    # Nothing brings it back: the next syncs move nothing, and the content stays refused.
    assert a.sync()["pulled"]["applied"] == 0
    assert SECRET.encode() not in a.file_bytes()


def _serve(home: Path, db: str, port: int) -> subprocess.Popen[str]:
    """A real ``cairn serve`` (its own process) on ``db``, answering on loopback ``port``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "--db", db,
         "serve", "--no-warm", "--no-sweep", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(), cwd=home,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=5):
                return proc
        except OSError:
            assert time.monotonic() < deadline, "cairn serve did not answer within 90 s"
            time.sleep(0.2)


def test_offline_sync_fails_clearly_and_every_other_command_keeps_working(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    """Against a real ``cairn serve`` (on the module's database) that is stopped after a first sync:
    the sync fails with UNREACHABLE, exit 3, and changes nothing; every other command works on the
    local store; ``sync status`` says what the last exchange recorded; once the server is back at
    the same address, the writes made offline reach it."""
    from tests.conftest import new_store_url

    db = new_store_url(request, backend, tmp_path / "server-db")
    server_home = tmp_path / "server-home"
    server_home.mkdir()
    token = json.loads(run_cli(server_home, "--json", "--db", db, "user", "create", "alice").stdout)["data"]["token"]
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    a = Laptop("a", tmp_path / "laptop", url, token)
    a.ok("write", "global", "offline-one", "Written on the train.")
    server = _serve(server_home, db, port)
    try:
        assert a.sync()["pushed"]["applied"] >= 1
    finally:
        stop_daemon(server)
    proc = a.sync_proc(process=True)  # the same address, the server stopped
    env = envelope(proc)
    assert proc.returncode == 3 and env["reason"]["code"] == "UNREACHABLE", env
    assert url in env["reason"]["message"]
    before = a.versions()
    # The local store answers as before, and a write made offline waits for the next sync.
    a.ok("write", "global", "offline-two", "Written in the tunnel.")
    assert {x["key"] for x in a.ok("list")["lessons"]} >= {"offline-one", "offline-two"}
    assert set(a.versions()) - set(before) == {("global", "offline-two")}
    status = a.ok("--url", url, "sync", "status", env={"CAIRN_TOKEN": token})
    assert status["reachable"] is False and status["reason"]["code"] == "UNREACHABLE"
    recorded = status["peer"]  # what the last exchange recorded, read offline
    assert recorded["pushed_cursor"] > 0 and recorded["last_exchange_at"] and recorded["peer_head"]["seq"] > 0
    server = _serve(server_home, db, port)  # back, at the same address
    try:
        back = a.ok("--url", url, "sync", "status", env={"CAIRN_TOKEN": token})
        assert back["reachable"] and back["pending"]["push"] >= 1 and back["pending"]["pull"] == 0
        assert a.sync()["pushed"]["applied"] >= 1
        listed = RemoteCairn(url, token).list(None, limit=100)["lessons"]
        assert {x["key"] for x in listed} >= {"offline-one", "offline-two"}
    finally:
        stop_daemon(server)


def test_hooks_and_commands_never_touch_the_configured_server(rig: Rig) -> None:
    """With ``[sync] url`` set, a session-start hook, context and a write read and write the local
    store only: the configured server (a socket that listens and never answers) sees no connection."""
    a = rig.laptop("a")
    a.ok("write", "global", "hook-visible", "Hooks read the local store only.")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        (a.home / "config.toml").write_text(f'[sync]\nurl = "{url}"\ninterval_minutes = 1\n', encoding="utf-8")
        payload = json.dumps(claude("SessionStart", str(uuid.uuid4()), a.home, source="startup"))
        hook = a.run("hook", "session-start", "--host", "claude-code", stdin=payload)
        assert "Hooks read the local store only." in context_of(hook, "SessionStart")
        assert "Hooks read the local store only." in a.ok("context")["text"]
        assert a.ok("write", "global", "while-configured", "Still local.")["action"] == "created"
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):
            silent.accept()  # nothing connected: no command or hook went to the network
        # The sync command itself is what goes there (and says so when it gets no answer in time).
        stalled = envelope(a.run("sync", env={"CAIRN_TOKEN": a.token, "CAIRN_HTTP_TIMEOUT": "1"}, process=True))
        assert stalled["reason"]["code"] == "UNREACHABLE"
    finally:
        silent.close()
