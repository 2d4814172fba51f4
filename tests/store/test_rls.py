"""Row-level security on Postgres, tested with hand-written SQL as the application role.

The service never forgets a tenant predicate (the other suites check what it returns); these tests
check the second wall: with tenant A set for the transaction, the application role sees, changes
and deletes zero rows of tenant B in every table, whatever SQL it runs, and cannot insert rows for
B. Also: every table is covered (so a new table without a policy fails here), the role cannot
bypass, owns nothing, and the owner itself is subject to the policies outside migrations.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from cairn.core.principal import Principal
from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store
from cairn.store.rls import APP_ROLE, SECURED_TABLES
from tests.conftest import new_store_url
from tests.contract import raw

SKIP = {"alembic_version"}  # the schema's revision: not tenant data, read-only to the role


@pytest.fixture(scope="module")
def pg(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    url = new_store_url(request, "postgres", tmp_path_factory.mktemp("rls"))
    store = Store(url)
    yield store
    store.dispose()


@pytest.fixture(scope="module")
def filled(pg: Store) -> tuple[Cairn, Principal, Principal]:
    """Two accounts with something in every table: lessons, versions, tags, sightings, links,
    tombstones, audit, vectors, queue, tokens, an org with an invite and a binding, limits."""
    import os

    os.environ["CAIRN_EMBED_MODEL"] = "hash-test-64"
    try:
        svc = Cairn(pg, Settings())
        me = local_principal()
        svc.ensure_tenant(me)
        a = svc.resolve_token(svc.create_user(me, "alice")["token"])
        b = svc.resolve_token(svc.create_user(me, "bob")["token"])
        for p in (a, b):
            p = Principal(
                p.tenant_id, p.actor, "s1", p.permissions, human=False, user_id=p.user_id, token_id=p.token_id
            )
            svc.write(p, "repo::x/y", "k1", f"{p.tenant_id} lesson one", tags=["t"])
            svc.write(p, "repo::x/y", "k2", f"{p.tenant_id} lesson two")
            svc.write(p, "repo::x/y", "k3", f"{p.tenant_id} lesson three")
            svc.link(p, "repo::x/y", "k1", "repo::x/y", "k2", "related")
            svc.forget(p, "repo::x/y", "k3", "wrong")
            svc.drain_embeddings(p)
            svc.org_create(p, f"org-{p.tenant_id}")
            svc.org_invite(p, f"org-{p.tenant_id}")
            svc.org_bind(p, f"org-{p.tenant_id}", f"repo::{p.tenant_id}/*")
            svc.token_create(p, perm="read", org=f"org-{p.tenant_id}")
            svc.limits_set(me, p.tenant_id, max_lessons=1000)
            _synced(svc, p)  # sync_stores, sync_peers, sync_events
        svc.write(b, "global", "queued", "bob's lesson still waiting for its vector")  # embed_queue
    finally:
        os.environ.pop("CAIRN_EMBED_MODEL", None)
    return svc, a, b


def _synced(svc: Cairn, p: Principal) -> None:
    """A peer's batch applied: the store's id, the peer's record and the applied event's."""
    from cairn.core.sync import SyncBatch

    peer = "e" * 32
    event = {
        "uid": f"{peer}:1",
        "kind": "tombstone",
        "origin_store": peer,
        "body": {"content_hash": "a" * 64, "scope": "repo::x/y", "key": "peer", "reason": "forgotten on a peer"},
    }
    batch = SyncBatch(store_id=peer, events=[event], cursor=1, more=False, head={"seq": 1, "hash": "b" * 64})
    assert svc.sync_apply(p, batch).applied == 1


def _tables(store: Store) -> dict[str, str]:
    """Every table of the schema -> the column that names its tenant (users: the account id)."""
    with raw(store) as conn:
        names = conn.execute(
            text(
                "SELECT c.relname FROM pg_class c WHERE c.relkind = 'r' "
                "AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
            )
        ).scalars()
        out = {}
        for name in names:
            if name in SKIP:
                continue
            cols = set(
                conn.execute(
                    text("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(:t) AND attnum > 0"),
                    {"t": name},
                ).scalars()
            )
            out[name] = "tenant_id" if "tenant_id" in cols else "id"
    return out


def test_every_table_has_forced_row_security(pg: Store, filled) -> None:
    tables = _tables(pg)
    assert {"lessons", "audit_log", "tokens", "memberships", "lesson_fts"} <= set(tables)
    assert any(t.startswith("vec_") for t in tables), "the vector table is covered too"
    with raw(pg) as conn:
        rows = conn.execute(
            text(
                "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class WHERE relkind = 'r' "
                "AND relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
            )
        ).all()
    unprotected = [r[0] for r in rows if r[0] not in SKIP and not (r[1] and r[2])]
    assert unprotected == []
    assert set(SECURED_TABLES) <= set(tables)


def test_the_application_role_cannot_bypass_and_owns_nothing(pg: Store, filled) -> None:
    with raw(pg) as conn:
        sup, bypass, login = conn.execute(
            text("SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = :r"), {"r": APP_ROLE}
        ).one()
        owned = conn.execute(
            text("SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner WHERE r.rolname = :r"),
            {"r": APP_ROLE},
        ).scalar_one()
        definers = (
            conn.execute(
                text(
                    "SELECT proname FROM pg_proc WHERE prosecdef "
                    "AND pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
                )
            )
            .scalars()
            .all()
        )
        grants = {
            p: conn.execute(text("SELECT has_table_privilege(:r, 'audit_log', :p)"), {"r": APP_ROLE, "p": p}).scalar()
            for p in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE")
        }
    assert (sup, bypass, login) == (False, False, False)
    assert owned == 0
    assert definers == ["cairn_vector_table"]  # takes a table name and a dimension, no caller id
    assert grants == {"SELECT": True, "INSERT": True, "UPDATE": False, "DELETE": False, "TRUNCATE": False}


def test_requests_run_as_the_application_role(pg: Store, filled) -> None:
    with pg.connect(write=False, tenant="alice", user="alice") as conn:
        user, tenant = conn.execute(text("SELECT current_user, current_setting('cairn.tenant')")).one()
    assert (user, tenant) == (APP_ROLE, "alice")


@pytest.mark.parametrize("write", [False, True])
def test_with_tenant_a_set_no_row_of_b_is_visible_anywhere(pg: Store, filled, write: bool) -> None:
    tables = _tables(pg)
    with raw(pg) as conn:
        bob_total = sum(conn.execute(text(f'SELECT count(*) FROM "{t}" WHERE "{c}" = :b'), {"b": "bob"}).scalar_one()
                        for t, c in tables.items())  # fmt: skip
    assert bob_total > 20  # the fixture really put bob's rows everywhere
    seen = {}
    with pg.connect(write=write, tenant="alice", user="alice", actor="alice") as conn:
        for t, c in tables.items():
            seen[t] = conn.execute(text(f'SELECT count(*) FROM "{t}" WHERE "{c}" = :b'), {"b": "bob"}).scalar_one()
            # and without any predicate: only alice's (or nothing)
            others = conn.execute(
                text(f'SELECT count(*) FROM "{t}" WHERE "{c}" NOT IN (:a, :oa)'), {"a": "alice", "oa": "org:org-alice"}
            ).scalar_one()
            seen[t + " (unfiltered)"] = others
    assert {k: v for k, v in seen.items() if v} == {}


def test_hand_written_updates_and_deletes_touch_zero_rows_of_b(pg: Store, filled) -> None:
    tables = _tables(pg)
    before = _bob_rows(pg, tables)
    with pg.connect(write=True, tenant="alice", user="alice", actor="alice") as conn:
        for t, c in tables.items():
            for verb in ("UPDATE", "DELETE"):
                priv = conn.execute(text("SELECT has_table_privilege(:t, :p)"), {"t": t, "p": verb}).scalar()
                if not priv:  # audit_log, users...: the role may not even try
                    with pytest.raises(DBAPIError, match="permission denied"), conn.begin_nested():
                        conn.execute(
                            text(f'{verb} "{t}" SET "{c}" = "{c}"' if verb == "UPDATE" else f'DELETE FROM "{t}"')
                        )
                    continue
                sql = (
                    f'UPDATE "{t}" SET "{c}" = "{c}" WHERE "{c}" = :b'
                    if verb == "UPDATE"
                    else f'DELETE FROM "{t}" WHERE "{c}" = :b'
                )
                assert conn.execute(text(sql), {"b": "bob"}).rowcount == 0, (t, verb)
                # no predicate at all: still nothing of bob's (alice's own rows are rolled back below)
                unfiltered = f'UPDATE "{t}" SET "{c}" = "{c}"' if verb == "UPDATE" else None
                if unfiltered:
                    conn.execute(text(unfiltered))
        conn.rollback()
    assert _bob_rows(pg, tables) == before


def _bob_rows(pg: Store, tables: dict[str, str]) -> dict[str, list]:
    with raw(pg) as conn:
        return {
            t: sorted(map(repr, conn.execute(text(f'SELECT * FROM "{t}" WHERE "{c}" = :b'), {"b": "bob"}).all()))
            for t, c in tables.items()
        }


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO lessons (tenant_id, scope, key, value, tags, kind, origin, trust, seen_count, helped_count, "
        "not_helped_count, version, content_hash, created_at, updated_at, created_by, updated_by) VALUES ('bob', "
        "'global', 'planted', 'x', '[]', 'gotcha', 'agent', 'verified', 1, 0, 0, 1, 'h', now(), now(), 'a', 'a')",
        "INSERT INTO memberships (tenant_id, user_id, role, created_at, created_by) "
        "VALUES ('org:org-bob', 'alice', 'owner', now(), 'a')",
        "INSERT INTO tokens (token_hash, prefix, user_id, tenant_id, name, perm, scope_patterns, created_at) "
        "VALUES ('h2', 'p', 'bob', 'bob', 'n', 'admin', '[]', now())",
        "INSERT INTO scope_bindings (tenant_id, pattern, created_at, created_by) "
        "VALUES ('org:org-bob', 'global', now(), 'a')",
        "INSERT INTO tenant_limits (tenant_id, updated_at, updated_by) VALUES ('bob', now(), 'a')",
        "INSERT INTO users (id, created_at, created_by) VALUES ('mallory', now(), 'a')",
    ],
)
def test_rows_for_another_tenant_cannot_be_inserted(pg: Store, filled, sql: str) -> None:
    with (
        pytest.raises(DBAPIError, match="row-level security|permission denied"),
        pg.connect(write=True, tenant="alice", user="alice", actor="alice") as conn,
    ):
        conn.execute(text(sql))


def test_without_a_tenant_the_role_sees_nothing(pg: Store, filled) -> None:
    tables = _tables(pg)
    with pg.connect(write=False) as conn:
        visible = {t: conn.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one() for t in tables}
    assert {t: n for t, n in visible.items() if n} == {}


def test_the_owner_outside_migrations_is_subject_to_the_policies(pg: Store, filled) -> None:
    """FORCE ROW LEVEL SECURITY: the tables' owner (the URL's user) sees nothing without the role either."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    engine = create_engine(pg.url, poolclass=NullPool)  # no Cairn events: a plain owner session
    try:
        with engine.connect() as conn:
            owner = conn.execute(text("SELECT current_user")).scalar_one()
            n = conn.execute(text("SELECT count(*) FROM lessons")).scalar_one()
            m = conn.execute(text("SELECT count(*) FROM tokens")).scalar_one()
    finally:
        engine.dispose()
    assert owner == "cairn"
    assert (n, m) == (0, 0)


def test_the_vector_function_refuses_anything_but_a_vector_table_name(pg: Store, filled) -> None:
    for name, dim in (("lessons", 3), ("vec_x; DROP TABLE lessons", 3), ("vec_ok", 0), ("vec_ok", 100000)):
        with pytest.raises(DBAPIError, match="refused"), pg.connect(write=True, tenant="alice", user="alice") as conn:
            conn.execute(text("SELECT cairn_vector_table(:n, :d)"), {"n": name, "d": dim})


def test_a_pooled_connection_carries_no_tenant_into_the_next_transaction(pg: Store, filled) -> None:
    pg.engine.dispose()
    with pg.connect(write=False, tenant="bob", user="bob") as conn:
        assert conn.execute(text("SELECT count(*) FROM lessons")).scalar_one() > 0
    with pg.connect(write=False) as conn:  # same pooled connection, no tenant
        assert conn.execute(text("SELECT count(*) FROM lessons")).scalar_one() == 0
        assert conn.execute(text("SELECT current_setting('cairn.tenant', true)")).scalar() in ("", None)
