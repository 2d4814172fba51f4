# ruff: noqa: S608 - every identifier here is a constant of this module; values are bound parameters.
"""Postgres row-level security: the application role, its grants and every policy, in one place.

Why the database and not only the query layer: every query Cairn writes carries a tenant predicate,
and on SQLite that predicate *is* the boundary. On a shared Postgres a forgotten predicate would
hand one team's lessons to another, so the database checks too. The way this classically goes wrong:
policies exist, but SECURITY DEFINER functions run as the table owner (who bypasses row security
unless it is forced) and trust a caller-supplied user id.

The rules, and where each is enforced:

* **Requests run as ``cairn_app``**, a role with no LOGIN, no BYPASSRLS, no SUPERUSER, that owns
  no table. Whatever user the configured URL names -- the owner, a superuser, or a login role that
  is a member of ``cairn_app`` -- each request transaction begins with ``set_config('role',
  'cairn_app', true)`` (``store/engine.py``), so owners' and superusers' bypass never applies to a
  request. Migrations alone run as the URL's user.
* **The caller is set per transaction** with ``set_config('cairn.tenant' | 'cairn.user' |
  'cairn.actor', …, true)``: transaction-local, so a pooled connection carries nothing into the
  next request, and safe under PgBouncer's transaction pooling. The values come from the principal
  the service resolved (a hashed token, or the database credentials' own ``local`` account), never
  from request input.
* **Every table has row security enabled and FORCED** (so even the owner is subject to it when it
  is not migrating). Tenant data tables admit rows of ``cairn.tenant`` only, for reading and for
  writing (``WITH CHECK``). The account tables (users, memberships, invites, bindings, tokens) admit
  the rows the caller's own account or the current tenant needs -- the policies below say which.
* **The audit log can only grow**: ``cairn_app`` has SELECT and INSERT on it, nothing else, and the
  triggers of migration 0001 refuse UPDATE, DELETE and TRUNCATE for everyone.
* **One SECURITY DEFINER function**, ``cairn_vector_table``: a new embedding model needs a new
  vector table, and ``cairn_app`` may not create tables (it would own them). The function takes a
  table *name* and a dimension, checks both against a strict pattern, and creates the table with the
  same policy and grants as the others. It takes no tenant or user id, so it has nothing to trust.

Who can do what is decided once, in the service (``service/accounts.py``); these policies are the
second wall that holds if a query forgets its predicate, and what ``tests/store/test_rls.py`` breaks
against with hand-written SQL.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from cairn.errors import CairnError

APP_ROLE = "cairn_app"
_T = "current_setting('cairn.tenant', true)"
_U = "current_setting('cairn.user', true)"
_TOKEN = "current_setting('cairn.token', true)"  # noqa: S105 - a setting's name, not a secret
_INVITE = "current_setting('cairn.invite', true)"
_WEBHOOK = "current_setting('cairn.webhook', true)"  # the repository a delivery names
_MY_TENANTS = f"(SELECT m.tenant_id FROM memberships m WHERE m.user_id = {_U})"
_OWN = f"tenant_id = {_T}"

# Tables whose every row belongs to one tenant: the one policy "this tenant's rows only".
DATA_TABLES = (
    "lessons",
    "lesson_versions",
    "lesson_tags",
    "sightings",
    "links",
    "tombstones",
    "tombstone_vectors",
    "audit_log",
    "lesson_embeddings",
    "lesson_signatures",
    "embed_queue",
    "embed_state",
    "lesson_fts",
    "tenant_limits",
    "webhooks",
    "webhook_deliveries",
    "webhook_provenance",
    "conversations",
    "conversation_turns",
    "conversation_messages",
    "conversation_tombstones",
    "conversation_lessons",
    "consolidation_runs",
    "consolidation_actions",
    "sync_stores",
    "sync_peers",
    "sync_events",
)
FULL = ("SELECT", "INSERT", "UPDATE", "DELETE")
GRANTS: dict[str, tuple[str, ...]] = {t: FULL for t in DATA_TABLES}
GRANTS.update(
    {
        "audit_log": ("SELECT", "INSERT"),  # append-only: no UPDATE or DELETE to grant
        "lesson_versions": ("SELECT", "INSERT", "DELETE"),  # history is never edited; purge erases
        "tenants": ("SELECT", "INSERT", "UPDATE"),
        "users": ("SELECT", "INSERT"),
        "memberships": FULL,
        "invites": ("SELECT", "INSERT", "UPDATE"),
        "scope_bindings": ("SELECT", "INSERT", "DELETE"),
        "tokens": ("SELECT", "INSERT", "UPDATE"),
        "alembic_version": ("SELECT",),  # the schema check; not tenant data, so no row security
    }
)

# (table, policy, command, USING, WITH CHECK). Policies for one command are OR-ed by Postgres.
POLICIES: list[tuple[str, str, str, str | None, str | None]] = [
    (t, "cairn_tenant", "ALL", _OWN, _OWN) for t in DATA_TABLES
] + [
    # A tenant row: the current tenant's, or one of the caller's memberships (org list).
    ("tenants", "cairn_read", "SELECT", f"id = {_T} OR id IN {_MY_TENANTS}", None),
    ("tenants", "cairn_create", "INSERT", None, f"id = {_T}"),
    ("tenants", "cairn_change", "UPDATE", f"id = {_T}", f"id = {_T}"),
    # An account: one's own, or a member of the current tenant (member lists).
    (
        "users",
        "cairn_read",
        "SELECT",
        f"id = {_U} OR id IN (SELECT m.user_id FROM memberships m WHERE m.tenant_id = {_T})",
        None,
    ),
    ("users", "cairn_create", "INSERT", None, f"id = {_U}"),
    # Memberships: the current tenant's, and one's own (which orgs am I in).
    ("memberships", "cairn_read", "SELECT", f"{_OWN} OR user_id = {_U}", None),
    ("memberships", "cairn_create", "INSERT", None, _OWN),
    ("memberships", "cairn_change", "UPDATE", _OWN, _OWN),
    ("memberships", "cairn_remove", "DELETE", _OWN, None),
    # Invites: the current tenant's, or the one whose code the caller presented (accepting).
    ("invites", "cairn_read", "SELECT", f"{_OWN} OR code_hash = {_INVITE}", None),
    ("invites", "cairn_create", "INSERT", None, _OWN),
    ("invites", "cairn_change", "UPDATE", f"{_OWN} OR code_hash = {_INVITE}", f"{_OWN} OR code_hash = {_INVITE}"),
    # Bindings: the current tenant's, and those of orgs the caller belongs to (write routing).
    ("scope_bindings", "cairn_read", "SELECT", f"{_OWN} OR tenant_id IN {_MY_TENANTS}", None),
    ("scope_bindings", "cairn_create", "INSERT", None, _OWN),
    ("scope_bindings", "cairn_remove", "DELETE", _OWN, None),
    # Tokens: the current tenant's, one's own, or the one being presented (authentication).
    ("tokens", "cairn_read", "SELECT", f"{_OWN} OR user_id = {_U} OR token_hash = {_TOKEN}", None),
    ("tokens", "cairn_create", "INSERT", None, f"{_OWN} AND user_id = {_U}"),
    ("tokens", "cairn_change", "UPDATE", f"{_OWN} OR user_id = {_U}", f"{_OWN} OR user_id = {_U}"),
    # A delivery is checked before its tenant is known: it may read the registrations of the one
    # repository it names (their secrets verify its signature), and nothing else.
    ("webhooks", "cairn_delivery", "SELECT", f"repo = {_WEBHOOK} AND {_WEBHOOK} <> ''", None),
]

SECURED_TABLES = tuple(dict.fromkeys(t for t, *_ in POLICIES))

VECTOR_FUNCTION = "cairn_vector_table"


def _vector_function(schema: str, namespace: int, hnsw_max_dim: int) -> str:
    # No "%" anywhere: the DDL passes through the driver's paramstyle unchanged (quote_ident, not format).
    policy = f"USING ({_OWN}) WITH CHECK ({_OWN})".replace("'", "''")
    return f"""
