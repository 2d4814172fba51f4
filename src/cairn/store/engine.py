"""Opening a store: the engine, its connection settings, the schema check and transactions.

SQLite runs through ``pysqlite3`` (a current SQLite with FTS5 and loadable extensions; the stdlib
module here cannot load sqlite-vec). Connections use WAL so readers never block the writer, a long
busy timeout, and write transactions start with ``BEGIN IMMEDIATE`` so two writers queue on the
lock instead of deadlocking on an upgrade from a read lock (the classic source of "database is
locked" under concurrency).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.errors import CairnError
from cairn.store.dialect import is_lock_error
from cairn.store.migrations import HEAD

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

BUSY_TIMEOUT_MS = 30_000
MAX_LOCK_RETRIES = 8


def sqlite_url(home: Path) -> str:
    return f"sqlite:///{home / 'cairn.db'}"


class Store:
    """One database behind the store contract; the service is its only caller."""

    def __init__(self, url: str) -> None:
        from sqlalchemy import create_engine, event

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
                connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
            )

            @event.listens_for(engine, "connect")
            def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
                # Transactions are ours to begin (see _on_begin), not the driver's.
                dbapi_conn.isolation_level = None
                cur = dbapi_conn.cursor()
                cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                cur.execute("PRAGMA journal_mode = WAL")
                cur.execute("PRAGMA synchronous = NORMAL")
                cur.execute("PRAGMA foreign_keys = ON")
                cur.execute("PRAGMA secure_delete = ON")  # purge is hard erasure: zero freed content
                cur.close()
                # sqlite-vec backs the vector index; every connection may touch it (writes drop
                # vectors of lessons that leave the active set), so every connection loads it.
                import sqlite_vec

                dbapi_conn.enable_load_extension(True)
                sqlite_vec.load(dbapi_conn)
                dbapi_conn.enable_load_extension(False)

            @event.listens_for(engine, "begin")
            def _on_begin(conn: Connection) -> None:
                mode = "IMMEDIATE" if conn.info.get("cairn_write") else "DEFERRED"
                conn.exec_driver_sql(f"BEGIN {mode}")

        else:
            raise CairnError(
                "SETUP",
                f"unsupported database URL {_redact(url)!r}; this build supports sqlite:///PATH",
            )
        self.engine: Engine = engine
        self.dialect = engine.dialect.name
        self._checked = False
        self._schema_lock = threading.Lock()

    # -- schema ---------------------------------------------------------------------------
    def ensure_schema(self) -> None:
        """Upgrade to HEAD when needed; one cheap query when the schema is current."""
        if self._checked:
            return
        with self._schema_lock:  # one migrating thread per process (the daemon opens several at start)
            if not self._checked:
                self._check_schema()

    def _check_schema(self) -> None:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            try:
                current = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            except Exception:  # noqa: BLE001 - no table yet means a fresh store
                current = None
            conn.rollback()
        if current != HEAD:
            self.upgrade()
        self._checked = True

    def upgrade(self) -> None:
        from alembic import command
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
        with self.engine.connect() as conn:
            conn.info["cairn_write"] = True
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            conn.commit()

    # -- transactions ---------------------------------------------------------------------
    @contextmanager
    def connect(self, write: bool) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back on any exception."""
        self.ensure_schema()
        with self.engine.connect() as conn:
            conn.info["cairn_write"] = write
            with conn.begin():
                yield conn

    def run(self, fn, *, write: bool):  # type: ignore[no-untyped-def]
        """Run ``fn(conn)`` in one transaction, retrying the whole of it on lock contention.

        Retrying the transaction (not the statement) is what keeps concurrent recurrence counts
        exact: a retried attempt re-reads the row it increments.
        """
        from sqlalchemy.exc import IntegrityError, OperationalError

        delay = 0.02
        for attempt in range(MAX_LOCK_RETRIES + 1):
            try:
                with self.connect(write) as conn:
                    return fn(conn)
            except (OperationalError, IntegrityError) as exc:
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


def _redact(url: str) -> str:
    """Never echo a password from a database URL."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url
