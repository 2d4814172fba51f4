"""Helpers for the service and store contract suites (not fixtures: plain functions).

``snapshot`` reads every row of every table straight from the database, so "a refusal changed
nothing" is checked against the store itself, not against what the service chooses to show.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import inspect, text

from cairn.errors import CairnError
from cairn.store.engine import Store


def at(iso: str) -> datetime:
    """An aware UTC datetime from a short ISO string."""
    parsed = datetime.fromisoformat(iso)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def tables(store: Store) -> list[str]:
    return sorted(inspect(store.engine).get_table_names())


_SUPER: dict[str, Any] = {}


@contextmanager
def raw(store: Store, write: bool = False) -> Iterator[Any]:
    """A connection that sees every row, for checking what the store holds (not how it is served).

    On Postgres requests run as the application role under row-level security, which shows a
    connection without a tenant nothing; inspection runs as the test server's superuser instead
    (superusers bypass row security; the guard triggers still fire for them). On SQLite it is an
    ordinary transaction. One transaction, committed when ``write`` and the block succeed.
    """
    if store.dialect == "sqlite":
        with store.connect(write=write, tenant="local" if write else None) as conn:
            yield conn
        return
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    engine = _SUPER.get(store.url)
    if engine is None:
        from sqlalchemy.pool import NullPool

        engine = _SUPER[store.url] = create_engine(
            make_url(store.url).set(username="postgres", password=None), poolclass=NullPool
        )
    with engine.begin() as conn:
        yield conn


def counts(store: Store) -> dict[str, int]:
    """Row count of every table in the database (including ones this suite does not know)."""
    with raw(store) as conn:
        return {t: conn.execute(text(f'SELECT COUNT(*) FROM "{t}"')).scalar_one() for t in tables(store)}


def snapshot(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, sorted: equal snapshots mean nothing at all changed."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with raw(store) as conn:
        for t in tables(store):
            rows = conn.execute(text(f'SELECT * FROM "{t}"')).all()
            out[t] = sorted((tuple(r) for r in rows), key=repr)
    return out


def rows(store: Store, sql: str, **params: Any) -> list[dict[str, Any]]:
    with raw(store) as conn:
        return [dict(r) for r in conn.execute(text(sql), params).mappings()]


def audit_rows(store: Store, tenant: str = "local") -> list[dict[str, Any]]:
    return rows(store, "SELECT * FROM audit_log WHERE tenant_id = :t ORDER BY seq", t=tenant)


def refused(code: str, fn: Any, *args: Any, **kwargs: Any) -> CairnError:
    """Call ``fn`` and assert it raises a CairnError with ``code``; return the error."""
    with pytest.raises(CairnError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, f"expected {code}, got {info.value.code}: {info.value.message}"
    return info.value


def export_records(lines: Any) -> list[dict[str, Any]]:
    """Parsed export lines, with the header's ``exported_at`` (the only volatile field) dropped."""
    import json

    out = []
    for line in lines:
        obj = json.loads(line)
        if obj.get("type") == "header":
            obj.pop("exported_at", None)
        out.append(obj)
    return out
