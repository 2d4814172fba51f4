# ruff: noqa: S608 - table names come from vec_table() (a fixed slug), every value is a bound parameter.
"""The search indexes' SQL: FTS5 full text and sqlite-vec vectors (Postgres: tsvector/pgvector later).

Both arms take the tenant and the scope list as predicates *inside* their query — the FTS arm joins
``lessons`` with the active predicate, the vector arm filters on the vec0 partition key (tenant)
and metadata columns (scope, trust, expiry) inside the KNN — so a result outside the caller's
tenant or scopes is never produced, rather than produced and dropped.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

NO_EXPIRY = 2**62  # vec0 metadata cannot be NULL-compared; "never expires" is far in the future.
BM25_WEIGHTS = (2.0, 1.0, 1.5)  # key, value, tags: a key hit says more than a hit in the body


def vec_table(model: str, dim: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")
    return f"vec_{slug}_{dim}"


# -- full text ------------------------------------------------------------------------------


_FTS_DELETE = text("DELETE FROM lesson_fts WHERE rowid = :id")
_FTS_INSERT = text("INSERT INTO lesson_fts(rowid, key, value, tags) VALUES (:id, :key, :value, :tags)")


def fts_put(conn: Connection, row: dict[str, Any]) -> None:
    fts_drop(conn, row["id"])
    conn.execute(_FTS_INSERT, _fts_params(row))


def fts_insert_many(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Index lessons that are not in the index yet (fresh creates)."""
    conn.execute(_FTS_INSERT, [_fts_params(r) for r in rows])


def _fts_params(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "key": row["key"].replace("-", " ").replace("::", " "),
        "value": row["value"],
        "tags": " ".join(json.loads(row["tags"])),
    }


def fts_drop(conn: Connection, lesson_id: int) -> None:
    conn.execute(_FTS_DELETE, {"id": lesson_id})


def fts_has(conn: Connection, lesson_id: int) -> bool:
    return conn.execute(text("SELECT 1 FROM lesson_fts WHERE rowid = :id"), {"id": lesson_id}).first() is not None


def _scope_sql(scopes: list[str] | None, params: dict[str, Any], column: str) -> str:
    if scopes is None:
        return ""
    names = []
    for i, scope in enumerate(scopes):
        params[f"scope{i}"] = scope
        names.append(f":scope{i}")
    return f" AND {column} IN ({', '.join(names) or 'NULL'})"


def _tag_sql(tag: str | None, params: dict[str, Any], column: str) -> str:
    """The tag predicate, inside the arm: filtering after the arm's LIMIT lost every tagged lesson
    ranked below the cut-off (a tag filter in a large store could return nothing)."""
    if not tag:
        return ""
    params["tag"] = tag
    return f" AND {column} IN (SELECT lesson_id FROM lesson_tags WHERE tenant_id = :tenant AND tag = :tag)"


def fts_search(
    conn: Connection,
    tenant_id: str,
    match: str,
    scopes: list[str] | None,
    now: datetime,
    limit: int,
    trust: str | None = None,
    tag: str | None = None,
) -> list[tuple[int, float]]:
    """Lesson ids and BM25 scores (higher is better) for an FTS5 MATCH expression."""
    params: dict[str, Any] = {"match": match, "tenant": tenant_id, "now": now.replace(tzinfo=None), "limit": limit}
    w = ", ".join(str(x) for x in BM25_WEIGHTS)
    # CROSS JOIN fixes the join order: the MATCH drives and each hit looks its lesson up by primary key.
    # With a plain JOIN the planner walked every lesson of the tenant (ix_lessons_tenant_archived) and
    # evaluated the MATCH once per lesson: 0.8 s instead of 6 ms at 5,000 lessons, linear in the store.
    sql = (
        f"SELECT l.id, -bm25(lesson_fts, {w}) AS score FROM lesson_fts CROSS JOIN lessons l "
        "ON l.id = lesson_fts.rowid "
        "WHERE lesson_fts MATCH :match AND l.tenant_id = :tenant AND l.trust != 'rejected' "
        "AND l.archived_at IS NULL AND l.superseded_by IS NULL AND (l.expires_at IS NULL OR l.expires_at > :now)"
        + _scope_sql(scopes, params, "l.scope")
    )
    if trust:
        sql += " AND l.trust = :trust"
        params["trust"] = trust
    sql += _tag_sql(tag, params, "l.id")
    sql += " ORDER BY score DESC LIMIT :limit"
    return [(r[0], float(r[1])) for r in conn.execute(text(sql), params)]


