"""Every piece of dialect-specific SQL lives here, so the rest of the code is one SQL layer.

Migrations and the store call these helpers with the dialect name; nothing else branches on the
database. When Postgres arrives (issue 5) its half of each helper is the only new SQL.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

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
            "BEGIN RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP; END $$"
        )
        for table, ops in APPEND_ONLY.items():
            stmts.append(
                f"CREATE TRIGGER {table}_append_only BEFORE {' OR '.join(ops)} ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION cairn_refuse_change()"
            )
    else:  # pragma: no cover - guarded by engine.open_store
        raise ValueError(f"unsupported dialect {dialect}")
    return stmts


def drop_guard_triggers(dialect: str) -> list[str]:
    if dialect == "sqlite":
        return [f"DROP TRIGGER IF EXISTS {table}_no_{op.lower()}" for table, ops in APPEND_ONLY.items() for op in ops]
    return [f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}" for table in APPEND_ONLY] + [
        "DROP FUNCTION IF EXISTS cairn_refuse_change()"
    ]


def is_lock_error(exc: BaseException) -> bool:
    """A transient contention error worth retrying the whole transaction for."""
    text = str(exc).lower()
    return (
        "database is locked" in text
        or "database table is locked" in text
        or "could not serialize" in text
        or "deadlock detected" in text
        or "uq_audit_tenant_seq" in text
    )


class epoch_seconds(FunctionElement[float]):  # noqa: N801 - reads as a SQL function at the call site
    """A timestamp column as seconds since 1970 (float), computed in the database.

    The context ranking index loads two timestamps for every eligible lesson; converting them in
    SQL instead of through the driver's datetime parsing is ~10x faster at a million rows.
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
