"""Helpers for the service and store contract suites (not fixtures: plain functions).

``snapshot`` reads every row of every table straight from the database, so "a refusal changed
nothing" is checked against the store itself, not against what the service chooses to show.
"""

from __future__ import annotations

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


def counts(store: Store) -> dict[str, int]:
    """Row count of every table in the database (including ones this suite does not know)."""
    with store.connect(write=False) as conn:
        return {t: conn.execute(text(f'SELECT COUNT(*) FROM "{t}"')).scalar_one() for t in tables(store)}


def snapshot(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, sorted: equal snapshots mean nothing at all changed."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with store.connect(write=False) as conn:
        for t in tables(store):
            rows = conn.execute(text(f'SELECT * FROM "{t}"')).all()
            out[t] = sorted((tuple(r) for r in rows), key=repr)
    return out


def rows(store: Store, sql: str, **params: Any) -> list[dict[str, Any]]:
    with store.connect(write=False) as conn:
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
