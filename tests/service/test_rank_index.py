"""The ranking index follows vectors the embedding drain writes (no audit row): every vector reaches
it, including one committed after a newer one (a drain that was slow to commit), in the process
that saw the newer one and in a fresh process that starts from the kept index.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from cairn.core.principal import Principal
from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store, sqlite_url
from cairn.store.schema import lessons

R = "repo::acme/api"
WHERE = {"repo": "acme/api", "branch": "main", "project": None}


@pytest.fixture(autouse=True)
def _test_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")
    monkeypatch.delenv("CAIRN_RANK_CACHE", raising=False)


@pytest.fixture
def processes(tmp_path: Path, migrated_sqlite: Path) -> Iterator[Any]:
    """``new()`` opens the store as a fresh process would (its own empty in-memory indexes)."""
    shutil.copyfile(migrated_sqlite, tmp_path / "cairn.db")
    opened: list[Store] = []

    def new() -> Cairn:
        s = Store(sqlite_url(tmp_path))
        s.ensure_schema()
        opened.append(s)
        return Cairn(s, Settings())

    yield new
    for s in opened:
        s.dispose()


def with_vectors(svc: Cairn, me: Principal) -> set[str]:
    """The keys whose vector the tenant's index holds, after the refresh a session start makes."""
    svc.context(me, **WHERE)
    idx = svc.caches.ranks.get(me.tenant_id)
    ids = {int(i) for i, has in zip(idx.arrays.ids, idx.arrays.has_vec, strict=True) if has}
    with svc.store.engine.connect() as conn:
        return {key for i, key in conn.execute(select(lessons.c.id, lessons.c.key)) if i in ids}


def embedded_at(svc: Cairn, me: Principal, clock: Any, key: str, text: str, when: str) -> set[str]:
    """Write a lesson, let the index learn of it (no vector yet), then drain its vector stamped ``when``."""
    svc.write(me, R, key, text)
    assert key not in with_vectors(svc, me)
    clock(when)
    assert svc.drain_embeddings(me) == 1
    return with_vectors(svc, me)


def test_a_vector_committed_after_a_newer_one_still_reaches_the_index(processes: Any, clock: Any) -> None:
    svc = processes()
    me = local_principal()
    svc.ensure_tenant(me)
    text = "Retry idempotent HTTP calls with jittered backoff"
    assert embedded_at(svc, me, clock, "first", text, "2025-01-01T00:00:00Z") == {"first"}
    text = "Put the lockfile hash in the cache key"
    assert embedded_at(svc, me, clock, "newer", text, "2025-01-01T00:00:05Z") == {"first", "newer"}
    # Stamped before "newer", committed after it: a drain that was slow to commit.
    text = "Cap outbound retries with a retry budget per client"
    assert embedded_at(svc, me, clock, "late", text, "2025-01-01T00:00:02Z") == {"first", "newer", "late"}

    fresh = processes()  # starts from the kept index and follows what was drained since
    assert with_vectors(fresh, me) == {"first", "newer", "late"}
    text = "Pin the base image digest in the Dockerfile"
    got = embedded_at(fresh, me, clock, "late-again", text, "2025-01-01T00:00:03Z")
    assert got == {"first", "newer", "late", "late-again"}
    assert with_vectors(processes(), me) == got


def test_a_store_embedded_long_before_its_index_was_built_still_follows_new_vectors(processes: Any, clock: Any) -> None:
    """The index (and the file it is kept in) is built ten minutes after the last vector: the look-back
    window is past, so later processes skip it, and still see each vector drained since."""
    svc = processes()
    me = local_principal()
    svc.ensure_tenant(me)
    svc.write(me, R, "old", "Retry idempotent HTTP calls with jittered backoff")
    assert svc.drain_embeddings(me) == 1
    clock("2025-01-01T00:10:00Z")
    assert with_vectors(processes(), me) == {"old"}  # the first index, kept beside the database
    text = "Put the lockfile hash in the cache key"
    fresh = processes()
    assert embedded_at(fresh, me, clock, "new", text, "2025-01-01T00:11:00Z") == {"old", "new"}
    assert with_vectors(processes(), me) == {"old", "new"}
