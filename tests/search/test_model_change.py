"""A change of embedding model re-embeds every active lesson; vectors of two models never meet in one query.

``CAIRN_EMBED_MODEL=hash-test-64`` selects a tiny deterministic second model (64 dimensions).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from cairn.search.embed import DIM, ENV_MODEL, FLOAT_MODEL_NAME, HASH_DIM, HASH_MODEL_NAME, MODEL_NAME, HashEmbedder
from cairn.service.api import Cairn
from cairn.store import search_index as ix
from tests.contract import raw
from tests.search.util import ME, default_env, keys, load, open_service, sql

LESSONS = {
    "sqlite-wal": "SQLite needs WAL journal mode so readers keep working while a writer holds the lock.",
    "oom-killed": "Workers that die with exit code 137 ran out of memory; raise the container memory limit.",
    "timezone-utc": "Store timestamps in UTC and convert to local time only when displaying them.",
    "squash-release": "Use squash merges on release branches so the changelog stays one entry per feature.",
    "docker-platform": "Docker images built on ARM laptops need --platform linux/amd64 for the x86 hosts.",
    "retired": "This lesson is archived before any model change and must never be re-embedded.",
    "wrong": "This lesson is rejected before any model change and must never be re-embedded.",
}
ACTIVE = sorted(set(LESSONS) - {"retired", "wrong"})
MINILM_TABLE = ix.vec_table(MODEL_NAME, DIM)
HASH_TABLE = ix.vec_table(HASH_MODEL_NAME, HASH_DIM)


@pytest.fixture
def svc(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Cairn:
    with default_env():
        s = open_service(request, backend, tmp_path / "store")
        load(s, LESSONS)
        s.archive(ME, "global", "retired")
        s.reject(ME, "global", "wrong", reason="wrong")
        yield s
        s.store.dispose()


def embeddings(svc: Cairn) -> dict[str, tuple[str, int, bool]]:
    """key -> (model, dim, vector is of the current text)."""
    rows = sql(
        svc,
        "SELECT l.key, e.model, e.dim, e.content_hash = l.content_hash FROM lesson_embeddings e "
        "JOIN lessons l ON l.id = e.lesson_id",
    )
    out = {}
    for key, model, dim, fresh in rows:
        assert key not in out, f"{key} has vectors of two models at once"
        out[key] = (model, dim, bool(fresh))
    return out


def vec_keys(svc: Cairn, table: str) -> list[str]:
    return sorted(r[0] for r in sql(svc, f"SELECT l.key FROM {table} v JOIN lessons l ON l.id = v.lesson_id"))


def tables(svc: Cairn) -> list[str]:
    with raw(svc.store) as conn:
        return sorted(ix.vec_tables(conn))


def test_model_switch_reembeds_every_active_lesson_and_back(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    svc.search(ME, "database locking")
    assert embeddings(svc) == {k: (MODEL_NAME, DIM, True) for k in ACTIVE}
    assert vec_keys(svc, MINILM_TABLE) == ACTIVE

    monkeypatch.setenv(ENV_MODEL, HASH_MODEL_NAME)
    svc.search(ME, "database locking")
    assert embeddings(svc) == {k: (HASH_MODEL_NAME, HASH_DIM, True) for k in ACTIVE}
    assert vec_keys(svc, HASH_TABLE) == ACTIVE

    monkeypatch.delenv(ENV_MODEL)
    svc.search(ME, "database locking")
    assert embeddings(svc) == {k: (MODEL_NAME, DIM, True) for k in ACTIVE}
    assert vec_keys(svc, MINILM_TABLE) == ACTIVE


def test_a_store_of_float32_vectors_moves_to_the_integer_model(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    """The previous default (float32) is another vector space: the first search under the integer model
    re-embeds every active lesson into its own table, and what it finds is what float32 found."""
    monkeypatch.setenv(ENV_MODEL, FLOAT_MODEL_NAME)
    before = keys(svc.search(ME, "database locking", mode="vector", limit=3))
    assert embeddings(svc) == {k: (FLOAT_MODEL_NAME, DIM, True) for k in ACTIVE}
    monkeypatch.delenv(ENV_MODEL)
    after = keys(svc.search(ME, "database locking", mode="vector", limit=3))
    assert embeddings(svc) == {k: (MODEL_NAME, DIM, True) for k in ACTIVE}
    assert vec_keys(svc, MINILM_TABLE) == ACTIVE
    assert ix.vec_table(FLOAT_MODEL_NAME, DIM) != MINILM_TABLE
    assert after[0] == before[0] == "sqlite-wal"


def test_recall_also_follows_the_model(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    svc.drain_embeddings(ME)
    monkeypatch.setenv(ENV_MODEL, HASH_MODEL_NAME)
    svc.recall(ME, "sqlite3.OperationalError: database is locked")
    assert {m for m, _, _ in embeddings(svc).values()} == {HASH_MODEL_NAME}


def test_full_text_search_does_not_touch_embeddings(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    svc.drain_embeddings(ME)
    monkeypatch.setenv(ENV_MODEL, HASH_MODEL_NAME)
    assert keys(svc.search(ME, "sqlite", mode="fts")) == ["sqlite-wal"]
    assert {m for m, _, _ in embeddings(svc).values()} == {MODEL_NAME}


def test_lessons_written_or_edited_under_another_model_are_fresh_after_switching_back(
    svc: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc.drain_embeddings(ME)
    monkeypatch.setenv(ENV_MODEL, HASH_MODEL_NAME)
    svc.write(ME, "global", "sqlite-wal", "Rotate database credentials every ninety days via the vault CLI.")
    svc.write(ME, "global", "new-under-hash", "Pin the base image by digest so rebuilds are reproducible.")
    svc.search(ME, "anything")
    assert embeddings(svc)["new-under-hash"] == (HASH_MODEL_NAME, HASH_DIM, True)
    monkeypatch.delenv(ENV_MODEL)
    # The MiniLM vector made before the edit must not be reused for the edited text.
    found = svc.search(ME, "how often should secrets be changed", mode="vector", limit=1)
    assert keys(found) == ["sqlite-wal"]
    assert embeddings(svc) == {k: (MODEL_NAME, DIM, True) for k in [*ACTIVE, "new-under-hash"]}
    assert keys(svc.search(ME, "readers blocked while a writer holds the lock", mode="vector", limit=1)) != [
        "sqlite-wal"
    ]


def _tables_after_reindex(svc: Cairn) -> list[str]:
    """SQLite drops an unused model's table in the reindex; on Postgres a request sees one tenant's
    rows only and may not drop tables, so the owner's `cairn db upgrade` drops the empty ones."""
    if svc.store.dialect == "postgresql":
        svc.store.upgrade()
    return tables(svc)


