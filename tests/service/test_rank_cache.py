"""The ranking index kept beside a SQLite database: a new process starts from it when it is valid for
the database as it is now, follows every change committed since, and builds afresh otherwise.

Each ``Cairn`` made here is what a fresh command process makes: its own (empty) in-memory indexes on
the same database file. A test that must prove the file was used forbids the full build.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pysqlite3.dbapi2 as sqlite3
import pytest

from cairn.core.principal import Principal
from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service import rank_cache
from cairn.service.api import Cairn
from cairn.service.rank_index import RankIndex, key_hash
from cairn.store.engine import Store, sqlite_url

R, B, G = "repo::acme/api", "branch::acme/api::feat/x", "global"
WHERE = {"repo": "acme/api", "branch": "feat/x", "project": None}


@pytest.fixture(autouse=True)
def _test_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")
    monkeypatch.delenv("CAIRN_RANK_CACHE", raising=False)


@pytest.fixture
def home(tmp_path: Path, migrated_sqlite: Path) -> Path:
    shutil.copyfile(migrated_sqlite, tmp_path / "cairn.db")
    return tmp_path


@pytest.fixture
def processes(home: Path) -> Iterator[Any]:
    """``new()`` opens the store as a fresh process would."""
    opened: list[Store] = []

    def new() -> Cairn:
        s = Store(sqlite_url(home))
        s.ensure_schema()
        opened.append(s)
        return Cairn(s, Settings())

    new.opened = opened  # type: ignore[attr-defined]
    yield new
    for s in opened:
        s.dispose()


@pytest.fixture
def me(processes: Any) -> Principal:
    p = local_principal()
    processes().ensure_tenant(p)
    return p


def block(svc: Cairn, me: Principal) -> tuple[list[tuple[str, str]], dict[str, int]]:
    data = svc.context(me, **WHERE)
    return [(x["scope"], x["key"]) for x in data["lessons"]], {s["scope"]: s["eligible"] for s in data["scopes"]}


def no_full_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: RankIndex, conn: Any) -> None:
        raise AssertionError("the index was built from every row although a valid file was there")

    monkeypatch.setattr(RankIndex, "_load_all", refuse)


def count_full_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    builds: list[str] = []
    real = RankIndex._load_all

    def counting(self: RankIndex, conn: Any) -> None:
        builds.append(self.tenant_id)
        real(self, conn)

    monkeypatch.setattr(RankIndex, "_load_all", counting)
    return builds


def files(home: Path) -> list[Path]:
    return sorted((home / "cairn.db.rank").glob("*.npz"))


def test_a_fresh_process_starts_from_the_file_and_answers_the_same(
    processes: Any, me: Principal, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = processes()
    for i in range(5):
        first.write(me, R, f"k{i}", f"lesson {i} about retries")
    first.write(me, B, "k0", "the branch's own k0 shadows the repo's")
    expected = block(first, me)
    assert len(files(home)) == 1, "the first build was not kept"
    assert (files(home)[0].stat().st_mode & 0o777) == 0o600
    no_full_build(monkeypatch)
    assert block(processes(), me) == expected
    assert expected[1][R] == 4  # the shadowed key is not counted: key hashes agree across processes


def test_changes_committed_after_the_file_are_seen_by_the_next_process(
    processes: Any, me: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = processes()
    first.write(me, R, "target", "a lesson another process archives")
    first.write(me, R, "keeper", "a lesson that stays")
    assert block(first, me)[1][R] == 2  # the file is written at this audit head
    writer = processes()  # another process changes the store without touching any index
    writer.archive(me, R, "target")
    writer.write(me, B, "keeper", "a narrower lesson with the same key")
    writer.write(me, G, "fresh", "a lesson written after the file")
    no_full_build(monkeypatch)
    shown, counts = block(processes(), me)
    assert (R, "target") not in shown
    assert (B, "keeper") in shown and (R, "keeper") not in shown and (G, "fresh") in shown
    assert counts == {B: 1, R: 0, G: 1}


def test_a_file_from_another_history_of_the_database_is_refused(
    processes: Any, me: Principal, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backup restored over the database, then as many new changes: the audit head's seq is the
    file's again, but its row is another one; the file must not be used."""
    first = processes()
    first.write(me, R, "both", "in the backup and after")
    backup = home / "backup.db"
    with sqlite3.connect(str(home / "cairn.db")) as source, sqlite3.connect(str(backup)) as target:
        source.backup(target)  # WAL included
    first.write(me, R, "lost", "written after the backup only")
    assert (R, "lost") in block(first, me)[0]
    assert files(home)
    for s in processes.opened:  # every process ends (the last checkpoints the WAL), then the restore
        s.dispose()
    with sqlite3.connect(str(backup)) as source, sqlite3.connect(str(home / "cairn.db")) as target:
        source.backup(target)
    restored = processes()
    restored.write(me, G, "other", "another change at the same seq")
    builds = count_full_builds(monkeypatch)
    shown, counts = block(processes(), me)
    assert builds == [me.tenant_id]
    assert (R, "lost") not in shown and (G, "other") in shown
    assert counts == {B: 0, R: 1, G: 1}


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b""),
        lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
        lambda p: p.write_bytes(b"PK\x03\x04" + b"\0" * 200),
        lambda p: p.write_bytes(bytes(b ^ 0x5A for b in p.read_bytes())),
    ],
    ids=["empty", "truncated", "bad-zip", "scrambled"],
)
def test_a_damaged_file_is_rebuilt_not_a_crash(
    processes: Any, me: Principal, home: Path, monkeypatch: pytest.MonkeyPatch, damage: Any
) -> None:
    first = processes()
    first.write(me, R, "k", "a lesson")
    expected = block(first, me)
    (path,) = files(home)
    damage(path)
    builds = count_full_builds(monkeypatch)
    assert block(processes(), me) == expected
    assert builds == [me.tenant_id]
    no_full_build(monkeypatch)  # and the rebuilt file is good again
    assert block(processes(), me) == expected


