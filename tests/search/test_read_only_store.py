"""A store this process cannot write (a file on a read-only mount, one its user may only read, a
Postgres standby) still answers every read, search and recall included, and refuses a write as
``SETUP`` with what is wrong, never as an unexpected error.

``hash-test-64`` stands in for MiniLM (fast and deterministic); the database is real SQLite, opened
read-only as a read-only mount would leave it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.errors import CairnError
from cairn.search import embed as E
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.search.util import ME, default_env, load, open_service

LESSONS = {
    "wal": "SQLite needs WAL journal mode so readers keep working while a writer holds the lock.",
    "alembic": "Alembic autogenerate misses server defaults; review every migration by hand.",
}


def test_a_read_only_store_answers_searches_and_refuses_writes_as_setup(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with default_env() as mp:
        mp.setenv(E.ENV_MODEL, E.HASH_MODEL_NAME)
        writable = open_service(request, "sqlite", tmp_path / "store")
        writable.drain_embeddings(ME)  # records the model; the lessons below stay queued
        load(writable, LESSONS)
        path = Path(writable.store.url.removeprefix("sqlite:///"))
        writable.store.dispose()
        store = Store(f"sqlite:///file:{path}?mode=ro&uri=true")
        reader = Cairn(store)
        try:
            found = reader.search(ME, "alembic autogenerate")
            assert [h["key"] for h in found["results"]][:1] == ["alembic"]  # by its words
            assert found["pending_embeddings"] == len(LESSONS)  # nothing could be embedded, nothing lost
            recalled = reader.recall(ME, "alembic autogenerate missed server defaults")
            assert recalled["pending_embeddings"] == len(LESSONS)
            assert reader.read(ME, "global", "wal")["lesson"]["key"] == "wal"
            with pytest.raises(CairnError) as refused:
                reader.write(ME, "global", "new", "A lesson the read-only store cannot take.")
            assert refused.value.code == "SETUP" and "read-only" in refused.value.message
            assert reader.list(ME)["lessons"] and len(reader.list(ME)["lessons"]) == len(LESSONS)
        finally:
            store.dispose()
