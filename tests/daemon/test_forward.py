"""Every command through the local daemon (``cairn.runtime.forward``), and the daemon started on demand.

What must hold: a forwarded command prints what the same command prints in its own process (stdout,
stderr, exit code), reads the caller's stdin and writes files relative to the caller's directory
with the caller's umask; a command that finds no daemon starts one, which exits by itself when idle;
``CAIRN_NO_DAEMON=1`` and ``serve.auto_start = 0`` start nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from cairn.runtime import forward
from cairn.runtime.client import ask_daemon
from cairn.runtime.settings import SPECS
from tests.conftest import run_cli_process
from tests.daemon.test_daemon import PING, start_daemon, stop_daemon

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)

EMBED = {"CAIRN_EMBED_MODEL": "hash-test-64"}
IN_PROCESS = {**EMBED, "CAIRN_NO_DAEMON": "1"}
FORWARD = {**EMBED, "CAIRN_NO_DAEMON": ""}  # the suite's environment may carry it; empty is off


def test_the_client_reads_the_settings_keys_the_settings_define() -> None:
    spec = next(s for s in SPECS if s.name == "auto_start")
    assert (spec.env, spec.path) == (forward.AUTO_START_ENV, forward.AUTO_START_KEY)


def _same(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``args`` in process and forwarded; both must print the same and exit the same."""
    here = run_cli_process(home, *args, stdin=stdin, env=IN_PROCESS)
    there = run_cli_process(home, *args, stdin=stdin, env=FORWARD)
    assert (there.returncode, there.stdout, there.stderr) == (here.returncode, here.stdout, here.stderr), args
    return there