def test_a_file_for_another_model_or_tenant_is_not_used(
    processes: Any, me: Principal, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = processes()
    first.write(me, R, "k", "a lesson")
    block(first, me)
    (path,) = files(home)
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-32")  # another model: another file name
    builds = count_full_builds(monkeypatch)
    block(processes(), me)
    assert builds == [me.tenant_id]
    idx = RankIndex("someone-else", model="hash-test-64")  # a file renamed to another tenant's name
    renamed = rank_cache._file(path.parent, idx, False)
    shutil.copyfile(path, renamed)
    svc = processes()
    with svc.store.connect(write=False) as conn:
        assert not rank_cache.load(idx, conn, path.parent, False)
    assert idx.seq == -1 and not len(idx.arrays.ids)


def test_where_indexes_are_kept() -> None:
    assert rank_cache.cache_dir("sqlite:////data/cairn.db") == Path("/data/cairn.db.rank")
    assert rank_cache.cache_dir("sqlite://") is None
    assert rank_cache.cache_dir("postgresql://u@h/db") is None


def test_keeping_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_RANK_CACHE", "0")
    assert rank_cache.cache_dir("sqlite:////data/cairn.db") is None


def test_key_hashes_do_not_depend_on_the_process() -> None:
    """The file outlives the process: Python's salted ``hash`` would make shadowing compare apples
    and pears between rows from the file and rows read now."""
    assert key_hash("retry-policy") == key_hash("retry-policy") == 2678347459353983200
    assert key_hash("retry-policy") != key_hash("retry-polic")


def test_an_erasure_removes_the_kept_files(processes: Any, me: Principal, home: Path, clock: Any) -> None:
    """An erased lesson's numbers and vector must not outlive it in a file beside the database."""
    from cairn.core.principal import Principal as P

    first = processes()
    first.write(me, R, "secret", "a lesson that will be forgotten and erased")
    first.write(me, R, "keeper", "a lesson that stays")
    block(first, me)
    assert files(home)
    human = P(me.tenant_id, me.actor, me.session, me.permissions, me.scope_patterns, True)
    first.reject(human, R, "secret", "leaked a token")
    first.erase_forgotten(human, R, "secret")
    assert files(home) == []
    shown, _ = block(processes(), me)
    assert shown == [(R, "keeper")] and files(home)


def test_a_build_read_before_an_erasure_keeps_no_file_of_it(
    processes: Any, me: Principal, home: Path, monkeypatch: pytest.MonkeyPatch, clock: Any
) -> None:
    """A process that read the lessons before an erasure committed must not leave the erased lesson
    in a file written after the erasure removed the files (it would outlive the erasure there)."""
    from cairn.core.principal import Principal as P

    setup = processes()
    setup.write(me, R, "secret", "a lesson that will be forgotten and erased")
    setup.write(me, R, "keeper", "a lesson that stays")
    human = P(me.tenant_id, me.actor, me.session, me.permissions, me.scope_patterns, True)
    rank_cache.discard(setup.store.url)
    assert files(home) == []
    real = RankIndex._load_all
    eraser = processes()

    def read_then_erasure_elsewhere(self: RankIndex, conn: Any) -> None:
        real(self, conn)  # this process's snapshot holds the lesson
        monkeypatch.setattr(RankIndex, "_load_all", real)
        eraser.reject(human, R, "secret", "leaked a token")  # another process: forget, erase
        eraser.erase_forgotten(human, R, "secret")

    monkeypatch.setattr(RankIndex, "_load_all", read_then_erasure_elsewhere)
    block(processes(), me)
    assert files(home) == [], "a file holding the erased lesson was written after the erasure"
    shown, _ = block(processes(), me)  # the next process builds afresh, without the lesson, and keeps it
    assert shown == [(R, "keeper")] and len(files(home)) == 1


def test_vectors_kept_for_search_and_vectors_drained_since_reach_the_next_process(
    processes: Any, me: Principal, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Search keeps the index with its float16 vectors in a second file; a vector drained after that
    file was written (no audit row: the embed generation moves) is in the next process's index."""
    first = processes()
    first.write(me, R, "http-retries", "Retry idempotent HTTP calls with jittered backoff")
    first.write(me, G, "cache-keys", "Put the lockfile hash in the cache key")
    assert first.drain_embeddings(me) == 2
    first.search(me, "retries backoff")
    assert len(files(home)) == 1  # the index with its vectors (context alone keeps one without)
    first.write(me, G, "retry-budget", "Cap outbound retries with a retry budget per client")
    drainer = processes()
    assert drainer.drain_embeddings(me) == 1
    no_full_build(monkeypatch)
    cold = processes()
    hits = cold.search(me, "retry budget outbound")
    idx = cold.caches.ranks.get(me.tenant_id)
    assert idx.vectors and len(idx.arrays.ids) == 3 and idx.arrays.has_vec.all()
    assert idx.arrays.half.shape == (3, idx.dim) and idx.dim > 0
    assert "retry-budget" in json.dumps(hits)
