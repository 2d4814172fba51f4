"""The real ``cairn`` entry point, run inside the test's process: argv, environment, cwd and stdin in;
exit code, stdout and stderr out, as a ``subprocess.CompletedProcess`` like a subprocess run gives.

A subprocess per command costs its interpreter start and the imports of typer, SQLAlchemy and the
model (~1-2 s each on the loaded test machine); in process they load once per worker. The command
runs through ``cairn.cli.main.main`` — the function ``cairn`` calls, and the one the daemon calls
for a forwarded command — with the process state a command can see swapped in the way the daemon
swaps in a caller's (``cairn.daemon.hosted``), and put back afterwards:

* ``os.environ`` is the suite's plus the given variables (changed key by key, never cleared, so a
  server thread of the same test never sees an empty environment);
* the working directory, ``sys.stdin``/``sys.stdout``/``sys.stderr`` (UTF-8 text on byte buffers:
  not a terminal, no descriptor);
* no daemon: with no descriptor to hand over a command is never forwarded, and the suite turns the
  auto-start off (``tests/conftest.py``); ``cairn.cli.main.IN_DAEMON`` is false, as in a fresh
  process; no warm store from a daemon this process may have hosted;
* every store the command opened is closed when it returns, as the end of a process would.

What this cannot show — the ``cairn`` script itself, the daemon's forwarding, a process killed
mid-write, many processes writing at once — stays in subprocess tests (``run_cli_process``).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

_UNSET = object()
# The swapped state is the whole process's: two commands at once would see each other's. Concurrent
# commands are processes (run_cli_process); this refuses the mistake rather than mixing outputs.
_ONE_AT_A_TIME = threading.Lock()


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str | None] | None = None,
    cwd: str | Path | None = None,
    input: str | bytes | None = None,  # noqa: A002 - subprocess.run's name for it
    inherit_env: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``cairn ARGV`` in this process. ``env`` adds to the suite's environment (a value of None removes
    a variable); with ``inherit_env=False`` it is the whole environment, as ``subprocess.run(env=…)``."""
    if not inherit_env:
        env = {**{k: None for k in os.environ if k not in (env or {})}, **(env or {})}
    stdin = _stream(input.encode() if isinstance(input, str) else (input or b""))
    stdout, stderr = _stream(b""), _stream(b"")
    if not _ONE_AT_A_TIME.acquire(blocking=False):
        raise RuntimeError("an in-process cairn command is already running: run concurrent ones as processes")
    try:
        code = _run(argv, env, cwd, stdin, stdout, stderr)
    finally:
        _ONE_AT_A_TIME.release()
    return subprocess.CompletedProcess(["cairn", *argv], code, _text(stdout), _text(stderr))


def _run(argv: Sequence[str], env: Mapping[str, str | None] | None, cwd: str | Path | None, *streams: Any) -> int:
    with _environment(env or {}), _cwd(cwd), _streams(*streams), _fresh_process(), _closing_stores():
        return _main(list(argv))


def _main(argv: list[str]) -> int:
    """What the process's exit code would be, as ``cairn.cli.main.entry`` and the interpreter make it."""
    from cairn.cli.main import main

    try:
        return main(argv)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        sys.stderr.write(f"{exc.code}\n")
        return 1
    except BaseException:  # noqa: BLE001 - an uncaught error ends a real process with its traceback
        sys.stderr.write(traceback.format_exc())
        return 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()


def _stream(data: bytes) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="strict", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]


@contextlib.contextmanager
def _environment(changes: Mapping[str, str | None]) -> Iterator[None]:
    saved = {k: os.environ.get(k, _UNSET) for k in changes}
    try:
        _apply(changes)
        yield
    finally:
        _apply({k: None if v is _UNSET else v for k, v in saved.items()})  # type: ignore[misc]


def _apply(values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@contextlib.contextmanager
def _cwd(cwd: str | Path | None) -> Iterator[None]:
    saved = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(saved)


@contextlib.contextmanager
def _streams(stdin: Any, stdout: Any, stderr: Any) -> Iterator[None]:
    saved = (sys.stdin, sys.stdout, sys.stderr)
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def _fresh_process() -> Iterator[None]:
    """What a new interpreter would not carry: the daemon flag and the daemon's warm stores."""
    from cairn.cli import main

    local = _local()
    saved_flag, saved_warm = main.IN_DAEMON, dict(local._WARM)
    main.IN_DAEMON = False
    local._WARM.clear()
    try:
        yield
    finally:
        main.IN_DAEMON = saved_flag
        local._WARM.clear()
        local._WARM.update(saved_warm)


@contextlib.contextmanager
def _closing_stores() -> Iterator[None]:
    """Close every store the command opened through ``open_service`` once it returns."""
    local = _local()
    real = local.open_service
    opened: list[Any] = []

    def open_service(*args: Any, **kwargs: Any) -> Any:
        svc = real(*args, **kwargs)
        opened.append(svc)
        return svc

    local.open_service = open_service
    try:
        yield
    finally:
        local.open_service = real
        for svc in opened:
            with contextlib.suppress(Exception):
                svc.store.dispose()


def _local() -> Any:
    """The module that opens local stores (and holds the daemon's warm ones)."""
    from cairn.runtime import local

    return local
