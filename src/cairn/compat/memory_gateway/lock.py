"""The corpus lock: memory-gateway's ``.gateway/lock.d`` protocol, with waiting instead of refusing.

The peer's writers take ``<corpus>/.gateway/lock.d`` (an atomic ``mkdir``, holding ``pid`` and
``ts``); a holder whose pid is dead, or whose ``ts`` is older than 900 s, is reclaimed. A writer
that finds the lock held refuses with CONCURRENT_WRITER — 16 of 100 writes with four writers.

Cairn's writers first queue on a kernel lock (``flock`` on ``.gateway/writer.flock``): the kernel
hands it over as each writer finishes and frees it when a holder dies, so concurrent Cairn writers
wait their turn instead of refusing. Only the queue's head then takes ``lock.d``, which keeps the
peer (or any tool speaking its protocol) out. A ``lock.d`` held by someone else is waited for up to
the bound too; CONCURRENT_WRITER only when the bound passes (``MEMORY_GATEWAY_WAIT``, seconds).
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import time
from pathlib import Path

from cairn.compat.memory_gateway.envelope import GatewayError

STALE_SECS = 900
WAIT_ENV = "MEMORY_GATEWAY_WAIT"
DEFAULT_WAIT = 30.0


def wait_bound() -> float:
    raw = os.environ.get(WAIT_ENV, "").strip()
    if not raw:
        return DEFAULT_WAIT
    try:
        value = float(raw)
    except ValueError:
        raise GatewayError("USAGE", f"{WAIT_ENV} must be a number of seconds, got {raw!r}") from None
    if not 0 <= value <= 3600:
        raise GatewayError("USAGE", f"{WAIT_ENV} must be between 0 and 3600 seconds, got {raw!r}")
    return value


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Timeout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    except OverflowError:
        return False
    return True


class CorpusLock:
    """Held for the span of one mutation (and of a recovery)."""

    def __init__(self, state_dir: Path) -> None:
        self.state = state_dir
        self.dir = state_dir / "lock.d"
        self.fd: int | None = None
        self.held = False

    def acquire(self, bound: float | None = None) -> None:
        bound = wait_bound() if bound is None else bound
        deadline = time.monotonic() + bound
        try:
            self.state.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.state / "writer.flock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise GatewayError("IO_ERROR", f"cannot open the corpus lock in {self.state}: {exc.strerror}") from None
        self._flock(bound)
        while True:
            try:
                os.mkdir(self.dir)
            except FileExistsError:
                if self._reclaimable():
                    self._reclaim()
                    continue
                if time.monotonic() >= deadline:
                    self.release()
                    raise GatewayError(
                        "CONCURRENT_WRITER",
                        f"the corpus is locked by another writer ({self.dir}); waited {bound:g} s "
                        f"(set {WAIT_ENV} to wait longer)",
                    ) from None
                time.sleep(0.05)
                continue
            except OSError as exc:
                self.release()
                raise GatewayError("IO_ERROR", f"cannot create {self.dir}: {exc.strerror}") from None
            break
        try:
            (self.dir / "pid").write_text(f"{os.getpid()}\n")
            (self.dir / "ts").write_text(f"{int(time.time())}\n")
        except OSError as exc:
            self.release()
            raise GatewayError("IO_ERROR", f"cannot write the lock in {self.dir}: {exc.strerror}") from None
        self.held = True

    def _flock(self, bound: float) -> None:
        assert self.fd is not None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        if bound <= 0:
            self.release()
            raise GatewayError("CONCURRENT_WRITER", "the corpus is locked by another Cairn writer")
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, bound)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except _Timeout:
            self.release()
            raise GatewayError(
                "CONCURRENT_WRITER",
                f"another Cairn writer held the corpus for more than {bound:g} s (set {WAIT_ENV} to wait longer)",
            ) from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)

    def _reclaimable(self) -> bool:
        """A dead holder, or one older than the peer's staleness bound, gives the lock up."""
        try:
            pid = int((self.dir / "pid").read_text().strip() or "0")
        except (OSError, ValueError):
            pid = 0
        try:
            ts = int((self.dir / "ts").read_text().strip() or "0")
        except (OSError, ValueError):
            ts = None
        if pid > 0 and not _alive(pid):
            return True
        return ts is not None and time.time() - ts > STALE_SECS

    def _reclaim(self) -> None:
        """Rename-then-remove, so two reclaimers cannot both delete a lock just re-taken."""
        grave = self.state / f"lock.d.stale.{os.getpid()}.{time.monotonic_ns()}"
        try:
            os.rename(self.dir, grave)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
                raise GatewayError("IO_ERROR", f"cannot reclaim {self.dir}: {exc.strerror}") from None
            return
        shutil.rmtree(grave, ignore_errors=True)

    def release(self) -> None:
        if self.held:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.held = False
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None
