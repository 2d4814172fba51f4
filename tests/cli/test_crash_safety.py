"""Kill -9 during ``cairn import`` leaves all or nothing, and a rerun finishes the job exactly.

The import is started as a real ``cairn`` subprocess and SIGKILLed at seeded moments: once while
it is still starting or parsing, the others at different points of the write (the test watches the
lesson count through a read-only connection and kills a random moment after a chosen count is
reached, so the kills land mid-transaction whatever the machine's speed). After every kill the
database must pass SQLite's ``integrity_check`` and ``cairn audit verify``, hold every lesson with
exactly its versions and audit rows, and hold a prefix of the file: whole records, no torn ones.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3
import pytest

from cairn.service.transfer import BATCH
from tests.cli.conftest import Cli

# Sixteen of the import's batches: the six mid-write kills below each land in a transaction of its
# own, two batches apart, and the restarts (each parses the whole file again) stay cheap. The last
# target leaves five batches to go: on a quiet machine a batch commits faster than the watcher
# polls, and a kill that lands only after the last commit interrupts nothing.
RECORDS = 16 * BATCH
SEED = 20250131
SCOPES = ["global", "project::shop", "repo::acme/widget", "repo::acme/gadget", "branch::acme/widget::main"]
TOPICS = ["build", "tests", "deploy", "deps", "style", "db", "api", "ci"]


def make_records(n: int, seed: int) -> list[dict]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        topic = rnd.choice(TOPICS)
        rec = {
            "scope": rnd.choice(SCOPES),
            "key": f"{topic}-{i}",
            "value": f"Lesson {i} on {topic}: run step {rnd.randint(1, 9)} before step {rnd.randint(10, 99)}.",
        }
        if i % 3:
            rec["tags"] = sorted(rnd.sample(TOPICS, rnd.randint(1, 3)))
        if i % 7 == 0:
            rec["kind"] = "fact"
        out.append(rec)
    return out


def _connect(db: Path, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        return sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None, timeout=30)
    return sqlite3.connect(str(db), isolation_level=None, timeout=30)


def _lesson_count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = _connect(db, readonly=True)
        try:
            return conn.execute("SELECT count(*) FROM lessons").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError:  # not created yet, or mid-migration
        return 0


def _start_import(home: Path, file: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "CAIRN_HOME": str(home)}
    env.pop("CAIRN_SESSION", None)
    return subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--json", "import", "--no-embed", str(file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _table_counts(db: Path) -> dict[str, int]:
    conn = _connect(db)
    try:
        names = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        ]
        return {name: conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in sorted(names)}
    finally:
        conn.close()


def check_consistent(cli: Cli, records: list[dict]) -> int:
    """Every invariant a crash must not break; returns how many lessons the store holds."""
    # First through the CLI, as a user would after a crash (this also finishes a schema creation
    # that a kill interrupted: the migration is one transaction, so it is there or it is not).
    verify = cli.json("audit", "verify")
    assert verify["status"] == "ok" and verify["data"]["ok"] is True, verify
    db = cli.home / "cairn.db"
    conn = _connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        lessons = conn.execute("SELECT id, scope, key, value, tags, kind, version FROM lessons").fetchall()
        versions = dict(conn.execute("SELECT lesson_id, count(*) FROM lesson_versions GROUP BY lesson_id").fetchall())
        audited = dict(
            conn.execute(
                "SELECT lesson_id, count(*) FROM audit_log WHERE lesson_id IS NOT NULL AND version_after IS NOT NULL "
                "GROUP BY lesson_id"
            ).fetchall()
        )
        tag_rows: dict[int, set[str]] = {}
        for lesson_id, tag in conn.execute("SELECT lesson_id, tag FROM lesson_tags"):
            tag_rows.setdefault(lesson_id, set()).add(tag)
    finally:
        conn.close()

    ids = {row[0] for row in lessons}
    assert set(versions) == ids, "a lesson without versions, or versions without a lesson"
    assert set(audited) == ids, "a lesson without audit rows, or audit rows naming a missing lesson"
    assert set(tag_rows) <= ids, "tags of a missing lesson"
    for lesson_id, _scope, _key, _value, tags, _kind, version in lessons:
        assert versions[lesson_id] == audited[lesson_id] == version, (lesson_id, versions[lesson_id], version)
        assert tag_rows.get(lesson_id, set()) == set(json.loads(tags))

    # All or nothing per record, in file order: the store holds exactly the first N records.
    held = {(scope, key): (value, sorted(json.loads(tags)), kind) for _, scope, key, value, tags, kind, _ in lessons}
    expected_prefix = {
        (r["scope"], r["key"]): (r["value"], sorted(r.get("tags", [])), r.get("kind", "lesson"))
        for r in records[: len(held)]
    }
    assert held == expected_prefix
    assert verify["data"]["checked"] == len(lessons)  # one audit row per imported lesson, nothing else
    return len(lessons)


@pytest.mark.slow
def test_kill_9_during_import_leaves_all_or_nothing(cli: Cli, tmp_path: Path) -> None:
    records = make_records(RECORDS, SEED)
    file = tmp_path / "plain.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    db = cli.home / "cairn.db"
    rnd = random.Random(SEED)

    # (lesson count to wait for, then a fraction of a batch's time): the first kill lands while
    # the process starts, creates the schema or parses; the others while batches are written, from
    # the first batch to the eleventh. A target inside every other batch: the kill before it
    # has left the count at most one batch further, so each run waits for a commit of its own.
    plan = [(None, rnd.uniform(0.3, 1.2))] + [
        (BATCH * batch + rnd.randint(1, BATCH - 1), rnd.random()) for batch in range(0, 12, 2)
    ]
    interrupted = 0
    counts_after_kill: list[int] = []
    for target, extra in plan:
        proc = _start_import(cli.home, file)
        start = time.monotonic()
        if target is None:
            time.sleep(extra)
        else:
            # Wait for the chosen count, timing the batch commits seen on the way, then kill a
            # seeded fraction of one batch later: mid-transaction on a slow machine or a fast one.
            seen, changes = _lesson_count(db), []
            while proc.poll() is None and seen < target and time.monotonic() - start < 240:
                time.sleep(0.02)
                count = _lesson_count(db)
                if count != seen:
                    seen = count
                    changes.append((time.monotonic(), count))
            # One batch's time, also when a poll saw several batches commit at once (a quiet machine).
            if len(changes) >= 2:
                (t1, c1), (t2, c2) = changes[-2], changes[-1]
                batch_s = (t2 - t1) / max(1, (c2 - c1) // BATCH)
            else:
                batch_s = 0.6
            time.sleep(extra * min(batch_s, 0.6))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            interrupted += 1
        proc.communicate(timeout=60)
        assert proc.returncode in (0, -signal.SIGKILL), proc.returncode
        counts_after_kill.append(check_consistent(cli, records))

    print(f"kills: {interrupted}/{len(plan)}; lessons after each: {counts_after_kill}")
    assert interrupted >= 5, f"only {interrupted} of {len(plan)} kills interrupted the import"
    assert counts_after_kill == sorted(counts_after_kill)  # an import never loses what an earlier one wrote
    # Each run after the first resumed a partial import; the last may finish before its kill lands (the
    # import writes several batches while a loaded test process sleeps through one poll).
    assert sum(0 < c < RECORDS for c in counts_after_kill) >= 4, counts_after_kill

    # Rerun to completion: exactly the file's lessons, once each, with the expected values.
    done = cli.ok("import", "--no-embed", str(file))
    assert done["refused"] == []
    assert done["created"] == RECORDS - counts_after_kill[-1]
    assert check_consistent(cli, records) == RECORDS
    assert _lesson_count(db) == RECORDS
    assert len(cli.ok("list", "--limit", str(RECORDS))["lessons"]) == RECORDS  # active, readable through the CLI

    # A second full import changes nothing, in any table.
    before = _table_counts(db)
    again = cli.ok("import", "--no-embed", str(file))
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, RECORDS)
    assert _table_counts(db) == before
