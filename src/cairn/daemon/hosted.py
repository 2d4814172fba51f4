"""Run a forwarded ``cairn`` command line inside the daemon, as the caller's process would have run it.

The client (``cairn.runtime.forward``) sends argv, its environment, working directory and umask,
and its own stdin/stdout/stderr descriptors. Here the command runs through the same entry point
(``cairn.cli.main.main``) with those swapped in: ``sys.stdin``/``stdout``/``stderr`` are opened on
the caller's descriptors the way its interpreter opened them (encoding, errors, line buffering),
``os.environ`` is the caller's, the working directory and umask are the caller's. So TTY checks,
relative paths, ``CAIRN_TOKEN``/``CAIRN_SESSION``/``CAIRN_ACTOR`` and the output are the caller's;
what the daemon adds is only its warm imports and its open store (``cairn.runtime.local.open_service``
hands forwarded commands the daemon's service, see ``serve_warm``).

Stopping the caller stops the command, as it would stop it in the caller's own process: a caller
interrupted (Ctrl-C) or gone closes its end of the socket, and the command's thread gets the same
``KeyboardInterrupt`` (raised in it asynchronously, only while the command runs), so an import stops
where it is, its current transaction rolled back and what is left queued, and prints what it prints
when interrupted.

Environment, working directory and umask belong to the whole process, so forwarded commands run
one at a time; a command that finds another running is told "busy" at once and runs in its own
process instead (a long import never makes a quick ``cairn read`` wait). The daemon's own threads
(socket ops, HTTP, sweeps) do not read the working directory, and their log goes to the stream
captured when the daemon started, never to a caller's stderr.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import socket
import sys
import threading
from typing import Any

from cairn.daemon import protocol
from cairn.errors import CairnError

BUSY_WAIT = 0.05  # seconds a forwarded command waits for the one before it, then runs in its caller


class CliHost:
    def __init__(self) -> None:
        from cairn.cli import main

        main.IN_DAEMON = True
        self.lock = threading.Lock()
        # What this daemon serves, by the environment that names it (see protocol.IDENTITY_ENV).
        self.identity = {k: os.environ.get(k, "").strip() for k in protocol.IDENTITY_ENV}
        self.running = 0
        self._armed: int | None = None  # the thread running a command, while it may be interrupted
        self._arm_lock = threading.Lock()

    def acceptable(self, params: dict[str, Any]) -> str | None:
        """Why this daemon must not run the command (None: it may)."""
        env = params.get("env")
        argv = params.get("argv")
        if not isinstance(env, dict) or not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return "a forwarded command has argv (strings) and env (an object)"
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            return "a forwarded environment maps names to strings"
        if not isinstance(params.get("cwd"), str) or not isinstance(params.get("umask"), int):
            return "a forwarded command has cwd and umask"
        if any((env.get(k) or "").strip() != v for k, v in self.identity.items()):
            return "other"
        from cairn import __version__

        if params.get("version") != __version__:  # a daemon left running across an upgrade
            return "other"
        from cairn.cli.main import split_globals

        if split_globals(list(argv))[0].verb in protocol.LOCAL_VERBS:
            return "other"
        return None

    def run(
        self, params: dict[str, Any], fds: list[int], started: Any, caller: socket.socket | None = None
    ) -> int | None:
        """Run the command on the caller's descriptors; None when busy (the caller runs it itself).

        ``started()`` is called once the command is certain to run here, before it does anything.
        ``caller`` is the caller's connection: when it closes, the command is interrupted.
        """
        if not self.lock.acquire(timeout=BUSY_WAIT):
            return None
        try:
            started()
            done = threading.Event()
            if caller is not None:
                watch = threading.Thread(target=self._watch, args=(caller, done), daemon=True)
                watch.start()
            try:
                return self._run(params, fds)
            except Exception as exc:  # noqa: BLE001 - the daemon outlives a command it could not set up
                with contextlib.suppress(OSError):
                    os.write(fds[-1], f"cairn: INTERNAL: unexpected {type(exc).__name__} in the daemon\n".encode())
                return 2
            finally:
                done.set()
        finally:
            self.lock.release()

    def _watch(self, caller: socket.socket, done: threading.Event) -> None:
        """Interrupt the command when its caller closes the connection (Ctrl-C, or the caller died)."""
        while not done.is_set():
            try:
                readable, _, _ = select.select([caller], [], [], 0.2)
                if not readable:
                    continue
                hung_up = not caller.recv(1, socket.MSG_PEEK)
            except (OSError, ValueError):
                hung_up = True
            if hung_up:
                self._interrupt()
            return  # a caller sends nothing more; anything else is ignored

    def _interrupt(self) -> None:
        with self._arm_lock:
            if self._armed is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(self._armed), ctypes.py_object(KeyboardInterrupt)
                )

    def _arm(self, armed: bool) -> None:
        """While armed, ``_interrupt`` may raise in this thread; disarming also drops a pending raise."""
        with self._arm_lock:
            if armed:
                self._armed = threading.get_ident()
            elif self._armed is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._armed), None)
                self._armed = None

    def _run(self, params: dict[str, Any], fds: list[int]) -> int:
        specs = list(params.get("streams") or [])
        if len(fds) == 2:  # the caller had no stdin
            fds, specs = [-1, *fds], [None, *specs[-2:]]
        saved_env = dict(os.environ)
        saved_cwd = os.getcwd()
        saved_io = (sys.stdin, sys.stdout, sys.stderr)
        saved_umask = os.umask(params["umask"] & 0o777)
        self.running += 1
        code = 2
        try:
            os.environ.clear()
            os.environ.update(params["env"])
            with contextlib.suppress(OSError):  # the caller's directory went away: the command still runs
                os.chdir(params["cwd"])
            sys.stdin = _open(fds[0], "r", specs[0]) if fds[0] >= 0 else None  # type: ignore[assignment]
            sys.stdout = _open(fds[1], "w", specs[1])
            sys.stderr = _open(fds[2], "w", specs[2])
            self._arm(True)
            code = _main(params["argv"])
        except KeyboardInterrupt:  # the caller went away between the command's end and the disarm
            code = 130
        finally:
            while True:  # an interrupt that lands here is dropped; nothing below may be cut short
                try:
                    self._arm(False)
                    break
                except KeyboardInterrupt:
                    continue
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            sys.stdin, sys.stdout, sys.stderr = saved_io
            os.environ.clear()
            os.environ.update(saved_env)
            with contextlib.suppress(OSError):
                os.chdir(saved_cwd)
            os.umask(saved_umask)
            self.running -= 1
        return code


def _main(argv: list[str]) -> int:
    from cairn.cli.main import main

    try:
        return main(argv)
    except SystemExit as exc:  # a command that exits itself (typer's completion, a library's sys.exit)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BrokenPipeError:  # the caller closed its end (``cairn list | head -1``)
        return 1
    except Exception as exc:  # noqa: BLE001 - main maps every error; this guards the daemon itself
        with contextlib.suppress(Exception):
            sys.stderr.write(f"cairn: INTERNAL: unexpected {type(exc).__name__} in the daemon\n")
        return 2


def _open(fd: int, mode: str, spec: dict[str, Any] | None) -> Any:
    """A text stream on the caller's descriptor, opened as its interpreter opened that stream."""
    spec = spec or {}
    encoding = spec.get("encoding") or "utf-8"
    errors = spec.get("errors") or "strict"
    try:
        "".encode(encoding, errors)
    except LookupError:
        encoding, errors = "utf-8", "strict"
    return open(  # noqa: SIM115 - lives for one command; the descriptor is closed by the caller of run
        fd,
        mode,
        encoding=encoding,
        errors=errors,
        closefd=False,
        buffering=1 if spec.get("line_buffering") else -1,  # 1: line-buffered text, as on a terminal
    )


def refusal(message: str) -> dict[str, Any]:
    exc = CairnError("INVALID_INPUT", message)
    return {"ok": False, "error": {"code": exc.code, "message": exc.message, "data": None}}