def test_reindex_drops_the_old_models_table(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    svc.drain_embeddings(ME)
    monkeypatch.setenv(ENV_MODEL, HASH_MODEL_NAME)
    svc.search(ME, "x")
    assert tables(svc) == sorted([MINILM_TABLE, HASH_TABLE])  # a plain search re-embeds but keeps the table
    result = svc.reindex(ME)
    # The rejected lesson gets no lesson vector; its tombstone's vector (service/paraphrase.py) is rebuilt.
    assert result == {"indexed": len(ACTIVE), "embedded": len(ACTIVE), "tombstones_embedded": 1,
                      "model": HASH_MODEL_NAME, "dim": HASH_DIM}  # fmt: skip
    assert _tables_after_reindex(svc) == [HASH_TABLE]
    assert embeddings(svc) == {k: (HASH_MODEL_NAME, HASH_DIM, True) for k in ACTIVE}
    assert vec_keys(svc, HASH_TABLE) == ACTIVE
    monkeypatch.delenv(ENV_MODEL)
    svc.reindex(ME)
    assert _tables_after_reindex(svc) == [MINILM_TABLE]
    assert vec_keys(svc, MINILM_TABLE) == ACTIVE


def test_reindex_rebuilds_the_full_text_index(svc: Cairn) -> None:
    with raw(svc.store, write=True) as conn:
        conn.execute(text("DELETE FROM lesson_fts"))
    assert svc.search(ME, "sqlite", mode="fts")["results"] == []
    svc.reindex(ME)
    assert keys(svc.search(ME, "sqlite", mode="fts")) == ["sqlite-wal"]
    with raw(svc.store) as conn:
        indexed = set(ix.fts_ids(conn))
    assert sorted(key for i, key in sql(svc, "SELECT id, key FROM lessons") if i in indexed) == ACTIVE


def test_reindex_keeps_a_table_another_tenant_still_uses(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    from cairn.core.principal import Principal

    other = Principal("other", "someone")
    svc.ensure_tenant(other)
    svc.write(other, "global", "their-lesson", "Their own lesson about database locks.")
    svc.drain_embeddings(other)
    svc.drain_embeddings(ME)
    monkeypatch.setenv(ENV_MODEL, HASH_MODEL_NAME)
    svc.reindex(ME)
    assert tables(svc) == sorted([MINILM_TABLE, HASH_TABLE])
    monkeypatch.delenv(ENV_MODEL)
    assert keys(svc.search(other, "database locks", mode="vector")) == ["their-lesson"]


def test_vectors_of_two_models_never_meet_in_one_query(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the hash model every similarity the vector arm reports is a hash-model cosine, for every lesson."""
    svc.drain_embeddings(ME)  # MiniLM vectors exist (and stay in their own table)
    monkeypatch.setenv(ENV_MODEL, HASH_MODEL_NAME)
    query = "readers and writers lock the database"
    hits = svc.search(ME, query, mode="vector", limit=100)["results"]
    assert sorted(h["key"] for h in hits) == ACTIVE
    emb = HashEmbedder()
    q = emb.embed([query])[0]
    for h in hits:
        texts = [h["lesson"]["value"], f"{h['key'].replace('-', ' ')}. {h['lesson']['value']}"]
        sims = [float(np.dot(q, v)) for v in emb.embed(texts)]
        assert any(abs(h["similarity"] - s) < 1e-3 for s in sims), (h["key"], h["similarity"], sims)
    # And recall's relevance (computed for candidates outside the arm too) is a hash cosine as well.
    for h in svc.recall(ME, query, floor=-1.0, limit=20)["lessons"]:
        assert h["similarity"] is not None and -1.0 <= h["similarity"] <= 1.0
        texts = [h["lesson"]["value"], f"{h['key'].replace('-', ' ')}. {h['lesson']['value']}"]
        sims = [float(np.dot(q, v)) for v in emb.embed(texts)]
        assert any(abs(h["similarity"] - s) < 1e-3 for s in sims), (h["key"], h["similarity"], sims)


def test_unknown_model_is_a_setup_error_not_a_silent_fallback(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    from cairn.errors import CairnError

    monkeypatch.setenv(ENV_MODEL, "no-such-model")
    assert keys(svc.search(ME, "sqlite", mode="fts")) == ["sqlite-wal"]  # full text needs no model
    with pytest.raises(CairnError) as ei:
        svc.search(ME, "sqlite", mode="hybrid")
    assert ei.value.code == "SETUP"
