"""Shared fixtures. ``store_url`` is the seam where the Postgres backend joins the contract suite.

Every test that takes ``store_url`` (or ``store``, ``svc``, ``me``) runs twice, as ``[sqlite]`` and
``[postgres]``: one contract, both databases. Each run gets a fresh, migrated, empty database: a copy
of one migrated SQLite file, or on Postgres a database cloned from one migrated template
(``CREATE DATABASE … TEMPLATE``: ~30 ms, where running the migrations takes ~0.3 s). One throwaway
Postgres server (``tests/pg_server.py``) serves the whole session; when it cannot start, the
Postgres runs skip with the reason (``CAIRN_REQUIRE_ALL_TESTS=1``, set by ``.ci/run``, makes that a
failure).
"""

from __future__ import annotations

import itertools
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest

from cairn.core.principal import Principal
from cairn.runtime import clock
from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store, sqlite_url
from tests.pg_server import PgServer, postgres_or_skip

ROOT = Path(__file__).resolve().parents[1]
# No test starts a daemon on demand unless it asks to (tests/daemon/test_forward.py): a command run by
# a test that finds no daemon would otherwise leave one behind per test home. Every run_cli and
# subprocess environment copies this from os.environ.
os.environ["CAIRN_SERVE_AUTO_START"] = "0"

# Property tests without hypothesis' 200 ms deadline per example: on a shared, loaded machine one
# example can take longer, and a timing threshold in a unit test fails for the machine, not the code.
hypothesis.settings.register_profile("cairn", deadline=None)
hypothesis.settings.load_profile("cairn")
# The suite's in-process services read the clock every Cairn process installs (CAIRN_FAKE_NOW pins it).
clock.install()
BACKENDS = ("sqlite", "postgres")
PG_TEMPLATE = "cairn_migrated"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with a ``slow`` test first, then the files with the most tests; each file's tests stay
    together and in order.

    ``make test`` hands whole files to its workers in this order (``--dist loadfile
    --no-loadscope-reorder``). xdist's own order, most tests first, put the slowest files (one long
    test each: the kill -9 loop, the concurrency races, the fuzzing, the README) last, where one
    worker ran them alone while the other had finished.
    """
    by_file: dict[Path, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.path, []).append(item)

    def order(path: Path) -> tuple[bool, int]:
        tests = by_file[path]
        return (not any(t.get_closest_marker("slow") for t in tests), -len(tests))

    items[:] = [item for path in sorted(by_file, key=order) for item in by_file[path]]


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store migrated to HEAD per run; each test gets a copy (running alembic costs ~0.5 s)."""
    home = tmp_path_factory.mktemp("template")
    s = Store(sqlite_url(home))
    s.ensure_schema()
    s.dispose()  # closing the last connection checkpoints the WAL into cairn.db
    assert not (home / "cairn.db-wal").exists() or (home / "cairn.db-wal").stat().st_size == 0
    return home / "cairn.db"


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    base = _memory_dir() or tmp_path_factory.mktemp("pg")
    try:
        server = postgres_or_skip(base)
        yield server
        server.stop()
    finally:
        if base.parent == SHM:
            shutil.rmtree(base, ignore_errors=True)


SHM = Path("/dev/shm")


def _memory_dir() -> Path | None:
    """A directory in memory for the throwaway server's files, when the machine has one to spare.

    Every Postgres test creates a database (~300 files) and drops it. On this machine's disk that
    took 0.15-0.5 s a database under load, against ~16 ms in tmpfs; the server runs with fsync off
    and is deleted at the end, so nothing is lost by keeping it in memory.
    """
    import tempfile

    try:
        if SHM.is_dir() and shutil.disk_usage(SHM).free > 2 * 1024**3:
            return Path(tempfile.mkdtemp(prefix="cairn-pg-", dir=SHM))
    except OSError:
        pass
    return None


