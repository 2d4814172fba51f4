"""A warm ranking index follows each change incrementally and answers as one built from scratch.

After a change, the index patches the changed lessons into its arrays and into what context kept
from the last call (eligible sets, each branch term's matches, the top set's rows) instead of
rebuilding them. Whatever the change, the next block must be the one a fresh process builds from
the database alone.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from cairn.core.principal import Principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.conftest import session

REPO, BRANCH, PROJECT = "acme/api", "feat/retry-backoff", "api"
B, R, P, G = f"branch::{REPO}::{BRANCH}", f"repo::{REPO}", f"project::{PROJECT}", "global"
WHERE = {"repo": REPO, "branch": BRANCH, "project": PROJECT}
SCOPES = [B, R, P, G, "repo::acme/web", "project::web"]
KEYS = [f"k{i}" for i in range(8)]
# Values with and without the branch's words, so edits move lessons in and out of term matches.
VALUES = [
    "Retry the upload with exponential backoff.",
    "Backoff needs jitter or the clients stampede.",
    "Pin the lockfile hash in the CI cache key.",
    "Use squash merges on release branches.",
    "A retry storm took the payments API down.",
    "The linter wants imports sorted.",
]


@pytest.fixture(autouse=True)
def _test_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")
    monkeypatch.setenv("CAIRN_RANK_CACHE", "0")  # the fresh index below builds from the database alone


def block(svc: Cairn, p: Principal) -> dict[str, Any]:
    data = svc.context(p, **WHERE)
    return {k: data[k] for k in ("text", "loaded", "eligible", "scopes", "lessons")}


def change(svc: Cairn, me: Principal, rnd: random.Random, n: int, clock: Any) -> str:
    """One random change through the service; returns what it did (for the failure message)."""
    scope, key = rnd.choice(SCOPES), rnd.choice(KEYS)
    value = f"{rnd.choice(VALUES)} Note {rnd.randrange(4)}."
    op = rnd.choice(["write", "write", "write", "feedback", "archive", "restore", "forget", "recur", "drain", "tick"])
    ttl = rnd.choice([None, None, "1h", "3h"])  # a recurrence with a TTL moves the lesson's expiry in place
    try:
        if op == "write":
            svc.write(me, scope, key, value, tags=["loop::bot"] if rnd.random() < 0.2 else None, ttl=ttl)
        elif op == "feedback":
            svc.feedback(session(me, f"s{n}"), scope, key, rnd.choice(["helped", "not-helped"]))
        elif op == "archive":
            svc.archive(me, scope, key)
        elif op == "restore":
            svc.restore(me, scope, key)
        elif op == "forget":
            svc.forget(me, scope, key, "bench of the follow path")
        elif op == "recur":
            current = svc.read(me, scope, key)["lesson"]["value"]
            svc.write(session(me, f"s{n}"), scope, key, current, ttl=ttl)
        elif op == "drain":
            svc.drain_embeddings(me)
        elif op == "tick":  # time passes: TTLs run out without a write
            clock(f"2025-01-01T{n // 2:02d}:{30 * (n % 2):02d}:00Z")
    except Exception as exc:  # noqa: BLE001 - a refused change (no such lesson, tombstoned) is a change too
        from cairn.errors import CairnError

        if not isinstance(exc, CairnError):
            raise
    return f"{op} {scope} {key}"


@pytest.mark.parametrize("seed", range(6))
def test_after_every_change_the_warm_block_is_the_one_built_from_scratch(
    svc: Cairn, me: Principal, store_url: str, clock, seed: int
) -> None:
    rnd = random.Random(seed)
    for n in range(6):
        svc.write(me, rnd.choice(SCOPES), f"seed-{n}", f"{rnd.choice(VALUES)} Seed {n}.")
    block(svc, me)  # warm: arrays, eligible sets, term matches and top-set rows are kept from here
    done = []
    for n in range(30):
        clock(f"2025-01-01T{n // 2:02d}:{30 * (n % 2):02d}:00Z")
        done.append(change(svc, me, rnd, n, clock))
        warm = block(svc, me)
        fresh_store = Store(store_url)
        try:
            fresh = block(Cairn(fresh_store, Settings()), me)
        finally:
            fresh_store.dispose()
        assert warm == fresh, f"after {done}"


def test_an_in_place_change_keeps_the_eligible_set_and_patches_the_numbers(svc: Cairn, me: Principal, clock) -> None:
    svc.write(me, R, "a", "Retry the upload with exponential backoff.")
    svc.write(me, R, "b", "Use squash merges on release branches.")
    before = block(svc, me)
    idx = svc._rank_index(me.tenant_id)
    kept = {k: v for k, v in idx.memo.items() if isinstance(k, tuple)}
    assert kept, "context memoized the ladder's eligible set"
    arrays = idx.arrays
    svc.feedback(session(me, "s1"), R, "b", "helped")
    after = block(svc, me)
    assert after["eligible"] == before["eligible"]
    assert all(idx.memo.get(k) is v for k, v in kept.items())  # same positions: nothing recomputed
    assert idx.arrays is not arrays and idx.arrays.ids is arrays.ids  # the row set is the same object
    assert arrays.helped.sum() == 0  # the snapshot a reader may hold was not written to
    assert int(idx.arrays.helped.sum()) == 1


def test_a_forgotten_lessons_text_is_not_served_from_what_context_kept(svc: Cairn, me: Principal, clock) -> None:
    svc.write(me, R, "secret", "Retry with the staging password hunter2 in the backoff header.")
    svc.write(me, R, "plain", "Retry the upload with exponential backoff.")
    assert "hunter2" in block(svc, me)["text"]
    svc.forget(me, R, "secret", "a secret")
    after = block(svc, me)
    assert "hunter2" not in after["text"]
    assert [lesson["key"] for lesson in after["lessons"]] == ["plain"]
    idx = svc._rank_index(me.tenant_id)
    assert all("hunter2" not in row["value"] for row in idx.memo.get("texts", {}).values())


def test_a_new_lesson_is_appended_without_copying_the_columns_nor_touching_a_readers_snapshot(
    svc: Cairn, me: Principal, clock
) -> None:
    svc.write(me, R, "a", "Retry the upload with exponential backoff.")
    block(svc, me)
    svc.write(me, R, "b", "Backoff needs jitter or the clients stampede.")
    block(svc, me)  # the first append moves each column into a buffer with room
    idx = svc._rank_index(me.tenant_id)
    snapshot = idx.arrays
    held = snapshot.ids.copy()
    svc.write(me, R, "c", "A retry storm took the payments API down.")
    after = block(svc, me)
    assert after["eligible"] == 3
    assert len(idx.arrays.ids) == len(held) + 1
    assert np.shares_memory(idx.arrays.ids, snapshot.ids)  # widened in place, not copied
    assert list(snapshot.ids) == list(held)  # what a reader took is as it was
