"""The embedding drain: every queued active lesson gets exactly one vector of its current text, written
in batches, on both databases; a lesson changed, archived or erased while its batch was embedded never
gets a vector of the old text; the model runs one batch ahead of the writes without changing that; a
drain killed with SIGKILL loses no vector it wrote and leaves the rest queued; a search embeds only a
slice and says how many wait.

``hash-test-64`` stands in for MiniLM (fast and deterministic); the drain and the databases are real.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
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
    """The test model, which runs ``during`` (another writer's work) inside its first ``embed`` call, or
    the first whose texts contain ``among``."""

    def __init__(self, during: Callable[[], None] | None = None, among: str | None = None) -> None:
        self.during = during
        self.among = among
        self.texts: list[str] = []
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        self.texts += list(texts)
        self.calls.append(list(texts))
        if self.during is not None and (self.among is None or self.among in texts):
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


def assert_every_vector_current(svc: Cairn, keys: set[str]) -> None:
    """Exactly ``keys`` hold a vector, one each (float vector, signature, one index row), of their current text."""
    held = stored(svc)
    assert sorted(held) == sorted(keys)
    for key, row in held.items():
        assert row["fresh"] and row["index_rows"] == 1, key
        np.testing.assert_allclose(row["vector"], expected(svc, key), atol=1e-6)
        assert row["bits"] == E.signature(row["vector"])


def test_a_lesson_edited_while_a_later_batch_is_embedded(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model embeds batch 2 while batch 1 is written: an edit of a lesson in either batch, made then,
    ends with the new text's vector whichever of the two commits first; a lesson forgotten then gets none."""
    monkeypatch.setattr(embedding_service, "DRAIN_BATCH", 3)
    load(svc, LESSONS)  # keys in id order: wal, oom, utc | squash, docker, retry | alembic
    new_wal = "WAL mode lets readers go on while one writer commits; turn it on before the first import."
    new_docker = "Build images for linux/amd64 explicitly; an ARM laptop otherwise ships the wrong architecture."
    old_docker = embedding_service.embed_text({"key": "docker", "value": LESSONS["docker"]})

    def another_writer() -> None:  # runs inside the model's run on batch 2 (worker thread)
        svc.write(ME, "global", "wal", new_wal)
        svc.write(ME, "global", "docker", new_docker)
        svc.forget(ME, "global", "retry", reason="wrong advice")

    model = RacingEmbedder(another_writer, among=old_docker)
    use_model(monkeypatch, model)
    svc.drain_embeddings(ME)
    assert queue(svc) == []
    assert_every_vector_current(svc, set(LESSONS) - {"retry"})
    assert model.texts[-1] in {
        embedding_service.embed_text({"key": k, "value": v}) for k, v in (("wal", new_wal), ("docker", new_docker))
    }
    old = E.HashEmbedder().embed([old_docker])[0]
    assert float(stored(svc)["docker"]["vector"] @ old) < 0.99


def test_identical_texts_in_a_batch_are_embedded_once(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    model = RacingEmbedder()
    use_model(monkeypatch, model)
    load(svc, {"wal": LESSONS["wal"], "utc": LESSONS["utc"]}, scope="project::a")
    load(svc, {"wal": LESSONS["wal"]}, scope="project::b")
    assert svc.drain_embeddings(ME) == 3
    assert len(model.texts) == 2  # the two "wal" lessons share one text
    vectors = {
        scope: E.blob_to_vector(v)
        for scope, v in sql(
            svc,
            "SELECT l.scope, e.vector FROM lesson_embeddings e JOIN lessons l ON l.id = e.lesson_id "
            "WHERE l.key = 'wal'",
        )
    }
    assert sorted(vectors) == ["project::a", "project::b"]
    np.testing.assert_allclose(vectors["project::a"], vectors["project::b"])
    np.testing.assert_allclose(vectors["project::a"], expected_text(LESSONS["wal"], "wal"), atol=1e-6)


def expected_text(value: str, key: str) -> np.ndarray:
    return E.HashEmbedder().embed([embedding_service.embed_text({"key": key, "value": value})])[0]


def test_a_slice_embeds_at_most_its_limit(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding_service, "DRAIN_BATCH", 2)
    load(svc, LESSONS)
    assert svc.drain_embeddings(ME, limit=3) == 3
    assert len(queue(svc)) == len(LESSONS) - 3
    assert svc.pending_embeddings(ME) == len(LESSONS) - 3
    assert svc.drain_embeddings(ME) == len(LESSONS) - 3
    assert_every_vector_current(svc, set(LESSONS))
    assert svc.pending_embeddings(ME) == 0


class SlowEmbedder(E.HashEmbedder):
    """The test model, held inside each run until ``go`` is set (to keep a drain running)."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.running = threading.Event()

    def embed(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        self.running.set()
        assert self.go.wait(30)
        return super().embed(texts, batch_size)


def test_a_second_drain_of_the_process_follows_the_first(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    """While one drain runs (the daemon's background round), a search's slice does not start another,
    and an import's drain follows it to the end instead of embedding the same batches again, also from
    another service object on the same store (a command forwarded with another repository's settings)."""
    monkeypatch.setattr(embedding_service, "DRAIN_BATCH", 2)
    monkeypatch.setattr(embedding_service, "FOLLOW_EVERY", 0.05)
    monkeypatch.setattr(embedding_service, "SEARCH_SLICE", len(LESSONS) - 1)  # a queue longer than a slice
    model = SlowEmbedder()
    use_model(monkeypatch, model)
    load(svc, LESSONS)
    first: list[int] = []
    background = threading.Thread(target=lambda: first.append(svc.drain_embeddings(ME)))
    background.start()
    try:
        assert model.running.wait(30)
        other = svc.with_settings(svc.settings)
        assert other.drain_slice(ME) == 0
        seen: list[tuple[int, int]] = []
        follower: list[int] = []
        importer = threading.Thread(
            target=lambda: follower.append(other.drain_embeddings(ME, progress=lambda d, t: seen.append((d, t))))
        )
        importer.start()
        time.sleep(0.2)
        model.go.set()
        importer.join(30)
    finally:
        model.go.set()
        background.join(30)
    assert first == [len(LESSONS)]
    assert follower == [len(LESSONS)]  # what left the queue while it followed
    assert seen[-1] == (len(LESSONS), len(LESSONS))
    assert queue(svc) == []
    assert_every_vector_current(svc, set(LESSONS))


def test_a_slice_waits_for_the_running_drain_when_the_queue_fits_in_it(
    svc: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few lessons just written, the daemon's background round already embedding them: a recall's
    slice waits for that round instead of answering without them (a recall through the daemon found
    nothing where the same recall in a process found the lesson), and embeds nothing a second time."""
    monkeypatch.setattr(embedding_service, "DRAIN_BATCH", 2)
    model = SlowEmbedder()
    runs: list[int] = []
    original = model.embed
    model.embed = lambda texts, batch_size=16: (runs.append(len(texts)), original(texts, batch_size))[1]  # type: ignore[method-assign]
    use_model(monkeypatch, model)
    load(svc, LESSONS)
    assert len(LESSONS) <= embedding_service.SEARCH_SLICE
    background = threading.Thread(target=svc.drain_embeddings, args=(ME,))
    background.start()
    try:
        assert model.running.wait(30)
        release = threading.Timer(0.3, model.go.set)
        release.start()
        other = svc.with_settings(svc.settings)
        other.drain_slice(ME)
        # The slice returned only once the round had written every vector.
        assert queue(svc) == []
        assert_every_vector_current(svc, set(LESSONS))
    finally:
        model.go.set()
        background.join(30)
    assert sum(runs) == len(LESSONS)  # each lesson embedded once


def test_a_search_embeds_a_slice_and_answers_from_what_is_embedded(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    """No read waits for the queue: a search embeds at most a slice, finds the rest by its words, and
    says how many still wait; recall says so too."""
    monkeypatch.setattr(embedding_service, "SEARCH_SLICE", 2)
    model = RacingEmbedder()
    use_model(monkeypatch, model)
    load(svc, LESSONS)
    found = svc.search(ME, "alembic autogenerate server defaults")
    assert found["pending_embeddings"] == len(LESSONS) - 2
    assert "alembic" in [h["key"] for h in found["results"]]  # queued, found by its words
    assert len(model.texts) == 2 + 1  # the slice and the query
    assert svc.recall(ME, "exit code 137 out of memory")["pending_embeddings"] == len(LESSONS) - 4
    svc.drain_embeddings(ME)
    assert svc.search(ME, "readers blocked by a writer", mode="vector")["pending_embeddings"] == 0


_KILLED_DRAIN = """
import sys, time
from cairn.core.principal import LOCAL_TENANT, Principal
from cairn.search import embed as E
from cairn.service import embeddings
from cairn.service.api import Cairn
from cairn.store.engine import Store

class Slow(E.HashEmbedder):
    def embed(self, texts, batch_size=16):
        time.sleep(0.15)
        return super().embed(texts, batch_size)

E._instances[E.HASH_MODEL_NAME] = Slow()
embeddings.DRAIN_BATCH = 4
svc = Cairn(Store(sys.argv[1]))
svc.drain_embeddings(Principal(LOCAL_TENANT, "tester"))
print("finished")
"""


def test_a_drain_killed_midway_keeps_what_it_wrote_and_the_rest_queued(svc: Cairn) -> None:
    records = [{"scope": "global", "key": f"lesson-{i}", "value": f"Lesson {i}: {v}"} for i, v in
               enumerate(list(LESSONS.values()) * 8)]  # fmt: skip
    load(svc, records)
    everything = {r["key"] for r in records}
    env = {**os.environ, E.ENV_MODEL: E.HASH_MODEL_NAME}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_DRAIN, svc.store.url], env=env, stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while (
            sql(svc, "SELECT count(*) FROM lesson_embeddings")[0][0] < 8
            and time.monotonic() < deadline
            and proc.poll() is None
        ):
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, "the drain finished before it was killed: nothing was tested"
    held = stored(svc)
    waiting = {sql(svc, "SELECT key FROM lessons WHERE id = :i", i=i)[0][0] for i in queue(svc)}
    assert 8 <= len(held) < len(everything)
    assert set(held) | waiting == everything and not set(held) & waiting  # each lesson: a vector or queued
    assert_every_vector_current(svc, set(held))
    assert svc.drain_embeddings(ME) == len(waiting)
    assert queue(svc) == []
    assert_every_vector_current(svc, everything)


def test_an_import_is_embedded_while_it_writes(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    """``drain_alongside``: the model starts on the import's first committed batch, before the import
    ends, and leaving the block leaves every imported lesson with its vector and nothing queued."""
    import cairn.service.transfer as transfer

    monkeypatch.setattr(transfer, "BATCH", 2)
    monkeypatch.setattr(embedding_service, "DRAIN_BATCH", 2)
    monkeypatch.setattr(embedding_service, "FOLLOW_EVERY", 0.01)
    model = SlowEmbedder()
    model.go.set()
    use_model(monkeypatch, model)
    writes: list[int] = []

    def written(done: int, total: int) -> None:  # the import's progress, after each committed batch
        writes.append(done)
        if done == total:  # the import's last batch waits until the model has run beside it
            assert model.running.wait(10), "nothing was embedded while the import wrote"

    seen: list[tuple[int, int]] = []
    with svc.drain_alongside(ME, progress=lambda d, t: seen.append((d, t))) as drained:
        load_with_progress(svc, LESSONS, written)
    assert writes == [2, 4, 6, 7]
    assert drained["embedded"] == len(LESSONS)
    assert seen[-1] == (len(LESSONS), len(LESSONS))
    assert queue(svc) == []
    assert_every_vector_current(svc, set(LESSONS))


def test_an_import_that_fails_stops_its_drain_and_keeps_the_queue(svc: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in the import ends the drain beside it after the batches already in hand: those are
    written whole, the rest stays queued, and no drain thread is left running."""
    monkeypatch.setattr(embedding_service, "DRAIN_BATCH", 2)
    monkeypatch.setattr(embedding_service, "FOLLOW_EVERY", 0.01)
    model = SlowEmbedder()  # held: the drain is inside the model when the import fails
    use_model(monkeypatch, model)
    release = threading.Timer(0.3, model.go.set)  # the batch in the model finishes after the interrupt
    with pytest.raises(KeyboardInterrupt), svc.drain_alongside(ME):
        load(svc, LESSONS)
        assert model.running.wait(10)
        release.start()
        raise KeyboardInterrupt
    # The interrupt passed on only once the drain had finished its batch: no thread is left in the model
    # (a process exiting with one there aborts in onnxruntime).
    assert not [t for t in threading.enumerate() if t.name == "cairn-drain"]
    held = set(stored(svc))
    waiting = {sql(svc, "SELECT key FROM lessons WHERE id = :i", i=i)[0][0] for i in queue(svc)}
    assert 2 <= len(held) <= 4  # the batch in the model, and the one read ahead of it
    assert held | waiting == set(LESSONS) and not held & waiting
    assert_every_vector_current(svc, held)


def load_with_progress(svc: Cairn, lessons: dict[str, str], progress: Callable[[int, int], None]) -> None:
    import json

    records = [json.dumps({"scope": "global", "key": k, "value": v}) for k, v in lessons.items()]
    assert not svc.import_lines(ME, records, progress=progress)["refused"]
