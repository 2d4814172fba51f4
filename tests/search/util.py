"""Helpers shared by the search tests (plain functions: no fixtures, no autouse)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from cairn.core.principal import LOCAL_TENANT, Principal
from cairn.search.embed import ENV_MODEL
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.contract import raw

MODES = ("fts", "vector", "hybrid")
ENV_CLEARED = (ENV_MODEL, "CAIRN_FAKE_NOW", "CAIRN_SESSION", "CAIRN_PROMOTION_THRESHOLD")

ME = Principal(LOCAL_TENANT, "tester")
HUMAN = Principal(LOCAL_TENANT, "reviewer", human=True)


@contextmanager
def default_env() -> Iterator[pytest.MonkeyPatch]:
    """The shipped configuration (MiniLM, real clock), for module-scoped fixtures too."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ENV_CLEARED:
            mp.delenv(name, raising=False)
        yield mp


def open_service(request: pytest.FixtureRequest, backend: str, home: Path) -> Cairn:
    """A service on a fresh store of ``backend`` (``home`` holds it on SQLite), with the tenant."""
    from tests.conftest import new_store_url

    store = Store(new_store_url(request, backend, home))
    store.ensure_schema()
    svc = Cairn(store)
    svc.ensure_tenant(ME)
    return svc


def load(svc: Cairn, lessons: dict[str, str] | list[dict[str, Any]], scope: str = "global") -> None:
    """Bulk-load plain records through import (the same path as `cairn import`)."""
    if isinstance(lessons, dict):
        records = [{"scope": scope, "key": k, "value": v} for k, v in lessons.items()]
    else:
        records = lessons
    result = svc.import_lines(ME, [json.dumps(r) for r in records])
    assert not result["refused"], result["refused"]


def keys(result: dict[str, Any]) -> list[str]:
    return [h["key"] for h in result["results"]]


def addrs(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(h["scope"], h["key"]) for h in result["results"]]


def recalled(result: dict[str, Any]) -> list[str]:
    return [h["key"] for h in result["lessons"]]


def sql(svc: Cairn, query: str, **params: Any) -> list[tuple[Any, ...]]:
    with raw(svc.store) as conn:
        return [tuple(r) for r in conn.execute(text(query), params)]


def lesson_id(svc: Cairn, scope: str, key: str, tenant: str = LOCAL_TENANT) -> int:
    rows = sql(svc, "SELECT id FROM lessons WHERE tenant_id = :t AND scope = :s AND key = :k", t=tenant, s=scope, k=key)
    assert len(rows) == 1, rows
    return rows[0][0]


def fts_text_count(conn: Any, needle: str) -> int:
    """How many full-text index entries still hold ``needle`` as text (purge must leave none).

    The one place the tests look inside the index per database: FTS5 keeps the columns' text,
    Postgres the ``tsvector`` (its lexemes, read as text).
    """
    pattern = f"%{needle}%"
    if conn.dialect.name == "postgresql":
        return conn.execute(text("SELECT count(*) FROM lesson_fts WHERE doc::text LIKE :p"), {"p": pattern}).scalar()
    return conn.execute(
        text("SELECT count(*) FROM lesson_fts WHERE key LIKE :p OR value LIKE :p OR tags LIKE :p"), {"p": pattern}
    ).scalar()
