"""Opening a store: the engine, its connection settings, the schema check and transactions.

Two databases sit behind this one class; everything above it (the service) runs the same SQL
layer on both.

**SQLite** runs through ``pysqlite3`` (a current SQLite with FTS5 and loadable extensions; the
stdlib module here cannot load sqlite-vec). Connections use WAL so readers never block the writer,
a long busy timeout, and write transactions start with ``BEGIN IMMEDIATE`` so two writers queue on
the lock instead of deadlocking on an upgrade from a read lock (the classic source of "database is
locked" under concurrency).

**Postgres** (15+, with pgvector) runs through psycopg 3. Writers are not serialized by the
database as a whole, so a write transaction names its tenant and starts by taking a
transaction-level advisory lock on it (``pg_advisory_xact_lock``): the tenant's writers queue
there, and everything a write reads and increments (recurrence counts, the audit chain's next
``seq``, the tombstone check) is read *after* the lock, under READ COMMITTED, so it sees every
earlier writer's commit — the same guarantee ``BEGIN IMMEDIATE`` gives on SQLite, per tenant
instead of per file. Read transactions run REPEATABLE READ, READ ONLY: one snapshot for the whole
transaction, as a SQLite read transaction has (a read that mixed two snapshots could count a lesson
it then cannot find), and a read path that tried to write fails loudly on both databases.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from cairn.errors import CairnError
from cairn.store.dialect import ADVISORY_NAMESPACE, is_lock_error, is_read_only_error
from cairn.store.migrations import HEAD
from cairn.store.rls import APP_ROLE

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

BUSY_TIMEOUT_MS = 30_000
MAX_LOCK_RETRIES = 8
WAL_CHECKPOINT_PAGES = 4000
STATEMENT_CACHE = 1024
PG_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
# Lock 0 of the namespace is the schema's (migrations); tenants hash into the rest.
_SCHEMA_LOCK = f"SELECT pg_advisory_xact_lock({ADVISORY_NAMESPACE}, 0)"
_TENANT_LOCK_EXPR = f"pg_advisory_xact_lock({ADVISORY_NAMESPACE}, hashtext(%(tenant)s))"
_VARS = ("tenant", "user", "actor", "token", "invite", "webhook")
_SET_CALLER = f"SELECT set_config('role', '{APP_ROLE}', true), " + ", ".join(
    f"set_config('cairn.{name}', %({name})s, true)" for name in _VARS
)
_READ_TX = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"


def sqlite_url(home: Path) -> str:
    return f"sqlite:///{home / 'cairn.db'}"


def normalize_url(url: str) -> str:
    """The URL this store opens: libpq forms become SQLAlchemy's psycopg URL; SQLite is kept.

    Accepted: ``postgresql://``, ``postgres://`` and ``postgresql+psycopg://`` with the usual libpq
    parts (``user:password@host:port/db``, ``?sslmode=…``, a socket directory as ``?host=/dir``
    or percent-encoded as the host, ``%2Frun%2Fpostgresql``), and ``sqlite:///PATH``.
    """
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise CairnError("SETUP", f"not a database URL: {_redact(url)!r}; use postgresql://… or sqlite:///PATH")
    scheme = scheme.lower()
    if scheme == "sqlite":
        return url
    if scheme not in PG_SCHEMES:
        raise CairnError(
            "SETUP",
            f"unsupported database URL {_redact(url)!r}; use postgresql://USER@HOST/DB "
            "(or postgres://, postgresql+psycopg://) or sqlite:///PATH",
        )
    # libpq reads a host that starts with an (encoded) slash as a socket directory; SQLAlchemy
    # would hand "%2Frun%2Fpostgresql" to libpq as a host name, so move it to ?host=.
    netloc, slash, tail = rest.partition("/")
    creds, at, hostport = netloc.rpartition("@")
    if hostport.lower().startswith("%2f"):
        host, _, port = hostport.partition(":")
        path, q, query = tail.partition("?")
        extra = f"host={host}" + (f"&port={port}" if port else "")
        tail = path + "?" + (extra + "&" + query if q and query else extra)
        netloc = creds + at
    return f"postgresql+psycopg://{netloc}{slash}{tail}"


def _sqlite_vec_path() -> str:
    """The sqlite-vec extension's file, found without importing the ``sqlite_vec`` package: its
    ``__init__`` imports numpy (for helpers we do not use), which a command that never touches a
    vector should not pay for. Same path as ``sqlite_vec.loadable_path()``."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.origin:
        raise CairnError("SETUP", "the sqlite-vec package is not installed (run: make setup)")
    return os.path.join(os.path.dirname(spec.origin), "vec0")