def test_a_forwarded_command_prints_what_it_prints_in_process(
    cairn_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = start_daemon(cairn_home)
    try:
        piped = run_cli_process(
            cairn_home, "write", "global", "piped", "-", stdin="from the caller's stdin\n", env=FORWARD
        )
        assert piped.returncode == 0, piped.stderr
        retry = run_cli_process(cairn_home, "write", "repo::acme/api", "retry", "Cap retries at three.", env=FORWARD)
        assert retry.returncode == 0
        assert "from the caller's stdin" in _same(cairn_home, "read", "global", "piped").stdout
        _same(cairn_home, "list")
        _same(cairn_home, "search", "retries", "--mode", "fts")
        missing = _same(cairn_home, "read", "global", "missing")  # refused: stderr and exit 1
        assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr
        usage = _same(cairn_home, "write", "global")  # a usage error, from the command parser
        assert usage.returncode == 1 and "INVALID_INPUT" in usage.stderr
        assert "Usage: cairn write" in _same(cairn_home, "write", "--help").stdout
        # A relative path is the caller's, and the file is created with the caller's umask.
        work = cairn_home / "work"
        work.mkdir()
        for env, name in ((IN_PROCESS, "here.jsonl"), (FORWARD, "there.jsonl")):
            proc = subprocess.run(
                ["sh", "-c", f'umask 077 && exec "$0" -m cairn.cli.main export {name}', _python()],
                cwd=work, capture_output=True, text=True, env={**os.environ, "CAIRN_HOME": str(cairn_home), **env},
                timeout=120,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
        there, here = ((work / n).read_text().splitlines() for n in ("there.jsonl", "here.jsonl"))
        assert len(there) == len(here) > 2 and there[1:] == here[1:]  # the header line holds the export's time
        assert stat.S_IMODE((work / "there.jsonl").stat().st_mode) == 0o600
        # Another Cairn version's command is not the daemon's to run: the caller runs it itself.
        monkeypatch.setenv("CAIRN_HOME", str(cairn_home))
        monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")  # all else as the daemon's
        assert forward.run(["--json", "list"], str(cairn_home), None) == 0
        monkeypatch.setattr(forward, "_version", lambda: "0.0.0-another")
        with pytest.raises(forward.Absent) as refused:
            forward.run(["--json", "list"], str(cairn_home), None)
        assert refused.value.listening
        # cairn status (forwarded itself) names the daemon that runs it.
        shown = json.loads(run_cli_process(cairn_home, "--json", "status", env=FORWARD).stdout)["data"]
        assert shown["daemon"]["pid"] == daemon.pid and shown["daemon"]["idle_exit_minutes"] is None
        assert shown["active_lessons"] == 2
    finally:
        _, summary, _ = stop_daemon(daemon)
    # the ping that found it up, the two writes, the forwarded half of each _same, export, the same-version
    # list, status and its ping
    forwarded = 1 + 2 + 6 + 1 + 1 + 2
    assert f"{forwarded} on the socket" in summary, summary


def _python() -> str:
    import sys

    return sys.executable


def _kill(home: Path) -> None:
    """Never leave a daemon started on demand behind a test."""
    with contextlib.suppress(OSError, ValueError):
        os.kill(int((home / "cairn.pid").read_text()), signal.SIGTERM)


def test_a_command_starts_a_daemon_that_serves_the_next_and_exits_when_idle(cairn_home: Path) -> None:
    env = {**FORWARD, "CAIRN_SERVE_AUTO_START": "1", "CAIRN_SERVE_IDLE_MINUTES": "0.05"}  # 3 s idle
    try:
        first = run_cli_process(cairn_home, "write", "global", "first", "written before any daemon ran", env=env)
        assert first.returncode == 0
        deadline = time.monotonic() + 90
        while ask_daemon(cairn_home, PING) is None:
            assert time.monotonic() < deadline, (cairn_home / forward.LOG_NAME).read_text()
            time.sleep(0.2)
        pid = int((cairn_home / "cairn.pid").read_text())
        read = run_cli_process(cairn_home, "read", "global", "first", env=env)
        assert read.returncode == 0 and "written before any daemon ran" in read.stdout
        while _alive(pid):  # idle: it stops by itself
            assert time.monotonic() < deadline + 60, "the daemon started on demand did not exit when idle"
            time.sleep(0.3)
        log = (cairn_home / forward.LOG_NAME).read_text()
        assert "no request for 3s; stopping" in log, log
        assert "2 on the socket" in log, log  # the ping and the read (the first command ran in process)
        assert not (cairn_home / "cairn.sock").exists()
    finally:
        _kill(cairn_home)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # not our child (it was started detached); reaped by init
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_no_daemon_and_the_config_switch_start_nothing(cairn_home: Path) -> None:
    on = {**FORWARD, "CAIRN_SERVE_AUTO_START": "1"}
    try:
        assert run_cli_process(cairn_home, "list", env={**on, "CAIRN_NO_DAEMON": "1"}).returncode == 0
        assert not (cairn_home / forward.SPAWN_MARK).exists()
        shown = json.loads(run_cli_process(cairn_home, "--json", "status", env=IN_PROCESS).stdout)["data"]
        assert shown["daemon"] is None and shown["active_lessons"] == 0
        (cairn_home / "config.toml").write_text("[serve]\nauto_start = 0\n")
        assert run_cli_process(cairn_home, "list", env={**on, "CAIRN_SERVE_AUTO_START": ""}).returncode == 0
        assert not (cairn_home / forward.SPAWN_MARK).exists()
        assert run_cli_process(cairn_home, "config", "show", env=IN_PROCESS).returncode == 0  # a known key
    finally:
        _kill(cairn_home)


def test_cairn_serve_takes_over_from_a_daemon_started_on_demand(cairn_home: Path) -> None:
    env = {**FORWARD, "CAIRN_SERVE_AUTO_START": "1"}
    served = None
    try:
        assert run_cli_process(cairn_home, "list", env=env).returncode == 0
        deadline = time.monotonic() + 90
        while (answer := ask_daemon(cairn_home, PING)) is None:
            assert time.monotonic() < deadline, (cairn_home / forward.LOG_NAME).read_text()
            time.sleep(0.2)
        on_demand = answer["data"]["pid"]
        served = start_daemon(cairn_home)  # the foreground daemon a person starts: not refused
        while (answer := ask_daemon(cairn_home, PING)) is None or answer["data"]["pid"] != served.pid:
            assert served.poll() is None and time.monotonic() < deadline + 60, answer  # the old one answers first
            time.sleep(0.2)
        while _alive(on_demand):  # it released its lock as it stopped; the process ends just after
            assert time.monotonic() < deadline + 120, "the daemon started on demand did not stop"
            time.sleep(0.2)
        assert "to serve in its place" in stop_daemon(served)[2]
    finally:
        if served is not None and served.poll() is None:
            stop_daemon(served)
        _kill(cairn_home)


def test_a_daemon_of_another_version_answers_nothing_and_one_started_on_demand_steps_down_for_a_newer(
    cairn_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Left running across an upgrade, a daemon would serve the old code to the hooks (which keep it
    from ever idling out) while every other command ran cold. Another version's commands and hook
    operations run in their caller; a daemon a command started steps down for a newer Cairn, whose next
    command starts its own; an older caller does not stop it, and a daemon a person started keeps serving."""
    from cairn.runtime import client

    monkeypatch.setenv("CAIRN_HOME", str(cairn_home))
    for name, value in {**FORWARD, "CAIRN_SERVE_AUTO_START": "1"}.items():
        monkeypatch.setenv(name, value)
    try:
        assert run_cli_process(cairn_home, "list", env={**FORWARD, "CAIRN_SERVE_AUTO_START": "1"}).returncode == 0
        deadline = time.monotonic() + 90
        while (answer := ask_daemon(cairn_home, PING)) is None:
            assert time.monotonic() < deadline, (cairn_home / forward.LOG_NAME).read_text()
            time.sleep(0.2)
        pid = answer["data"]["pid"]
        assert client.call("context", {})["served_by"] == "daemon"
        # An older Cairn: served by neither side's daemon, and it does not stop this one.
        monkeypatch.setattr(forward, "_version", lambda: "0.0.1")
        monkeypatch.setattr(client, "_version", lambda: "0.0.1")
        with pytest.raises(forward.Absent) as older:
            forward.run(["list"], str(cairn_home), None)
        assert older.value.listening  # none is started for it
        assert client.call("context", {})["served_by"] == "process"
        assert _alive(pid)
        # A newer Cairn: runs its command itself, and the daemon stops so that the next one is its own.
        monkeypatch.setattr(forward, "_version", lambda: "999.0")
        with pytest.raises(forward.Absent) as newer:
            forward.run(["list"], str(cairn_home), None)
        assert not newer.value.listening  # the caller starts the next daemon
        while _alive(pid):
            assert time.monotonic() < deadline + 60, "the daemon started on demand did not step down"
            time.sleep(0.2)
        assert "a newer Cairn (999.0) called" in (cairn_home / forward.LOG_NAME).read_text()
    finally:
        _kill(cairn_home)
    served = start_daemon(cairn_home, env={**os.environ, **EMBED})  # a person's `cairn serve`
    try:
        monkeypatch.setattr(client, "_version", lambda: "999.0")
        assert client.call("context", {})["served_by"] == "process"
        status = json.loads(run_cli_process(cairn_home, "--json", "status", env=FORWARD).stdout)["data"]
        assert status["daemon"]["pid"] == served.pid and served.poll() is None  # still serving its own version
    finally:
        stop_daemon(served)


@pytest.mark.parametrize(
    ("value", "forwards"), [("", True), ("0", True), ("false", True), ("1", False), ("yes", False)]
)
def test_cairn_no_daemon_is_off_only_when_set_to_something_else_than_an_off_word(
    monkeypatch: pytest.MonkeyPatch, value: str, forwards: bool
) -> None:
    monkeypatch.setenv("CAIRN_NO_DAEMON", value)
    assert forward.enabled() is forwards
    assert forward.forwardable("list", None) is forwards


LISTENER = """
import os, socket, sys
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
os.setgid(65534)
os.setuid(65534)  # listen() records the listener's credentials: from here on it is another user's socket
s.listen(4)
print("ready", flush=True)
got = 0
for _ in range(2):
    conn, _ = s.accept()
    conn.settimeout(3)
    try:
        while chunk := conn.recv(65536):
            got += len(chunk)
    except OSError:
        pass
    conn.close()
print(got, flush=True)
"""


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="listening as another user needs root")
def test_a_socket_another_user_listens_on_where_the_daemon_would_gets_nothing(
    cairn_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client hands the daemon its environment (tokens, keys) and its descriptors: a socket of another
    user at the daemon's path (a long home's socket is in the shared temp directory) must get none."""
    from cairn.daemon import protocol

    path = protocol.socket_path(cairn_home)
    listener = subprocess.Popen(
        [_python(), "-c", LISTENER, path], stdout=subprocess.PIPE, text=True, cwd="/"
    )  # fmt: skip
    try:
        assert listener.stdout is not None and listener.stdout.readline().strip() == "ready"
        monkeypatch.setenv("CAIRN_TOKEN", "cairn_secret-that-must-not-leave")
        monkeypatch.setenv("CAIRN_NO_DAEMON", "")
        with pytest.raises(forward.Absent) as refused:
            forward.run(["list"], str(cairn_home), None)
        assert refused.value.listening  # something listens, so no daemon of ours is started over it
        assert ask_daemon(cairn_home, PING) is None
        out, _ = listener.communicate(timeout=30)
        assert out.strip() == "0"  # not one byte of the request reached it
    finally:
        if listener.poll() is None:
            listener.kill()


def test_ctrl_c_stops_a_forwarded_command_where_it_is_as_it_would_in_process(cairn_home: Path) -> None:
    """Ctrl-C on a forwarded `cairn import` stopped only the client: the daemon imported every line
    while the terminal had its prompt back. Now the caller's hang-up interrupts the command in the
    daemon, which prints what an interrupted import prints and exits 130; the daemon serves on."""
    import sqlite3

    lines = 30_000
    source = cairn_home / "many.jsonl"
    source.write_text(
        "".join(json.dumps({"scope": "global", "key": f"k{i}", "value": f"lesson {i} of an import"}) + "\n"
                for i in range(lines))
    )  # fmt: skip
    daemon = start_daemon(cairn_home)

    def count() -> int:
        with contextlib.closing(sqlite3.connect(f"file:{cairn_home / 'cairn.db'}?mode=ro", uri=True)) as db:
            return int(db.execute("SELECT count(*) FROM lessons").fetchone()[0])

    try:
        proc = subprocess.Popen(
            [_python(), "-m", "cairn.cli.main", "import", str(source)], cwd=cairn_home, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "CAIRN_HOME": str(cairn_home), **FORWARD},
            # A suite started in the background of a non-interactive shell inherits SIGINT ignored, and
            # Python keeps an ignored SIGINT ignored: the client would never see this Ctrl-C.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while count() == 0:  # the daemon is writing the import's batches
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        stopped = count()
        time.sleep(1)
        assert count() == stopped < lines  # the daemon stopped it too: no line was written after
        assert "still queued for embedding" in err or "interrupted" in err, err
        assert "Traceback" not in err
        after = run_cli_process(cairn_home, "audit", "verify", env=FORWARD)
        assert after.returncode == 0 and f"state agrees: {stopped} lesson(s)" in after.stdout, after.stdout
    finally:
        _, summary, log = stop_daemon(daemon)
    assert "on the socket" in summary, log


def test_a_relative_home_gets_its_daemon(cairn_home: Path) -> None:
    """`cairn --home h …` (or CAIRN_HOME=h) from the home's parent: the daemon it starts serves that
    home; it served h/h (a new empty store inside it) and no command ever reached it."""
    env = {**os.environ, **FORWARD, "CAIRN_SERVE_AUTO_START": "1", "CAIRN_HOME": cairn_home.name}
    try:
        first = subprocess.run(
            [_python(), "-m", "cairn.cli.main", "write", "global", "rel", "A lesson in a relative home."],
            cwd=cairn_home.parent, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert first.returncode == 0, first.stderr
        deadline = time.monotonic() + 90
        while ask_daemon(cairn_home, PING) is None:
            assert time.monotonic() < deadline, (cairn_home / forward.LOG_NAME).read_text()
            time.sleep(0.2)
        assert not (cairn_home / cairn_home.name).exists()
        read = run_cli_process(cairn_home, "read", "global", "rel", env=FORWARD)
        assert read.returncode == 0 and "A lesson in a relative home." in read.stdout
    finally:
        _kill(cairn_home)


def test_the_callers_setting_variables_shape_the_daemons_answer_and_no_other(cairn_home: Path) -> None:
    """`CAIRN_CONTEXT_MAX_CHARS=300 cairn context` (or a hook with it in its environment): the daemon
    answered with its own settings (7 lessons, 958 characters, where in process gave 1 in 292), and a
    forwarded command's variables leaked into a concurrent hook's answer (0 lessons loaded)."""
    for i in range(6):
        text = f"Lesson number {i}, with enough words to take some room in the session's context block."
        assert run_cli_process(cairn_home, "write", "global", f"k{i}", text, env=IN_PROCESS).returncode == 0
    daemon = start_daemon(cairn_home)
    small = {"CAIRN_CONTEXT_MAX_CHARS": "300"}

    def block(env: dict[str, str]) -> tuple[int, str, str]:
        data = json.loads(run_cli_process(cairn_home, "--json", "context", env=env).stdout)["data"]
        return data["loaded"], data["text"], data["served_by"]

    try:
        here, there = block({**IN_PROCESS, **small}), block({**FORWARD, **small})
        assert there[2] == "daemon" and there[:2] == here[:2] and len(here[1]) <= 300
        whole = block(IN_PROCESS)[:2]
        assert whole[0] > here[0]
        # A forwarded command runs with its caller's environment; a hook answered meanwhile keeps its own.
        waiting = subprocess.Popen(
            [_python(), "-m", "cairn.cli.main", "write", "global", "held", "-"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cairn_home,
            env={**os.environ, "CAIRN_HOME": str(cairn_home), **FORWARD, "CAIRN_CONTEXT_MAX_CHARS": "200"},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not _busy(cairn_home):
                assert waiting.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            assert block(FORWARD) == (*whole, "daemon")
        finally:
            waiting.communicate("A lesson written from stdin.\n", timeout=60)
        assert waiting.returncode == 0
    finally:
        stop_daemon(daemon)


def _busy(home: Path) -> bool:
    """Whether the daemon is running a forwarded command."""
    answer = ask_daemon(home, PING)
    return answer is not None and answer["data"]["running_commands"] > 0
