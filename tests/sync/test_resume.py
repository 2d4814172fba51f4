"""A sync killed at every step resumes and applies each event exactly once; the daemon syncs alone.

``cairn sync`` runs as a process of its own and is SIGKILLed (``CAIRN_SYNC_CRASH_AT=STAGE:N``, the
sync client's kill points: no cleanup, no flush) at each stage of the first and second batch of
each direction; the next ``cairn sync`` finishes the exchange. Then every lesson holds exactly the
versions an uninterrupted sync of the same writes gives (no event applied twice, none lost) on the
laptop and on the server alike.
"""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest

from cairn.runtime.sync_client import CRASH_ENV, STAGES
from tests.daemon.test_daemon import _env, start_daemon, stop_daemon
from tests.servers import new_tenant
from tests.sync.conftest import Laptop, Rig, envelope

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)

SERVER_SIDE = [("repo::acme/api", f"server-{i}", f"Server lesson number {i} about the API.") for i in range(5)]
LAPTOP_SIDE = [("repo::acme/web", f"laptop-{i}", f"Laptop lesson number {i} about the web app.") for i in range(5)]
BATCH = "2"


def _seed(rig: Rig, laptop: Laptop) -> None:
    for scope, key, value in SERVER_SIDE:
        rig.svc.write(rig.alice, scope, key, value)
    rig.svc.write(rig.alice, *SERVER_SIDE[0][:2], SERVER_SIDE[0][2] + " Revised.")  # a second version
    for scope, key, value in LAPTOP_SIDE:
        laptop.ok("write", scope, key, value)
    laptop.ok("write", *LAPTOP_SIDE[0][:2], LAPTOP_SIDE[0][2] + " Revised.")


def _shape(versions: dict[tuple[str, str], set[tuple[str, str]]]) -> dict[tuple[str, str], Counter[str]]:
    """Per address, how many versions of each content: what a second application would change."""
    return {address: Counter(chash for _uid, chash in held) for address, held in versions.items()}


def test_a_sync_killed_at_every_step_resumes_and_applies_each_event_once(rig: Rig) -> None:
    control = rig.laptop("control")
    _seed(rig, control)
    control.sync("--batch", BATCH)
    expected = _shape(rig.server_versions())
    assert _shape(control.versions()) == expected
    assert len(expected) == len(SERVER_SIDE) + len(LAPTOP_SIDE)

    for stage in STAGES:
        for n in (1, 2):
            tenant = new_tenant(rig.server)  # a server tenant and a laptop of their own per kill point
            run = Rig(rig.server, tenant, rig.tmp / f"{stage}-{n}")
            laptop = run.laptop("laptop")
            _seed(run, laptop)
            killed = laptop.sync_proc("--batch", BATCH, process=True, env={CRASH_ENV: f"{stage}:{n}"})
            assert killed.returncode == -signal.SIGKILL, (stage, n, killed.returncode, killed.stderr)
            resumed = laptop.sync("--batch", BATCH)
            assert not resumed["pulled"]["refused"] and not resumed["pushed"]["refused"]
            assert _shape(run.server_versions()) == expected, (stage, n)
            assert laptop.versions() == run.server_versions(), (stage, n)
            # And a further sync finds nothing left to apply on either side.
            again = laptop.sync("--batch", BATCH)
            assert (again["pulled"]["applied"], again["pushed"]["applied"]) == (0, 0), (stage, n)


def test_the_daemon_syncs_in_the_background_and_never_logs_the_token(rig: Rig) -> None:
    laptop = rig.laptop("daemon")
    laptop.ok("write", "global", "written-before", "Written before the daemon started.")
    (laptop.home / "config.toml").write_text(
        f'[sync]\nurl = "{rig.url}"\ninterval_minutes = 0.02\ntoken_env = "CAIRN_SYNC_TOKEN"\n', encoding="utf-8"
    )
    proc = start_daemon(laptop.home, env=_env(CAIRN_SYNC_TOKEN=laptop.token))
    try:
        rig.svc.write(rig.alice, "project::staging", "from-server", "Written on the server meanwhile.")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            here = set(laptop.versions())
            there = set(rig.server_versions())
            if ("global", "written-before") in there and ("project::staging", "from-server") in here:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"no background sync within 90 s: here {here}, there {there}")
    finally:
        _code, _out, log = stop_daemon(proc)
    assert f"synced with 127.0.0.1:{rig.url.rsplit(':', 1)[1]}" in log, log
    assert laptop.token not in log


def test_sync_refuses_what_it_cannot_do(rig: Rig) -> None:
    laptop = rig.laptop("refusals")
    no_token = envelope(laptop.run("--url", rig.url, "sync", env={"CAIRN_TOKEN": ""}))
    assert no_token["reason"]["code"] == "UNAUTHENTICATED"
    forged = envelope(laptop.sync_proc(token="cairn_forged_token_value"))
    assert forged["reason"]["code"] == "UNAUTHENTICATED"
    nowhere = envelope(laptop.run("sync"))
    assert nowhere["reason"]["code"] == "INVALID_INPUT" and "--url" in nowhere["reason"]["message"]
    bad_url = envelope(laptop.run("--url", "127.0.0.1:1", "sync", env={"CAIRN_TOKEN": laptop.token}))
    assert bad_url["reason"]["code"] == "INVALID_INPUT" and bad_url["reason"]["data"]["corrected"]
    too_big = envelope(laptop.sync_proc("--batch", "999999"))
    assert too_big["reason"]["code"] == "INVALID_INPUT"


def test_the_daemon_logs_an_unreachable_server_by_its_code_and_keeps_serving(rig: Rig, tmp_path) -> None:
    """A background round against a server that is not there: one log line with the code and the
    host, never the token; the daemon keeps answering its socket and the next round is scheduled."""
    import socket as socketlib
    import subprocess
    import sys

    from cairn.daemon.protocol import PROTOCOL
    from cairn.runtime.client import ask_daemon

    with socketlib.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    laptop = rig.laptop("offline-daemon")
    laptop.ok("write", "global", "local-only", "Written while the server is down.")
    (laptop.home / "config.toml").write_text(
        f'[sync]\nurl = "{dead}"\ninterval_minutes = 60\ntoken_env = "CAIRN_SYNC_TOKEN"\n', encoding="utf-8"
    )
    log_path = tmp_path / "daemon.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cairn.cli.main", "--home", str(laptop.home), "serve", "--no-http", "--no-warm"],
            stdout=subprocess.DEVNULL, stderr=log, text=True, env=_env(CAIRN_SYNC_TOKEN=laptop.token),
            cwd=laptop.home,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 90
            while "sync with" not in log_path.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
            answer = ask_daemon(laptop.home, {"v": PROTOCOL, "op": "ping", "params": {}})
            assert answer is not None and answer["ok"]
        finally:
            stop_daemon(proc)
    text = log_path.read_text()
    port = dead.rsplit(":", 1)[1]
    assert f"sync with 127.0.0.1:{port} failed: UNREACHABLE; next try in 60 min" in text, text
    assert laptop.token not in text