class Store:
    """One database behind the store contract; the service is its only caller."""

    def __init__(self, url: str) -> None:
        from sqlalchemy import create_engine, event

        url = normalize_url(url)
        self.url = url
        if url.startswith("sqlite"):
            import pysqlite3.dbapi2 as sqlite_dbapi

            engine = create_engine(
                url,
                module=sqlite_dbapi,
                # Pooled: opening a connection runs the pragmas and loads sqlite-vec, and closing
                # one checkpoints the WAL; per transaction that tripled the cost of a write.
                pool_size=4,
                max_overflow=4,
                # The driver's statement cache keeps the most *used* statements and, once full,
                # evicts the newest one first: a process whose connection had seen more distinct
                # statements than it holds (a migration, a day of varied reads) re-parsed every
                # statement of every later write. Room for every statement Cairn issues keeps the
                # hot ones prepared (a prepared statement is a few KB).
                connect_args={
                    "timeout": BUSY_TIMEOUT_MS / 1000,
                    "check_same_thread": False,
                    "cached_statements": STATEMENT_CACHE,
                },
            )

            @event.listens_for(engine, "connect")
            def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
                # Transactions are ours to begin (see _on_begin), not the driver's.
                dbapi_conn.isolation_level = None
                cur = dbapi_conn.cursor()
                cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                cur.execute("PRAGMA journal_mode = WAL")
                cur.execute("PRAGMA synchronous = NORMAL")
                # Checkpoint every ~16 MB of log instead of SQLite's ~4 MB: a write touches a few
                # dozen pages, mostly the same index pages as the writes before it, so a longer log
                # copies each page once for more commits and fsyncs a quarter as often. Durability
                # is the same (a commit is in the log either way).
                cur.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
                cur.execute("PRAGMA foreign_keys = ON")
                cur.execute("PRAGMA secure_delete = ON")  # purge is hard erasure: zero freed content
                cur.close()
                # sqlite-vec backs the vector index; every connection may touch it (writes drop
                # vectors of lessons that leave the active set), so every connection loads it.
                dbapi_conn.enable_load_extension(True)
                dbapi_conn.load_extension(_sqlite_vec_path())
                dbapi_conn.enable_load_extension(False)

            @event.listens_for(engine, "begin")
            def _on_begin(conn: Connection) -> None:
                mode = "IMMEDIATE" if conn.info.get("cairn_write") else "DEFERRED"
                conn.exec_driver_sql(f"BEGIN {mode}")

        else:
            try:
                import psycopg  # noqa: F401 - fail here with a clear message, not deep in SQLAlchemy
            except ImportError as exc:  # pragma: no cover - a dependency of the package
                raise CairnError("SETUP", "the Postgres driver is missing: pip install 'psycopg[binary]'") from exc
            from sqlalchemy.engine import make_url

            connect_args: dict[str, object] = {"application_name": "cairn", "connect_timeout": 10}
            if "options" not in make_url(url).query:
                # A writer waits for its tenant's lock at most as long as SQLite's busy timeout;
                # then the lock error (55P03) sends the transaction round Store.run's retry.
                connect_args["options"] = f"-c lock_timeout={BUSY_TIMEOUT_MS}"
            engine = create_engine(
                url,
                # A team server: a few connections per process (the daemon serves several clients),
                # checked before use so a server restart costs a reconnect, not an error.
                pool_size=5,
                max_overflow=10,
                pool_timeout=30,
                pool_pre_ping=True,
                pool_recycle=1800,
                connect_args=connect_args,
            )

            @event.listens_for(engine, "begin")
            def _on_begin_pg(conn: Connection) -> None:
                # psycopg has already opened the transaction implicitly; these are its first statements.
                info = conn.info
                if info.get("cairn_schema"):  # migrations and the schema check: the URL's own user
                    if info.get("cairn_write"):
                        conn.exec_driver_sql(_SCHEMA_LOCK)
                    return
                if not info.get("cairn_write"):
                    conn.exec_driver_sql(_READ_TX)
                # Every request runs as the application role with its caller set for this
                # transaction only (store/rls.py says why); a write also queues on its tenant.
                params = {name: value or "" for name, value in (info.get("cairn_vars") or {}).items()}
                for name in _VARS:
                    params.setdefault(name, "")
                sql = _SET_CALLER
                if info.get("cairn_write") and params["tenant"]:
                    sql += ", " + _TENANT_LOCK_EXPR
                conn.exec_driver_sql(sql, params)

        self.engine: Engine = engine
        self.dialect = engine.dialect.name
        self._checked = False
        self._schema_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Store({_redact(self.url)!r})"

    # -- schema ---------------------------------------------------------------------------
    def ensure_schema(self) -> None:
        """Upgrade to HEAD when needed; one cheap query when the schema is current."""
        if self._checked:
            return
        with self._schema_lock:  # one migrating thread per process (the daemon opens several at start)
            if not self._checked:
                self._check_schema()

    def current_revision(self) -> str | None:
        """The schema's alembic revision, or None for an empty database."""
        from sqlalchemy import text

        with self._connection() as conn:
            conn.info["cairn_schema"] = True
            try:
                current = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            except Exception:  # noqa: BLE001 - no table yet means a fresh store
                current = None
            conn.rollback()
        return current

    def quick_check(self) -> list[str]:
        """What is wrong with the database file, as SQLite's ``PRAGMA quick_check`` says ([] = sound).

        On Postgres the server keeps its own files; reaching it with one query is the check.
        """
        from sqlalchemy import text

        with self._connection() as conn:
            conn.info["cairn_schema"] = True
            if self.dialect == "sqlite":
                rows = [str(r[0]) for r in conn.execute(text("PRAGMA quick_check"))]
            else:
                conn.execute(text("SELECT 1"))
                rows = ["ok"]
            conn.rollback()
        return [] if rows == ["ok"] else rows

    def security(self) -> dict[str, object] | None:
        """Postgres: the application role and row-level security coverage (None on SQLite)."""
        if self.dialect != "postgresql":
            return None
        from cairn.store import rls

        with self._connection() as conn:
            conn.info["cairn_schema"] = True
            out = rls.status(conn)
            conn.rollback()
        return out

    def _check_schema(self) -> None:
        current = self.current_revision()
        if current != HEAD:
            if self.dialect != "sqlite":
                # Requests run as the application role, which may not change the schema; the owner
                # migrates, once, on purpose. (SQLite is one user's file: it upgrades itself.)
                state = f"is at revision {current}" if current else "has no Cairn schema yet"
                raise CairnError(
                    "SETUP",
                    f"the database {_redact(self.url)} {state}; this Cairn needs {HEAD}. "
                    "Run `cairn db upgrade` with the database owner's credentials",
                )
            self.upgrade()
        self._checked = True

    def upgrade(self) -> tuple[str | None, str | None]:
        """Run the migrations up to HEAD; returns the revisions before and after.

        On Postgres the whole upgrade is one transaction (DDL is transactional there) under the
        schema's advisory lock, so two processes starting on an old schema migrate it once.
        """
        from alembic import command
        from alembic.config import Config
        from alembic.migration import MigrationContext

        cfg = Config()
        cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
        with self._connection() as conn:
            conn.info["cairn_write"] = True
            conn.info["cairn_schema"] = True
            with conn.begin():
                before = MigrationContext.configure(conn).get_current_revision()
                pg = self.dialect == "postgresql"
                if pg:
                    from cairn.store import rls

                    rls.unforce(conn)  # backfills see every tenant; secure() forces again below
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
                after = MigrationContext.configure(conn).get_current_revision()
                if pg:
                    from cairn.store import search_index as ix

                    # A model no tenant uses any more leaves an empty vector table: requests cannot
                    # see that (they see one tenant) nor drop tables, so the owner does it here.
                    for table in ix.vec_tables(conn):
                        if conn.exec_driver_sql(f'SELECT 1 FROM "{table}" LIMIT 1').first() is None:  # noqa: S608
                            conn.exec_driver_sql(f'DROP TABLE "{table}"')
                    rls.secure(conn, ix.vec_tables(conn), ADVISORY_NAMESPACE, ix.HNSW_MAX_DIM)
        if before != after:
            # The migrating connection's statement cache is full of one-off DDL: start afresh.
            self.engine.dispose()
        self._checked = True
        return before, after

    # -- transactions ---------------------------------------------------------------------
    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A pooled connection; a database that cannot be reached is a setup error, said once."""
        from sqlalchemy.exc import InterfaceError, OperationalError

        try:
            conn = self.engine.connect()
        except (OperationalError, InterfaceError) as exc:
            raise CairnError(
                "SETUP", f"cannot open the database {_redact(self.url)}: {_first_line(exc.orig or exc)}"
            ) from None
        # ``info`` belongs to the pooled DBAPI connection and outlives this checkout: start clean,
        # so a connection that last ran a migration or a write does not begin the next read as one.
        conn.info.update(cairn_write=False, cairn_vars=None, cairn_schema=False, cairn_erased=False)
        with conn:
            yield conn

    @contextmanager
    def connect(self, write: bool, tenant: str | None = None, **caller: str | None) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back on any exception.

        ``tenant`` names whose data the transaction reads or changes, and ``caller`` the rest of
        who is asking (``user``, ``actor``; ``token`` or ``invite``: the hash being presented). On
        Postgres these become the transaction's settings that row-level security reads, and a
        write's tenant is where its writers queue (see the module docstring). SQLite ignores them:
        there the tenant predicate every query carries is the boundary.
        """
        self.ensure_schema()
        with self._connection() as conn:
            conn.info["cairn_write"] = write
            conn.info["cairn_vars"] = {"tenant": tenant, **caller}
            try:
                tx = conn.begin()
            except Exception as exc:
                _raise_role_error(exc, self.url)
                raise
            with tx:
                yield conn
            if conn.info.get("cairn_erased") and self.engine.dialect.name == "sqlite":
                _truncate_log(conn)

    def run(self, fn, *, write: bool, tenant: str | None = None, **caller: str | None):  # type: ignore[no-untyped-def]
        """Run ``fn(conn)`` in one transaction, retrying the whole of it on lock contention.

        Retrying the transaction (not the statement) is what keeps concurrent recurrence counts
        exact: a retried attempt re-reads the row it increments.
        """
        from sqlalchemy.exc import IntegrityError, OperationalError

        if write and tenant is None:
            raise ValueError("a write transaction names its tenant (Store.run(..., tenant=...))")
        delay = 0.02
        for attempt in range(MAX_LOCK_RETRIES + 1):
            try:
                with self.connect(write, tenant, **caller) as conn:
                    return fn(conn)
            except (OperationalError, IntegrityError) as exc:
                if is_read_only_error(exc):
                    raise CairnError(
                        "SETUP",
                        f"the database {_redact(self.url)} is read-only here ({_first_line(exc.orig or exc)}); "
                        "reading works, changing it needs a writable file (or a primary server)",
                    ) from None
                if not is_lock_error(exc) or attempt == MAX_LOCK_RETRIES:
                    if is_lock_error(exc):
                        raise CairnError(
                            "CONFLICT", "the store stayed busy; retry the command", {"retryable": True}
                        ) from exc
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")  # pragma: no cover

    def dispose(self) -> None:
        self.engine.dispose()