CREATE OR REPLACE FUNCTION {VECTOR_FUNCTION}(tbl text, dim integer) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {quote(schema)}, public AS $fn$
DECLARE q text := quote_ident(tbl);
BEGIN
  IF tbl !~ '^vec_[a-z0-9_]{{1,54}}$' OR dim < 1 OR dim > 16000 THEN
    RAISE EXCEPTION 'cairn_vector_table: refused name or dimension';
  END IF;
  PERFORM pg_advisory_xact_lock({namespace}, 0);
  EXECUTE 'CREATE TABLE IF NOT EXISTS ' || q || ' (lesson_id BIGINT PRIMARY KEY, '
    || 'tenant_id VARCHAR(64) NOT NULL REFERENCES tenants(id), scope VARCHAR(300) NOT NULL, '
    || 'trust VARCHAR(16) NOT NULL, expires BIGINT NOT NULL, embedding vector(' || dim || ') NOT NULL)';
  EXECUTE 'CREATE INDEX IF NOT EXISTS ' || quote_ident(tbl || '_tsc') || ' ON ' || q || ' (tenant_id, scope)';
  IF dim <= {hnsw_max_dim} THEN
    EXECUTE 'CREATE INDEX IF NOT EXISTS ' || quote_ident(tbl || '_hnsw') || ' ON ' || q
      || ' USING hnsw (embedding vector_cosine_ops)';
  END IF;
  EXECUTE 'ALTER TABLE ' || q || ' ENABLE ROW LEVEL SECURITY';
  EXECUTE 'ALTER TABLE ' || q || ' FORCE ROW LEVEL SECURITY';
  EXECUTE 'DROP POLICY IF EXISTS cairn_tenant ON ' || q;
  EXECUTE 'CREATE POLICY cairn_tenant ON ' || q || ' TO {APP_ROLE} {policy}';
  EXECUTE 'GRANT SELECT, INSERT, UPDATE, DELETE ON ' || q || ' TO {APP_ROLE}';
  RETURN tbl;
