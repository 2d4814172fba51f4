"""Run a whole ``cairn`` command in the warm daemon, and start the daemon when none runs. Standard library only.

A cold ``cairn write`` spends most of its time importing typer, SQLAlchemy and numpy; the write
itself takes milliseconds. When a daemon serves this home, the entry point hands it the command
line instead: argv, the environment, the working directory, the umask, and the caller's own
stdin/stdout/stderr as file descriptors (SCM_RIGHTS over the owner-only Unix socket). The daemon
runs the same ``cairn.cli.main.main`` on those descriptors, so the output, the envelope, the exit
code, TTY-ness and relative paths are what the command would have had here; only the cost differs.

Whenever the daemon cannot take the command (none runs, it is busy with another command, it serves
another database or embedding model, or it went away before starting it) the command runs in this
process, as it always could. A daemon that went away *after* starting the command is an error, not
a retry: the command may already have written.

On demand: when no daemon answers, the command runs here and then starts one, detached, for the
commands that follow (``cairn serve --auto``: socket only, exits after ``serve.idle_minutes`` idle).
``CAIRN_NO_DAEMON=1`` turns forwarding and the start off; ``serve.auto_start = 0`` (config.toml or
``CAIRN_SERVE_AUTO_START=0``) turns off only the start.
"""

from __future__ import annotations

import os
import socket
import sys

from cairn.daemon import protocol
from cairn.runtime import threads

TYPE_CHECKING = False  # see cairn.errors
if TYPE_CHECKING:
    from typing import Any

CONNECT_TIMEOUT = 0.5
STOP_WAIT = 10.0  # seconds an interrupted caller waits for the daemon to stop its command
# The same keys as cairn.runtime.settings' Spec entries ("serve", "auto_start") and ("serve", "idle_minutes"),
# read here without importing the settings module (tests/daemon/test_forward.py checks they agree).
AUTO_START_ENV = "CAIRN_SERVE_AUTO_START"
AUTO_START_KEY = ("serve", "auto_start")
SPAWN_MARK = "daemon.spawned"  # in the home: when a start was last tried
SPAWN_BACKOFF = 30.0  # seconds between tries, so a daemon that cannot start is not retried per command
LOG_NAME = "daemon.log"


class Absent(Exception):
    """No daemon took the command before it started: run it here. ``listening`` says whether one
    answered at all (busy, or serving another database) or none runs (then one may be started)."""

    def __init__(self, listening: bool) -> None:
        super().__init__("no daemon took the command")
        self.listening = listening


def enabled() -> bool:
    return not protocol.daemon_off()


def forwardable(verb: str, url: str | None) -> bool:
    """Whether this command line may go to the local daemon at all."""
    if not enabled() or verb in protocol.LOCAL_VERBS:
        return False
    # A remote Cairn (--url / CAIRN_URL) is another server's business; the client is thin anyway.
    return not ((url or "").strip() or os.environ.get("CAIRN_URL", "").strip())


def _terminal_env() -> dict[str, str]:
    """COLUMNS/LINES as this process's terminal reports them, for the daemon, whose own descriptors
    0-2 are not a terminal (rich and click read the size from those numbers or from these variables)."""
    if os.environ.get("COLUMNS") and os.environ.get("LINES"):
        return {}
    for fd in (0, 1, 2):
        try:
            size = os.get_terminal_size(fd)
        except (OSError, ValueError):
            continue
        found = {"COLUMNS": str(size.columns), "LINES": str(size.lines)}
        return {k: v for k, v in found.items() if not os.environ.get(k)}
    return {}


def _stream(stream: Any) -> dict[str, Any] | None:
    """How this interpreter opened one of its standard streams, so the daemon opens the same."""
    if stream is None:
        return None
    try:
        stream.fileno()
    except (OSError, ValueError, AttributeError):
        return None
    return {
        "encoding": getattr(stream, "encoding", None) or "utf-8",
        "errors": getattr(stream, "errors", None) or "strict",
        "line_buffering": bool(getattr(stream, "line_buffering", False)),
    }