def mark_erased(conn: Connection) -> None:
    """Say that this transaction hard-erased content, so that on SQLite its commit is followed by
    :func:`_truncate_log`. ``secure_delete`` zeroes the freed pages of the database file, but the
    write-ahead log still holds the frames written before the erasure until it is checkpointed and
    reset, which an open store (the daemon, a server) would leave for a long time."""
    conn.info["cairn_erased"] = True


def _truncate_log(conn: Connection) -> None:
    """Copy the log into the database file and truncate it to nothing (outside any transaction: the
    driver connection is in autocommit). Busy readers make it wait up to the busy timeout; a
    checkpoint that could not finish then is finished by the next erasure or the last close."""
    raw = conn.connection.dbapi_connection
    if raw is not None:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def set_caller(conn: Connection, **caller: str | None) -> None:
    """Change who the current transaction acts for, once the service has established it.

    Authentication reads the token row by its hash before the tenant is known; having found it,
    the same transaction names the tenant and account so row security shows their memberships.
    SQLite has no row security: nothing to set there.
    """
    if conn.dialect.name != "postgresql":
        return
    names = [n for n in caller if n in _VARS]
    sql = "SELECT " + ", ".join(f"set_config('cairn.{n}', %({n})s, true)" for n in names)
    conn.exec_driver_sql(sql, {n: caller[n] or "" for n in names})