END $fn$"""


def quote(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


def _fail(message: str) -> CairnError:
    return CairnError("SETUP", message)


def ensure_role(conn: Connection) -> None:
    """Create ``cairn_app`` if missing and let the migrating user switch to it; refuse a role that bypasses."""
    row = conn.execute(
        text("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = :r"), {"r": APP_ROLE}
    ).first()
    if row is None:
        try:
            with conn.begin_nested():
                conn.exec_driver_sql(f"CREATE ROLE {APP_ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE")
        except Exception as exc:  # noqa: BLE001 - insufficient privilege, said with the fix
            raise _fail(
                f"cannot create the application role {APP_ROLE} ({_reason(exc)}); as a superuser run: "
                f"CREATE ROLE {APP_ROLE} NOLOGIN; GRANT {APP_ROLE} TO {_current_user(conn)}; "
                "then run cairn db upgrade again"
            ) from None
    elif row[0]:
        raise _fail(
            f"the role {APP_ROLE} is a superuser or has BYPASSRLS, so row-level security would not apply "
            f"to it; as a superuser run: ALTER ROLE {APP_ROLE} NOSUPERUSER NOBYPASSRLS"
        )
    # Postgres 16 split membership into ADMIN / INHERIT / SET: a CREATEROLE user who made the role
    # holds ADMIN on it but may not SET ROLE to it until it grants itself membership.
    new = int(conn.execute(text("SHOW server_version_num")).scalar() or 0) >= 160000
    privilege = "SET" if new else "MEMBER"
    if not conn.execute(text(f"SELECT pg_has_role(current_user, :r, '{privilege}')"), {"r": APP_ROLE}).scalar():
        try:
            with conn.begin_nested():
                conn.exec_driver_sql(f"GRANT {APP_ROLE} TO CURRENT_USER")
        except Exception as exc:  # noqa: BLE001
            raise _fail(
                f"the user {_current_user(conn)} cannot act as {APP_ROLE} ({_reason(exc)}); as a superuser run: "
                f"GRANT {APP_ROLE} TO {_current_user(conn)}"
            ) from None


def _current_user(conn: Connection) -> str:
    return str(conn.execute(text("SELECT current_user")).scalar())


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", exc)
    return (str(orig).strip().splitlines() or [type(orig).__name__])[0]


def unforce(conn: Connection) -> None:
    """Let a migration see every tenant's rows (backfills): undone by ``secure`` in the same transaction."""
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_class c WHERE c.relkind = 'r' AND c.relforcerowsecurity "
            "AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
        )
    ).scalars()
    for name in list(rows):
        conn.exec_driver_sql(f"ALTER TABLE {quote(name)} NO FORCE ROW LEVEL SECURITY")