class PgDatabases:
    """Fresh databases on the session's server, each a clone of one migrated template."""

    def __init__(self, server: PgServer) -> None:
        import psycopg

        self.server = server
        self._names = itertools.count(1)
        self._admin = psycopg.connect(
            host=str(server.socket_dir), port=server.port, user="postgres", dbname="postgres", autocommit=True
        )
        server.create_database(PG_TEMPLATE)
        template = Store(server.url_for(PG_TEMPLATE))
        template.upgrade()  # Postgres is migrated on purpose, by the owner (`cairn db upgrade`)
        template.dispose()  # a template must have no connections while it is copied
        # Dropping waits for the test's server processes to exit (Postgres polls every 100 ms), so
        # it happens on a thread of its own, behind the next tests.
        self._drops: queue.Queue[str | None] = queue.Queue()
        self._dropper = threading.Thread(target=self._drop_loop, name="pg-drop", daemon=True)
        self._dropper.start()

    def new(self) -> tuple[str, str]:
        """(name, URL) of a fresh migrated database owned by the application role."""
        name = f"cairn_t{next(self._names)}"
        # FILE_COPY: the template is tiny, and copying its files beats WAL-logging every block.
        self._admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{PG_TEMPLATE}" OWNER cairn STRATEGY FILE_COPY')
        return name, self.server.url_for(name)

    def drop(self, name: str) -> None:
        self._drops.put(name)

    def _drop_loop(self) -> None:
        import psycopg

        with psycopg.connect(
            host=str(self.server.socket_dir), port=self.server.port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            while (name := self._drops.get()) is not None:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        self._drops.put(None)
        self._dropper.join(timeout=60)
        self._admin.close()


@pytest.fixture(scope="session")
def pg_databases(pg_server: PgServer) -> Iterator[PgDatabases]:
    dbs = PgDatabases(pg_server)
    yield dbs
    dbs.close()


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The database the contract runs on (module scope, so module-wide stores follow it too)."""
    return request.param


def new_store_url(request: pytest.FixtureRequest, backend: str, directory: Path) -> str:
    """A fresh, migrated, empty store of ``backend``, removed when ``request``'s scope ends.

    Postgres starts only when a test asks for it, so a run of SQLite tests alone never waits on it.
    """
    if backend == "sqlite":
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), directory / "cairn.db")
        return sqlite_url(directory)
    dbs: PgDatabases = request.getfixturevalue("pg_databases")
    name, url = dbs.new()
    request.addfinalizer(lambda: dbs.drop(name))
    return url


def is_postgres(url_or_store: str | Store) -> bool:
    url = url_or_store.url if isinstance(url_or_store, Store) else url_or_store
    return url.startswith("postgresql")


@pytest.fixture
def store_url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    return new_store_url(request, backend, tmp_path)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store(store_url)
    s.ensure_schema()
    yield s
    s.dispose()


@pytest.fixture
def svc(store: Store) -> Cairn:
    return Cairn(store, Settings())


@pytest.fixture
def me(svc: Cairn) -> Principal:
    """The local single-user principal (an agent, no session)."""
    p = local_principal()
    svc.ensure_tenant(p)
    return p


def session(p: Principal, name: str) -> Principal:
    return Principal(p.tenant_id, p.actor, name, p.permissions, p.scope_patterns, p.human)


def human(p: Principal) -> Principal:
    return Principal(p.tenant_id, p.actor, p.session, p.permissions, p.scope_patterns, True)


@pytest.fixture
def cairn_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


def _cli_cwd(home: Path) -> Path:
    # Not the repository the suite runs from: context/recall read the cwd's git checkout.
    return next(p for p in (home, *home.parents) if p.is_dir())


def run_cli(home: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None):
    """Run the real ``cairn`` entry point in this process (``tests/inprocess.py``), as a user would.

    ``CAIRN_SESSION`` is unset unless ``env`` sets it. Commands that must be a process of their own
    (the script, the daemon's forwarding, kill -9, concurrent writers) use ``run_cli_process``.
    """
    from tests import inprocess

    return inprocess.run(
        args, env={"CAIRN_HOME": str(home), "CAIRN_SESSION": None, **(env or {})}, cwd=_cli_cwd(home), input=stdin
    )


def run_cli_process(home: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None):
    """Run the real ``cairn`` entry point in a subprocess, as a user would."""
    full_env = {**os.environ, "CAIRN_HOME": str(home), **(env or {})}
    full_env.pop("CAIRN_SESSION", None) if env is None or "CAIRN_SESSION" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        cwd=_cli_cwd(home),
        timeout=120,
    )


# The session's shared servers (one per database) for the API, MCP and dashboard tests.
from tests.servers import server_postgres, server_sqlite  # noqa: E402, F401
