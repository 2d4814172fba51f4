"""The schema module and the migrations agree; HEAD is the newest revision; down and up work."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

import cairn.store.migrations as migrations_pkg
from cairn.service.api import Cairn
from cairn.store.engine import Store
from cairn.store.migrations import HEAD
from cairn.store.schema import metadata

MIGRATIONS = Path(migrations_pkg.__file__).parent


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def run_alembic(store: Store, fn, *args) -> None:  # type: ignore[no-untyped-def]
    cfg = alembic_config()
    with store.engine.connect() as conn:
        conn.info["cairn_write"] = True
        conn.info["cairn_schema"] = True  # the owner migrates; requests run as the application role
        if store.dialect == "postgresql":
            from cairn.store import rls

            rls.unforce(conn)
        cfg.attributes["connection"] = conn
        fn(cfg, *args)
        conn.commit()


def virtual_tables(store: Store) -> set[str]:
    """Search index tables the migrations create with dialect SQL (FTS5, sqlite-vec and their
    shadow tables; on Postgres the tsvector table and the pgvector tables): they are deliberately
    not in ``schema.py``, so the comparison skips them."""
    if store.dialect == "postgresql":
        from cairn.store import search_index as ix

        with store.engine.connect() as conn:
            return {"lesson_fts", *ix.vec_tables(conn)}
    with store.engine.connect() as conn:
        names = [r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))]
        virtual = {
            r[0]
            for r in conn.execute(
                text("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'")
            )
        }
    return virtual | {n for n in names for v in virtual if n.startswith(f"{v}_")}


def compare(store: Store, target=metadata):  # type: ignore[no-untyped-def]
    skip = virtual_tables(store)

    def include_name(name, type_, parent_names):  # type: ignore[no-untyped-def]
        return not (type_ == "table" and name in skip)

    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": True, "include_name": include_name}
        )
        diff = compare_metadata(ctx, target)
    if store.dialect == "sqlite":
        # SQLite has no identity columns (its INTEGER PRIMARY KEY is the rowid alias and ignores
        # ``Identity()``), so reflection cannot report the one the metadata declares.
        diff = [d for d in diff if not (isinstance(d, list) and all(_identity_default(m) for m in d))]
    return diff


def _identity_default(change) -> bool:  # type: ignore[no-untyped-def]
    from sqlalchemy import Identity

    return change[0] == "modify_default" and isinstance(change[-1], Identity) and change[-2] is None


def test_autogenerate_finds_no_difference_between_schema_and_migrations(store: Store) -> None:
    diff = compare(store)
    assert diff == [], f"schema.py and the migrations disagree: {diff}"


def test_only_index_tables_are_left_out_of_the_comparison(store: Store) -> None:
    skipped = virtual_tables(store)
    assert not skipped & set(metadata.tables)
    assert all(name.startswith(("lesson_fts", "vec_")) for name in skipped), skipped


def test_the_comparison_would_notice_a_drift(store: Store) -> None:
    """Guard against a vacuous pass: a column the migrations lack is reported."""
    from sqlalchemy import Column, Integer, MetaData

    drifted = MetaData()
    for table in metadata.sorted_tables:
        table.to_metadata(drifted)
    drifted.tables["lessons"].append_column(Column("surprise", Integer))
    diff = compare(store, drifted)
    assert any(d[0] == "add_column" and d[3].name == "surprise" for d in diff)


def test_head_constant_is_the_script_directory_head() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_heads() == [HEAD]
    assert script.get_current_head() == HEAD


def test_a_migrated_store_is_at_head(store: Store) -> None:
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == HEAD


def _schema(store: Store) -> dict[str, tuple[list[str], list[str]]]:
    """Every table's columns and index names, read fresh from the database."""
    found = inspect(store.engine)
    return {
        table: (
            sorted(c["name"] for c in found.get_columns(table)),
            sorted(str(i["name"]) for i in found.get_indexes(table)),
        )
        for table in sorted(found.get_table_names())
    }


def test_every_migration_steps_down_and_up_again(store: Store) -> None:
    """Each revision's downgrade undoes exactly its upgrade: stepping down from HEAD one revision at a
    time and back up again meets the same schema at every revision, on both databases."""
    script = ScriptDirectory.from_config(alembic_config())
    revisions = [rev.revision for rev in script.walk_revisions()]  # HEAD first
    assert revisions[0] == HEAD and len(revisions) > 1
    seen = {HEAD: _schema(store)}
    for rev in revisions[1:]:
        run_alembic(store, command.downgrade, rev)
        seen[rev] = _schema(store)
    for rev in reversed(revisions[:-1]):
        run_alembic(store, command.upgrade, rev)
        assert _schema(store) == seen[rev], f"revision {rev} is not the same schema after a step down and up"


def test_downgrade_to_base_then_upgrade_works(store: Store, me) -> None:
    svc = Cairn(store)
    svc.ensure_tenant(me)
    svc.write(me, "global", "k", "before the round trip")
    run_alembic(store, command.downgrade, "base")
    remaining = set(inspect(store.engine).get_table_names()) - {"alembic_version"}
    assert remaining == set()
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM alembic_version")).scalar_one() == 0
    store.upgrade()  # what `cairn db upgrade` runs: the migrations, then (Postgres) role and policies
    assert set(inspect(store.engine).get_table_names()) >= set(metadata.tables)
    assert compare(store) == []
    # The store works again (and the guard triggers came back with the upgrade).
    fresh = Cairn(store)
    fresh.ensure_tenant(me)
    assert fresh.write(me, "global", "k", "after the round trip")["action"] == "created"
    if store.dialect == "sqlite":
        with store.engine.connect() as conn:
            triggers = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))}
        assert {"audit_log_no_update", "audit_log_no_delete", "lesson_versions_no_update"} <= triggers


def test_ensure_schema_upgrades_a_fresh_database(tmp_path: Path) -> None:
    from cairn.store.engine import sqlite_url

    s = Store(sqlite_url(tmp_path))
    try:
        assert inspect(s.engine).get_table_names() == []
        s.ensure_schema()
        assert set(metadata.tables) <= set(inspect(s.engine).get_table_names())
    finally:
        s.dispose()


# Accounts exist across tenants (one person, several orgs); tenants are the tenancy itself.
@pytest.mark.parametrize("table", sorted(t for t in metadata.tables if t not in ("tenants", "users")))
def test_every_tenant_owned_table_has_tenant_id(table: str) -> None:
    assert "tenant_id" in metadata.tables[table].c
    assert not metadata.tables[table].c.tenant_id.nullable
