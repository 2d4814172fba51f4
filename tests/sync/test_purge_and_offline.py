"""What a sync does to bytes and what it does without a network.

* A purge on the server erases the content from each laptop's SQLite file (read byte for byte,
  after a checkpoint) once it syncs, and the laptop's audit says so.
* Offline: ``cairn sync`` against a server that is not there fails with UNREACHABLE (exit 3) and
  changes nothing; every other command keeps working on the local store, ``cairn sync status``
  says what the last exchange recorded, and a hook never waits on the configured server.
"""

from __future__ import annotations

import json
import socket
import uuid

import pytest

from tests.hosts.test_hook import claude, context_of
from tests.sync.conftest import Rig, envelope

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


def test_offline_sync_fails_clearly_and_every_other_command_keeps_working(rig: Rig) -> None:
    """The laptop syncs through a server address that then goes away (a second listener on the same
    service, stopped): the sync fails with UNREACHABLE, exit 3; everything else works locally."""
    from cairn.api.app import create_app
    from tests.http_server import serving

    a = rig.laptop("a")
    a.ok("write", "global", "offline-one", "Written on the train.")
    with serving(create_app(rig.svc, mcp=False)) as there:
        a.url = there
        a.sync()
    proc = a.sync_proc(process=True)  # the same address, nobody listening now
    env = envelope(proc)
    assert proc.returncode == 3 and env["reason"]["code"] == "UNREACHABLE", env
    assert there in env["reason"]["message"]
    # The local store answers as before, and a write made offline waits for the next sync.
    a.ok("write", "global", "offline-two", "Written in the tunnel.")
    assert {x["key"] for x in a.ok("list")["lessons"]} >= {"offline-one", "offline-two"}
    status = a.ok("--url", there, "sync", "status", env={"CAIRN_TOKEN": a.token})
    assert status["reachable"] is False and status["reason"]["code"] == "UNREACHABLE"
    recorded = status["peer"]  # what the last exchange recorded, read offline
    assert recorded["pushed_cursor"] > 0 and recorded["last_exchange_at"] and recorded["peer_head"]["seq"] > 0
    a.url = rig.url  # the server back (at its usual address)
    back = a.ok("--url", rig.url, "sync", "status", env={"CAIRN_TOKEN": a.token})
    assert back["reachable"] and back["pending"]["push"] >= 1 and back["pending"]["pull"] == 0
    assert a.sync()["pushed"]["applied"] >= 1
    assert "Written in the tunnel." in rig.active_values()


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