def doc_frequencies(conn: Connection, terms: list[str]) -> tuple[dict[str, int], int]:
    """Per-term document counts and the number of indexed lessons, for rarity weighting.

    Counting through MATCH runs each term through the same tokenizer (and stemmer) as the
    index, so the weights always describe the tokens the full-text arm will actually match.
    """
    total = int(conn.execute(text("SELECT count(*) FROM lesson_fts")).scalar_one())
    out: dict[str, int] = {}
    for term in terms:
        out[term] = int(
            conn.execute(
                text("SELECT count(*) FROM lesson_fts WHERE lesson_fts MATCH :m"), {"m": fts_phrase(term)}
            ).scalar_one()
        )
    return out, total


def fts_rowids(conn: Connection, term: str) -> list[int]:
    """Every lesson id (of every tenant: callers intersect with their own) whose text has ``term``.

    No ranking function runs: reading a doclist costs ~0.5 µs a match against ~3 µs for ``bm25()``,
    which is what lets context weigh terms over a million lessons (``service/context.py``).
    """
    sql = text("SELECT rowid FROM lesson_fts WHERE lesson_fts MATCH :m")
    return list(conn.execute(sql, {"m": fts_phrase(term)}).scalars())


def fts_phrase(term: str) -> str:
    """Quote a term as an FTS5 string so no user input is read as query syntax."""
    return '"' + term.replace('"', '""') + '"'


# -- vectors ----------------------------------------------------------------------------------


def vec_ensure(conn: Connection, model: str, dim: int) -> str:
    name = vec_table(model, dim)
    conn.execute(
        text(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0("
            "lesson_id INTEGER PRIMARY KEY, tenant_id TEXT PARTITION KEY, scope TEXT, trust TEXT, "
            f"expires INTEGER, embedding BIT[{dim}])"
        )
    )
    return name


def vec_tables(conn: Connection) -> list[str]:
    rows = conn.execute(
        text("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%vec0%'")
    )
    return [r[0] for r in rows]


def vec_put(conn: Connection, table: str, row: dict[str, Any], blob: bytes) -> None:
    conn.execute(text(f"DELETE FROM {table} WHERE lesson_id = :id"), {"id": row["id"]})
    expires = int(row["expires_at"].timestamp()) if row["expires_at"] else NO_EXPIRY
    conn.execute(
        text(
            f"INSERT INTO {table}(lesson_id, tenant_id, scope, trust, expires, embedding) "
            "VALUES (:id, :tenant, :scope, :trust, :expires, vec_quantize_binary(:emb))"
        ),
        {
            "id": row["id"],
            "tenant": row["tenant_id"],
            "scope": row["scope"],
            "trust": row["trust"],
            "expires": expires,
            "emb": blob,
        },
    )


def vec_drop(conn: Connection, lesson_id: int) -> None:
    for table in vec_tables(conn):
        conn.execute(text(f"DELETE FROM {table} WHERE lesson_id = :id"), {"id": lesson_id})


def vec_search(
    conn: Connection,
    table: str,
    tenant_id: str,
    query: bytes,
    scopes: list[str] | None,
    now: datetime,
    k: int,
    trust: str | None = None,
    tag: str | None = None,
) -> list[int]:
    """Lesson ids nearest to ``query`` by Hamming distance on the binary-quantized index."""
    params: dict[str, Any] = {"q": query, "k": k, "tenant": tenant_id, "now": int(now.timestamp())}
    sql = (
        f"SELECT lesson_id FROM {table} WHERE embedding MATCH vec_quantize_binary(:q) AND k = :k "
        "AND tenant_id = :tenant AND expires > :now" + _scope_sql(scopes, params, "scope")
    )
    if trust:
        sql += " AND trust = :trust"
        params["trust"] = trust
    sql += _tag_sql(tag, params, "lesson_id")  # sqlite-vec applies a rowid IN (...) inside the KNN
    return [r[0] for r in conn.execute(text(sql), params)]


def float_vectors(conn: Connection, model: str, ids: list[int]) -> dict[int, bytes]:
    """The exact float32 vectors of ``ids`` made with ``model`` (for re-ranking and relevance)."""
    if not ids:
        return {}
    params: dict[str, Any] = {f"i{n}": i for n, i in enumerate(ids)}
    params["model"] = model
    marks = ", ".join(f":i{n}" for n in range(len(ids)))
    sql = f"SELECT lesson_id, vector FROM lesson_embeddings WHERE model = :model AND lesson_id IN ({marks})"
    return {r[0]: bytes(r[1]) for r in conn.execute(text(sql), params)}


def vec_refresh(conn: Connection, table: str, row: dict[str, Any]) -> None:
    """Update the filter columns of an existing vector without re-embedding."""
    expires = int(row["expires_at"].timestamp()) if row["expires_at"] else NO_EXPIRY
    conn.execute(
        text(f"UPDATE {table} SET scope = :scope, trust = :trust, expires = :expires WHERE lesson_id = :id"),
        {"id": row["id"], "scope": row["scope"], "trust": row["trust"], "expires": expires},
    )