def enter_tenant(conn: Connection, tenant: str) -> None:
    """Continue a write transaction in another tenant: its row-security setting and, on Postgres, its
    write lock (the lock the transaction would have taken had it begun there)."""
    if conn.dialect.name != "postgresql":
        return  # SQLite: BEGIN IMMEDIATE already holds the one write lock of the file
    conn.exec_driver_sql(
        f"SELECT set_config('cairn.tenant', %(tenant)s, true), {_TENANT_LOCK_EXPR}", {"tenant": tenant}
    )


def _raise_role_error(exc: BaseException, url: str) -> None:
    """Switching to the application role failed: the schema is older than the role, or the user may not."""
    state = getattr(getattr(exc, "orig", None), "sqlstate", None)
    if state in ("42704", "42501"):  # undefined_object (no such role), insufficient_privilege
        raise CairnError(
            "SETUP",
            f"cannot act as the application role {APP_ROLE} on {_redact(url)} ({_first_line(exc.orig or exc)}); "
            f"run `cairn db upgrade` as the database owner, or GRANT {APP_ROLE} TO this user",
        ) from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def redact_url(url: str) -> str:
    """A database URL fit for output and logs: the password, wherever it was given, is ***."""
    return _redact(url)


def _redact(url: str) -> str:
    """Never echo a password from a database URL (user:password@ or ?password=)."""
    import re

    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    netloc, slash, tail = rest.partition("/")
    if "@" in netloc:
        creds, host = netloc.rsplit("@", 1)
        user = unquote(creds.split(":", 1)[0])
        netloc = f"{user}:***@{host}" if ":" in creds else f"{user}@{host}"
    tail = re.sub(r"(?i)(password=)[^&]*", r"\1***", tail)
    return f"{scheme}://{netloc}{slash}{tail}"