def run(argv: list[str], home: str, db: str | None) -> int:
    """The command's exit code as the daemon ran it; raises ``Absent`` when it did not start it."""
    streams = [_stream(s) for s in (sys.stdin, sys.stdout, sys.stderr)]
    if any(s is None for s in streams[1:]):
        raise Absent(True)  # no stdout/stderr descriptor to hand over
    umask = os.umask(0o022)
    os.umask(umask)
    params = {
        "argv": argv,
        "env": {**os.environ, **_terminal_env()},
        "cwd": os.getcwd(),
        "umask": umask,
        "streams": streams,
        "version": _version(),
    }
    message = {"v": protocol.PROTOCOL, "op": protocol.FORWARD_OP, "params": params, "db": db}
    fds = [0, 1, 2] if streams[0] is not None else [1, 2]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        try:
            sock.connect(protocol.socket_path(home))
        except OSError:
            raise Absent(False) from None
        if not protocol.served_by_owner(sock):
            raise Absent(True)  # not our daemon: it gets neither the environment nor the descriptors
        try:
            socket.send_fds(sock, [protocol.encode(message)], fds)
        except OSError:
            raise Absent(False) from None
        sock.settimeout(None)  # a forwarded import may take minutes; the daemon answers when done
        reader = sock.makefile("rb")
        try:
            first = reader.readline()
        except OSError:
            first = b""
        started = _answer(first)
        if started is None or not started.get("started"):
            # Busy, another database or model, a refusal: this process does the work. A daemon of an
            # older Cairn that steps down for this one counts as none: this command starts the next.
            raise Absent(not (started or {}).get("stepping_down"))
        try:
            last = reader.readline()
        except OSError:
            last = b""
        except KeyboardInterrupt:
            last = _interrupted(sock, reader)
        done = _answer(last)
        if done is None or not isinstance(done.get("exit"), int):
            sys.stderr.write("cairn: INTERNAL: the Cairn daemon stopped while running this command\n")
            return 2
        return int(done["exit"])
    finally:
        sock.close()


def _interrupted(sock: socket.socket, reader: Any) -> bytes:
    """Ctrl-C while the daemon runs the command: close this end, which interrupts the command there
    (it prints what an interrupted command prints, on this terminal), and wait for its exit code. A
    second Ctrl-C, or a command that does not stop within ``STOP_WAIT``, leaves it at exit 130."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(STOP_WAIT)
        return reader.readline() or b'{"exit": 130}'
    except (OSError, KeyboardInterrupt):
        return b'{"exit": 130}'


def _version() -> str:
    from cairn import __version__  # a constant in the package's __init__: nothing else loads

    return __version__


def _answer(raw: bytes) -> dict[str, Any] | None:
    if not raw:
        return None
    try:
        answer = protocol.decode(raw)
    except Exception:  # noqa: BLE001 - an unreadable answer is no answer
        return None
    return answer


def auto_start_allowed(home: str) -> bool:
    """``serve.auto_start``: the environment, else the home's config.toml, else on."""
    raw = os.environ.get(AUTO_START_ENV, "").strip()
    if not raw:
        path = os.path.join(home, "config.toml")
        if not os.path.exists(path):
            return True
        try:
            import tomllib

            with open(path, "rb") as fh:
                section = tomllib.load(fh)
            raw = str(section.get(AUTO_START_KEY[0], {}).get(AUTO_START_KEY[1], "1"))
        except (OSError, ValueError, AttributeError):
            return True  # the command itself reports a broken config; starting a daemon is best effort
    return raw.lower() not in ("0", "false", "no", "off")


def start(home: str, db: str | None) -> bool:
    """Start a daemon for ``home`` in the background (detached, socket only, idle exit), at most once
    per ``SPAWN_BACKOFF``. Returns whether one was started. Never raises: it is only an accelerator."""
    if not enabled() or not os.path.isdir(home) or not auto_start_allowed(home):
        return False
    # The daemon runs in the home, so a relative home (``--home h``, ``CAIRN_HOME=h``) would name h/h there.
    home = os.path.abspath(home)
    mark = os.path.join(home, SPAWN_MARK)
    import time

    try:
        if time.time() - os.stat(mark).st_mtime < SPAWN_BACKOFF:
            return False
    except OSError:
        pass
    try:
        fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.close(fd)
        os.utime(mark)
        log = os.open(os.path.join(home, LOG_NAME), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        return False
    import subprocess

    cmd = [sys.executable, "-m", "cairn.cli.main", "--home", home]
    if db:
        cmd += ["--db", db]
    cmd += ["serve", "--auto"]
    # The daemon acts for whoever forwards a command; nothing of this caller's identity stays in its own env.
    env = {k: v for k, v in os.environ.items() if k not in ("CAIRN_TOKEN", "CAIRN_SESSION", "CAIRN_ACTOR")}
    env = threads.daemon_env(env)  # the daemon's numpy keeps its default thread pool
    try:
        subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=home,
            start_new_session=True, close_fds=True,
        )  # fmt: skip
    except OSError:
        return False
    finally:
        os.close(log)
    return True