def secure(conn: Connection, vector_tables: list[str], namespace: int, hnsw_max_dim: int) -> None:
    """Bring the role, grants and policies to exactly what this module says (idempotent; every upgrade)."""
    ensure_role(conn)
    schema = str(conn.execute(text("SELECT current_schema()")).scalar())
    owned = (
        conn.execute(
            text(
                "SELECT c.relname FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
                "WHERE r.rolname = :r AND c.relkind IN ('r', 'p', 'v', 'm')"
            ),
            {"r": APP_ROLE},
        )
        .scalars()
        .all()
    )
    if owned:
        raise _fail(
            f"the application role {APP_ROLE} owns tables ({', '.join(sorted(owned))}); an owner bypasses "
            f"row-level security. As a superuser: REASSIGN OWNED BY {APP_ROLE} TO {_current_user(conn)}"
        )
    conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA {quote(schema)} TO {APP_ROLE}")
    conn.exec_driver_sql(f"REVOKE ALL ON ALL TABLES IN SCHEMA {quote(schema)} FROM {APP_ROLE}")
    for table, privileges in GRANTS.items():
        conn.exec_driver_sql(f"GRANT {', '.join(privileges)} ON {quote(table)} TO {APP_ROLE}")
    conn.exec_driver_sql(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {quote(schema)} TO {APP_ROLE}")
    for table in SECURED_TABLES:
        conn.exec_driver_sql(f"ALTER TABLE {quote(table)} ENABLE ROW LEVEL SECURITY")
        conn.exec_driver_sql(f"ALTER TABLE {quote(table)} FORCE ROW LEVEL SECURITY")
        existing = conn.execute(
            text("SELECT policyname FROM pg_policies WHERE schemaname = :s AND tablename = :t"),
            {"s": schema, "t": table},
        ).scalars()
        for name in list(existing):  # exactly the policies listed here, none left from an older version
            conn.exec_driver_sql(f"DROP POLICY {quote(name)} ON {quote(table)}")
    for table, name, command, using, check in POLICIES:
        sql = f"CREATE POLICY {name} ON {quote(table)} FOR {command} TO {APP_ROLE}"
        if using:
            sql += f" USING ({using})"
        if check:
            sql += f" WITH CHECK ({check})"
        conn.exec_driver_sql(sql)
    conn.exec_driver_sql(_vector_function(schema, namespace, hnsw_max_dim))
    conn.exec_driver_sql(f"REVOKE ALL ON FUNCTION {VECTOR_FUNCTION}(text, integer) FROM PUBLIC")
    conn.exec_driver_sql(f"GRANT EXECUTE ON FUNCTION {VECTOR_FUNCTION}(text, integer) TO {APP_ROLE}")
    for table in vector_tables:  # tables of earlier models: same policy and grants as a new one
        dim = conn.execute(
            text(
                "SELECT a.atttypmod FROM pg_attribute a WHERE a.attrelid = to_regclass(:t) AND a.attname = 'embedding'"
            ),
            {"t": table},
        ).scalar()
        conn.execute(text(f"SELECT {VECTOR_FUNCTION}(:t, :d)"), {"t": table, "d": int(dim)})


def remove(conn: Connection) -> None:
    """Undo ``secure`` on this schema (migration 0004's downgrade): policies, row security, function.

    The role stays: it is shared by every Cairn database of the cluster.
    """
    rows = conn.execute(text("SELECT tablename, policyname FROM pg_policies WHERE schemaname = current_schema()")).all()
    for table, name in rows:
        conn.exec_driver_sql(f"DROP POLICY {quote(name)} ON {quote(table)}")
    names = conn.execute(
        text(
            "SELECT c.relname FROM pg_class c WHERE c.relkind = 'r' AND c.relrowsecurity "
            "AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
        )
    ).scalars()
    for name in list(names):
        conn.exec_driver_sql(f"ALTER TABLE {quote(name)} NO FORCE ROW LEVEL SECURITY")
        conn.exec_driver_sql(f"ALTER TABLE {quote(name)} DISABLE ROW LEVEL SECURITY")
    conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {VECTOR_FUNCTION}(text, integer)")


def status(conn: Connection) -> dict[str, object]:
    """What `cairn db status` reports: the role's flags and how many tables are under forced RLS."""
    role = conn.execute(text("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = :r"), {"r": APP_ROLE}).first()
    rows = conn.execute(
        text(
            "SELECT relname, relrowsecurity AND relforcerowsecurity FROM pg_class WHERE relkind = 'r' "
            "AND relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
        )
    ).all()
    tables = [r for r in rows if r[0] != "alembic_version"]
    return {
        "app_role": APP_ROLE if role is not None else None,
        "app_role_bypasses": bool(role and (role[0] or role[1])),
        "tables": len(tables),
        "tables_forced": sum(1 for r in tables if r[1]),
        "unprotected": sorted(r[0] for r in tables if not r[1]),
    }
