"""`cairn audit verify` proves the state: every kind of direct edit of the database is caught, on both
databases, with the address of the first mismatch and exit 1.

One history is written through the CLI per database; each case runs on a copy of it (a file copy for
SQLite, ``CREATE DATABASE … TEMPLATE`` for Postgres), edits it the way someone with the database's
credentials would (on Postgres as the superuser, which row-level security does not bind; the guard
triggers dropped where they refuse), and runs the real CLI.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pysqlite3.dbapi2 as sqlite3
import pytest

from cairn.store.dialect import drop_guard_triggers, guard_triggers
from tests.cli.conftest import envelope
from tests.conftest import run_cli

G, R = "global", "repo::acme/api"
HISTORY = [
    ("write", G, "alpha", "Alpha: pin the toolchain version.", "--tag", "ci", "--ttl", "30d"),
    ("write", G, "beta", "Beta: bad advice."),
    ("write", R, "gamma", "Gamma: retry with backoff."),
    ("write", R, "gamma", "Gamma: retry with jittered backoff."),
    ("forget", G, "beta", "--reason", "it breaks the build"),
    ("write", G, "delta", "Delta: old news."),
    ("archive", G, "delta"),
]
T0 = "2026-01-01 00:00:00"
# (case, SQL, table the first mismatch is in, (scope, key) of the address, version or None)
EDITS: list[tuple[str, str, str, tuple[str, str], int | None]] = [
    ("lesson-value", "UPDATE lessons SET value = 'Forged.' WHERE key = 'alpha'", "lessons", (G, "alpha"), None),
    ("lesson-trust", "UPDATE lessons SET trust = 'verified' WHERE key = 'gamma'", "lessons", (R, "gamma"), None),
    ("lesson-archived", "UPDATE lessons SET archived_at = NULL WHERE key = 'delta'", "lessons", (G, "delta"), None),
    ("lesson-tags", "UPDATE lessons SET tags = '[\"ci\", \"x\"]' WHERE key = 'alpha'", "lessons", (G, "alpha"), None),
    ("lesson-expiry", "UPDATE lessons SET expires_at = NULL WHERE key = 'alpha'", "lessons", (G, "alpha"), None),
    ("lesson-scope", "UPDATE lessons SET scope = 'global' WHERE key = 'gamma'", "lessons", (G, "gamma"), None),
    ("lesson-key", "UPDATE lessons SET key = 'alpha-2' WHERE key = 'alpha'", "lessons", (G, "alpha-2"), None),
    ("lesson-counter", "UPDATE lessons SET helped_count = 9 WHERE key = 'gamma'", "lessons", (R, "gamma"), None),
    ("lesson-deleted", "DELETE FROM lessons WHERE key = 'alpha'", "lessons", (G, "alpha"), None),
    (
        "lesson-inserted",
        "INSERT INTO lessons (tenant_id, scope, key, value, tags, kind, origin, trust, seen_count, helped_count,"
        " not_helped_count, version, content_hash, created_at, updated_at, created_by, updated_by)"
        " SELECT tenant_id, scope, 'planted', value, tags, kind, origin, 'verified', 1, 0, 0, 1, content_hash,"
        " created_at, updated_at, created_by, updated_by FROM lessons WHERE key = 'alpha'",
        "lessons",
        (G, "planted"),
        None,
    ),
    (
        "version-value",
        "UPDATE lesson_versions SET value = 'Forged.' WHERE key = 'gamma' AND version = 1",
        "lesson_versions",
        (R, "gamma"),
        1,
    ),
    (
        "version-trust",
        "UPDATE lesson_versions SET trust = 'verified' WHERE key = 'alpha' AND version = 1",
        "lesson_versions",
        (G, "alpha"),
        1,
    ),
    (
        "version-deleted",
        "DELETE FROM lesson_versions WHERE key = 'gamma' AND version = 1",
        "lesson_versions",
        (R, "gamma"),
        1,
    ),
    (
        "version-inserted",
        "INSERT INTO lesson_versions (tenant_id, lesson_id, version, action, scope, key, value, content_hash, tags,"
        " kind, trust, archived, seen_count, helped_count, not_helped_count, recorded_at, actor)"
        " SELECT tenant_id, lesson_id, 7, 'update', scope, key, 'Planted.', content_hash, tags, kind, trust,"
        " archived, seen_count, helped_count, not_helped_count, recorded_at, actor"
        " FROM lesson_versions WHERE key = 'alpha'",
        "lesson_versions",
        (G, "alpha"),
        7,
    ),
    ("tombstone-deleted", "DELETE FROM tombstones", "tombstones", (G, "beta"), None),
    ("tombstone-reason", "UPDATE tombstones SET reason = 'forged'", "tombstones", (G, "beta"), None),
    ("tombstone-hash", "UPDATE tombstones SET content_hash = 'ff'", "tombstones", (G, "beta"), None),
    (
        "tombstone-lifted",
        f"UPDATE tombstones SET lifted_at = '{T0}', lifted_by = 'mallory', lift_reason = 'x'",
        "tombstones",
        (G, "beta"),
        None,
    ),
    (
        "tombstone-inserted",
        "INSERT INTO tombstones (tenant_id, content_hash, scope, key, reason, created_at, created_by)"
        f" SELECT tenant_id, content_hash, scope, 'gamma', 'planted', '{T0}', 'mallory' FROM tombstones",
        "tombstones",
        (G, "gamma"),
        None,
    ),
]


# One case per table also checks the human output and --fast (each CLI run costs a second or two).
PERSON_FORM = {"lesson-value", "version-deleted", "tombstone-deleted"}


class Db:
    """A seeded store and a way to copy it, edit the copy, and run the CLI on it."""

    def __init__(self, backend: str, root: Path, request: pytest.FixtureRequest) -> None:
        self.backend, self.root, self.request = backend, root, request
        self.home = root / "seed"
        self.home.mkdir(parents=True)
        self.url: str | None = None
        self.n = 0
        if backend == "postgres":
            from tests.conftest import PgDatabases

            self.dbs: PgDatabases = request.getfixturevalue("pg_databases")
            self.name, url = self.dbs.new()
            request.addfinalizer(lambda: self.dbs.drop(self.name))
            self.url = url.replace("postgresql+psycopg://", "postgresql://", 1)

    def cli(self, home: Path, url: str | None, *args: str) -> Any:
        return run_cli(home, *(["--db", url] if url else []), *args)

    def copy(self) -> tuple[Path, str | None, Callable[[str], None]]:
        """(home, --db URL, edit) of a fresh copy of the seeded store."""
        self.n += 1
        home = self.root / f"case{self.n}"
        if self.backend == "sqlite":
            shutil.copytree(self.home, home)
            return home, None, lambda sql: _edit_sqlite(home / "cairn.db", sql)
        home.mkdir()
        name = f"{self.name}_c{self.n}"
        self.dbs._admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.name}" OWNER cairn STRATEGY FILE_COPY')
        self.request.addfinalizer(lambda: self.dbs.drop(name))
        server = self.dbs.server
        url = server.url_for(name).replace("postgresql+psycopg://", "postgresql://", 1)
        return home, url, lambda sql: _edit_postgres(server, name, sql)


def _edit_sqlite(path: Path, sql: str) -> None:
    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        for stmt in [*drop_guard_triggers("sqlite"), sql, *guard_triggers("sqlite")]:
            db.execute(stmt)
    finally:
        db.close()


def _edit_postgres(server: Any, name: str, sql: str) -> None:
    import psycopg

    # The superuser: row-level security does not bind it, as it does not bind anyone holding the
    # database's superuser credentials.
    with psycopg.connect(host=str(server.socket_dir), port=server.port, user="postgres", dbname=name) as conn:
        for stmt in [*drop_guard_triggers("postgresql"), sql, *guard_triggers("postgresql")]:
            conn.execute(stmt)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def seeded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Db:
    db = Db(request.param, tmp_path_factory.mktemp(f"audit-{request.param}"), request)
    for args in HISTORY:
        proc = db.cli(db.home, db.url, *args)
        assert proc.returncode == 0, proc.stderr
    ok = envelope(db.cli(db.home, db.url, "--json", "audit", "verify"))
    assert ok["status"] == "ok" and ok["data"]["state"] == {"lessons": 4, "versions": 7, "tombstones": 1}
    return db


@pytest.mark.parametrize(("case", "sql", "table", "address", "version"), EDITS, ids=[e[0] for e in EDITS])
def test_every_direct_edit_is_caught_with_its_address(
    seeded: Db, case: str, sql: str, table: str, address: tuple[str, str], version: int | None
) -> None:
    home, url, edit = seeded.copy()
    edit(sql)
    env = envelope(seeded.cli(home, url, "--json", "audit", "verify"))
    assert env["status"] == "refused" and env["reason"]["code"] == "AUDIT_BROKEN", env
    where = env["reason"]["data"]["broken_at"]
    assert (where["table"], where["scope"], where["key"]) == (table, *address), where
    if version is not None:
        assert where["version"] == version, where
    if case not in PERSON_FORM:
        return
    # The person's form: exit 1, one line naming the table and row, nothing on stdout.
    proc = seeded.cli(home, url, "audit", "verify")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"cairn: AUDIT_BROKEN: state does not match the audit ledger at {table} id ")
    # --fast checks the chain only, and the chain was not touched.
    assert seeded.cli(home, url, "audit", "verify", "--fast").returncode == 0
