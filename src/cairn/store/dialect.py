"""Every piece of dialect-specific SQL lives here, so the rest of the code is one SQL layer.

Migrations and the store call these helpers with the dialect name; nothing else branches on the
database (``store/search_index.py`` holds the search indexes' SQL for both, ``store/engine.py`` the
connection and transaction settings).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, literal_column
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

# ``.limit(ONE_ROW)``: LIMIT 1 written into the statement, not bound. SQLite's planner reads a bound
# LIMIT, so it re-prepares the statement every time the value is bound again (every execution, ~12 µs
# here, more than the look-up itself); a constant limit has no reason to be a parameter on either
# database.
ONE_ROW = literal_column("1")

# Tables the database itself refuses to UPDATE. The audit log also refuses DELETE; versions may be
# deleted only by purge (hard erasure), never edited.
APPEND_ONLY = {"audit_log": ("UPDATE", "DELETE"), "lesson_versions": ("UPDATE",)}


def guard_triggers(dialect: str) -> list[str]:
    """DDL for triggers that make history tables append-only in the database, not by convention."""
    stmts: list[str] = []
    if dialect == "sqlite":
        for table, ops in APPEND_ONLY.items():
            for op in ops:
                stmts.append(
                    f"CREATE TRIGGER IF NOT EXISTS {table}_no_{op.lower()} BEFORE {op} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{table} is append-only: {op} refused'); END"
                )
    elif dialect == "postgresql":
        stmts.append(
            "CREATE OR REPLACE FUNCTION cairn_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ "
            # No "%" placeholders: the DDL must pass unchanged through any driver's paramstyle.
            "BEGIN RAISE EXCEPTION USING MESSAGE = TG_TABLE_NAME || ' is append-only: ' || TG_OP || ' refused'; END $$"
        )
        for table, ops in APPEND_ONLY.items():
            stmts.append(
                f"CREATE TRIGGER {table}_append_only BEFORE {' OR '.join(ops)} ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION cairn_refuse_change()"
            )
            if "DELETE" in ops:
                # TRUNCATE removes rows without firing row triggers: refused wherever DELETE is.
                stmts.append(
                    f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                    "FOR EACH STATEMENT EXECUTE FUNCTION cairn_refuse_change()"
                )
    else:  # pragma: no cover - guarded by engine.open_store
        raise ValueError(f"unsupported dialect {dialect}")
    return stmts


def drop_guard_triggers(dialect: str) -> list[str]:
    if dialect == "sqlite":
        return [f"DROP TRIGGER IF EXISTS {table}_no_{op.lower()}" for table, ops in APPEND_ONLY.items() for op in ops]
    return (
        [f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}" for table in APPEND_ONLY]
        + [
            f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}"
            for table, ops in APPEND_ONLY.items()
            if "DELETE" in ops
        ]
        + ["DROP FUNCTION IF EXISTS cairn_refuse_change()"]
    )


# Cairn's transaction-level advisory locks on Postgres are two-key locks in this namespace (an
# arbitrary constant: "cairn" in ASCII, truncated to int4), so they never collide with another
# application's locks in a shared database. Key 0 is the schema (migrations); a tenant's writers lock
# hashtext(tenant_id) (a collision between two tenants only makes them queue together).
ADVISORY_NAMESPACE = 0x6361_6972

# Postgres SQLSTATEs that mean "another transaction got in the way; run the whole thing again":
# serialization_failure, deadlock_detected, lock_not_available.
_PG_RETRY_STATES = {"40001", "40P01", "55P03"}


def is_lock_error(exc: BaseException) -> bool:
    """A transient contention error worth retrying the whole transaction for."""
    orig = getattr(exc, "orig", None)
    state = getattr(orig, "sqlstate", None)
    if state is not None:  # psycopg: decide by the SQLSTATE, not by message text
        if state in _PG_RETRY_STATES:
            return True
        # unique_violation on the audit chain's (tenant, seq): a writer that did not hold the
        # tenant lock raced for the same link; the retry reads the new chain head.
        diag = getattr(orig, "diag", None)
        return state == "23505" and getattr(diag, "constraint_name", None) == "uq_audit_tenant_seq"
    text = str(exc).lower()
    return (
        "database is locked" in text
        or "database table is locked" in text
        or "could not serialize" in text
        or "deadlock detected" in text
        or "uq_audit_tenant_seq" in text
    )


# read_only_sql_transaction: a hot standby, or a session that default_transaction_read_only pins.
_PG_READ_ONLY_STATE = "25006"


def is_read_only_error(exc: BaseException) -> bool:
    """The database refused a write because it is read-only here (a file on a read-only mount, a file
    the process may read but not write, a Postgres standby): a setup problem, not a bug."""
    state = getattr(getattr(exc, "orig", None), "sqlstate", None)
    if state is not None:
        return state == _PG_READ_ONLY_STATE
    text = str(exc).lower()
    return "attempt to write a readonly database" in text  # SQLITE_READONLY


class epoch_seconds(FunctionElement[float]):  # noqa: N801 - reads as a SQL function at the call site
    """A timestamp column as seconds since 1970 (float), computed in the database.

    The context ranking index loads two timestamps for every eligible lesson; converting them in
    SQL is much cheaper than the driver's datetime parsing of every row.
    """

    type = Float()
    inherit_cache = True
    name = "epoch_seconds"


@compiles(epoch_seconds, "sqlite")
def _epoch_sqlite(element: epoch_seconds, compiler: Any, **kw: Any) -> str:
    # Stored as 'YYYY-MM-DD HH:MM:SS.ffffff' in UTC; julianday() reads that form exactly.
    return f"((julianday({compiler.process(element.clauses, **kw)}) - 2440587.5) * 86400.0)"


@compiles(epoch_seconds, "postgresql")
def _epoch_postgres(element: epoch_seconds, compiler: Any, **kw: Any) -> str:
    return f"extract(epoch from {compiler.process(element.clauses, **kw)})::float8"
