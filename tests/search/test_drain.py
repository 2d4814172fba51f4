"""The embedding drain: every queued active lesson gets exactly one vector of its current text, written
in batches, on both databases; a lesson changed, archived or erased while its batch was embedded never
gets a vector of the old text.

``hash-test-64`` stands in for MiniLM (fast and deterministic); the drain and the databases are real.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cairn.search import embed as E
from cairn.service import embeddings as embedding_service
from cairn.service.api import Cairn
from cairn.store import search_index as ix
from tests.search.util import ME, default_env, lesson_id, load, open_service, sql

LESSONS = {
    "wal": "SQLite needs WAL journal mode so readers keep working while a writer holds the lock.",
    "oom": "Workers that die with exit code 137 ran out of memory; raise the container memory limit.",
    "utc": "Store timestamps in UTC and convert to local time only when displaying them.",
    "squash": "Use squash merges on release branches so the changelog stays one entry per feature.",
    "docker": "Docker images built on ARM laptops need --platform linux/amd64 for the x86 hosts.",
    "retry": "Retry 429 responses with exponential backoff and jitter.",
    "alembic": "Alembic autogenerate misses server defaults; review every migration by hand.",
}
TABLE = ix.vec_table(E.HASH_MODEL_NAME, E.HASH_DIM)


class RacingEmbedder(E.HashEmbedder):
    """The test model, which runs ``during`` (another writer's work) inside its first ``embed`` call."""

    def __init__(self, during: Callable[[], None] | None = None) -> None:
        self.during = during
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        self.texts += list(texts)
        if self.during is not None:
            during, self.during = self.during, None
            during()
        return super().embed(texts, batch_size)


@pytest.fixture
def svc(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[Cairn]:
    with default_env() as mp:
        mp.setenv(E.ENV_MODEL, E.HASH_MODEL_NAME)
        s = open_service(request, backend, tmp_path / "store")
        s.drain_embeddings(ME)  # records the model before anything is queued
        yield s
        s.store.dispose()


def use_model(monkeypatch: pytest.MonkeyPatch, model: E.Embedder) -> None:
    """Make ``model`` the process's embedder for the hash model's name (what ``get_embedder`` returns)."""
    monkeypatch.setitem(E._instances, E.HASH_MODEL_NAME, model)


def stored(svc: Cairn) -> dict[str, dict[str, Any]]:
    """key -> what the store holds for its vector: the float vector, its content hash, its signature,
    and how many vector-index rows it has."""
    out: dict[str, dict[str, Any]] = {}
    for key, vector, chash, current in sql(
        svc,
        "SELECT l.key, e.vector, e.content_hash, l.content_hash FROM lesson_embeddings e "
        "JOIN lessons l ON l.id = e.lesson_id",
    ):
        assert key not in out, f"{key} has two float vectors"
        out[key] = {"vector": E.blob_to_vector(vector), "fresh": chash == current}
    for key, bits in sql(svc, "SELECT l.key, s.bits FROM lesson_signatures s JOIN lessons l ON l.id = s.lesson_id"):
        out.setdefault(key, {})["bits"] = bytes(bits)
    for key, n in sql(
        svc, f"SELECT l.key, count(*) FROM {TABLE} v JOIN lessons l ON l.id = v.lesson_id GROUP BY l.key"
    ):
        out.setdefault(key, {})["index_rows"] = n
    return out


def expected(svc: Cairn, key: str) -> np.ndarray:
    value = sql(svc, "SELECT value FROM lessons WHERE key = :k", k=key)[0][0]
    return E.HashEmbedder().embed([embedding_service.embed_text({"key": key, "value": value})])[0]


def queue(svc: Cairn) -> list[int]:
    return sorted(r[0] for r in sql(svc, "SELECT lesson_id FROM embed_queue"))


def generation(svc: Cairn) -> int:
    return sql(svc, "SELECT generation FROM embed_state")[0][0]


def test_every_lesson_gets_one_vector_of_its_text_batch_by_batch(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding_service, "DRAIN_BATCH", 3)  # 7 lessons: batches of 3, 3 and 1
    load(svc, LESSONS)
    before = generation(svc)
    seen: list[tuple[int, int]] = []
    assert svc.drain_embeddings(ME, progress=lambda done, total: seen.append((done, total))) == len(LESSONS)
    assert seen == [(3, 7), (6, 7), (7, 7)]
    assert generation(svc) == before + 3  # one bump per batch that wrote vectors
    assert queue(svc) == []
    held = stored(svc)
    assert sorted(held) == sorted(LESSONS)
    for key, row in held.items():
        np.testing.assert_allclose(row["vector"], expected(svc, key), atol=1e-6)
        assert row["fresh"] and row["index_rows"] == 1
        assert row["bits"] == E.signature(row["vector"])
    # Nothing queued: nothing to do, and no write.
    assert svc.drain_embeddings(ME) == 0
    assert generation(svc) == before + 3


def test_a_redrain_replaces_the_vector_and_leaves_one_row(svc: Cairn) -> None:
    load(svc, LESSONS)
    svc.drain_embeddings(ME)
    old = stored(svc)["wal"]["vector"]
    svc.write(ME, "global", "wal", "Turn on WAL so that readers never block behind the nightly import job.")
    assert queue(svc) == [lesson_id(svc, "global", "wal")]
    assert svc.drain_embeddings(ME) == 1
    row = stored(svc)["wal"]
    assert row["index_rows"] == 1 and row["fresh"]
    np.testing.assert_allclose(row["vector"], expected(svc, "wal"), atol=1e-6)
    assert not np.allclose(row["vector"], old)
    assert row["bits"] == E.signature(row["vector"])
    assert len(sql(svc, f"SELECT lesson_id FROM {TABLE}")) == len(LESSONS)


def test_lessons_changed_archived_or_erased_during_the_batch(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    load(svc, LESSONS)
    old_oom = embedding_service.embed_text({"key": "oom", "value": LESSONS["oom"]})
    new_oom = "Exit code 137 means the kernel OOM killer ended the worker; give the pod more memory."

    def another_writer() -> None:  # runs while the drain's batch is being embedded
        svc.write(ME, "global", "oom", new_oom)
        svc.archive(ME, "global", "utc")
        svc.forget(ME, "global", "squash", reason="wrong advice")

    model = RacingEmbedder(another_writer)
    use_model(monkeypatch, model)
    # The changed lesson is re-queued and embedded again in the same drain, from its new text.
    assert svc.drain_embeddings(ME) == len(LESSONS) - 2
    assert queue(svc) == []
    assert model.texts.count(old_oom) == 1
    assert model.texts[-1] == embedding_service.embed_text({"key": "oom", "value": new_oom})
    held = stored(svc)
    assert sorted(held) == sorted(set(LESSONS) - {"utc", "squash"})  # no vector for the archived or erased
    assert held["oom"]["fresh"] and held["oom"]["index_rows"] == 1
    np.testing.assert_allclose(held["oom"]["vector"], expected(svc, "oom"), atol=1e-6)
    # The old text's vector was never stored: nothing in the index is nearest to it but other lessons.
    old_vec = E.HashEmbedder().embed([old_oom])[0]
    assert float(held["oom"]["vector"] @ old_vec) < 0.99
