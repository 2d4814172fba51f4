# ruff: noqa: S608 - table names come from vec_table() (a fixed slug), every value is a bound parameter.
"""The search indexes' SQL, for both databases: full text and vectors.

* **SQLite**: an FTS5 table (``lesson_fts``, rowid = lesson id, BM25) and a sqlite-vec ``vec0`` table
  per embedding model and dimension (binary-quantized, Hamming distance).
* **Postgres**: a ``lesson_fts`` table (lesson id → weighted ``tsvector``, GIN index, ranked by
  ``ts_rank`` with the same field weights as BM25's) and a pgvector table per model and dimension
  (full-precision vectors, HNSW index, cosine distance). Migration 0002 says why each looks so.

Both arms take the tenant and the scope list as predicates *inside* their query — the FTS arm joins
``lessons`` with the active predicate, the vector arm filters on tenant, scope, trust and expiry
inside the KNN — so a result outside the caller's tenant or scopes is never produced, rather than
produced and dropped. The functions here are the whole contract; the service never sees which
database answers.

Full-text queries are :class:`FtsQuery` trees built from *terms* (``fts_phrase``, ``fts_all``,
``fts_any``), never from a user's query syntax; each database compiles the tree into its own syntax,
quoting every term.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.engine import Connection

from cairn.store.predicates import active_sql

NO_EXPIRY = 2**62  # vec0 metadata cannot be NULL-compared; "never expires" is far in the future.
BM25_WEIGHTS = (2.0, 1.0, 1.5)  # key, value, tags: a key hit says more than a hit in the body
# Postgres: ts_rank's weights for the labels {D, C, B, A}; key = A, tags = B, value = D, the same
# ratios as BM25_WEIGHTS (C is unused).
_PG_WEIGHTS = "{{{1:g},{1:g},{2:g},{0:g}}}".format(*(w / BM25_WEIGHTS[0] for w in BM25_WEIGHTS))
PG_FTS_CONFIG = "cairn_fts"  # created by migration 0002: the default parser + an English stemmer, no stop words
PG_MAX_NAME = 63  # bytes in a Postgres identifier
HNSW_MAX_DIM = 2000  # pgvector indexes `vector` columns up to 2,000 dimensions with HNSW


def vec_table(model: str, dim: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")
    name = f"vec_{slug}_{dim}"
    if len(name) > PG_MAX_NAME - 5:
        # Postgres truncates identifiers at 63 bytes (and its indexes add "_hnsw", "_tsc"): a long model
        # name keeps a readable prefix and a hash of the whole, so two models never share a table.
        import hashlib

        digest = hashlib.sha256(name.encode()).hexdigest()[:10]
        name = f"{name[: PG_MAX_NAME - 5 - 11]}_{digest}"
    return name


def _pg(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


# -- full-text queries ------------------------------------------------------------------------


@dataclass(frozen=True)
class FtsQuery:
    """A full-text query: a quoted phrase, or every / any of several sub-queries."""

    op: str  # "phrase" | "and" | "or"
    term: str = ""
    parts: tuple[FtsQuery, ...] = ()


def fts_phrase(term: str) -> FtsQuery:
    """One term, matched literally (no operator in it is ever read as query syntax)."""
    return FtsQuery("phrase", term=term)


def fts_all(parts: list[FtsQuery]) -> FtsQuery:
    return FtsQuery("and", parts=tuple(parts))


def fts_any(parts: list[FtsQuery]) -> FtsQuery:
    return FtsQuery("or", parts=tuple(parts))


def _fts5(q: FtsQuery) -> str:
    """FTS5 syntax: phrases are double-quoted strings (a quote inside doubled)."""
    if q.op == "phrase":
        return '"' + q.term.replace('"', '""') + '"'
    joined = (" AND " if q.op == "and" else " OR ").join(_fts5(p) for p in q.parts)
    return f"({joined})" if len(q.parts) > 1 else joined


def _tsquery(q: FtsQuery) -> str | None:
    """``to_tsquery`` syntax, or None when the query can match nothing.

    A phrase is reduced to its words (the same folding the documents get, ``_fts_words``), each
    single-quoted and joined by ``<->`` (adjacent, as an FTS5 phrase); what is left of user input
    is letters and digits, so nothing in it can be an operator.
    """
    if q.op == "phrase":
        words = _fts_words(q.term).split()
        if not words:
            return None
        return "(" + " <-> ".join("'" + w.replace("'", "''") + "'" for w in words) + ")"
    parts = [_tsquery(p) for p in q.parts]
    if q.op == "and":
        if not parts or any(p is None for p in parts):
            return None
        return "(" + " & ".join(parts) + ")"  # type: ignore[arg-type]
    live = [p for p in parts if p is not None]
    return "(" + " | ".join(live) + ")" if live else None


_NON_WORD = re.compile(r"[\W_]+")


def _fts_words(value: str) -> str:
    """Text as the Postgres index sees it: lower case, diacritics removed, words separated by spaces.

    This mirrors FTS5's ``unicode61 remove_diacritics 2`` tokenizer: every run of characters that
    are not letters or digits separates tokens. Left to itself Postgres' parser would keep
    ``sqlite3.OperationalError`` or ``v1.4`` as one "host"/"file" token, and a document that
    writes the words apart would not match. Folding case here (not in the database) keeps it
    independent of the database's collation.
    """
    value = value.lower()
    if not value.isascii():
        value = "".join(c for c in unicodedata.normalize("NFKD", value) if not unicodedata.combining(c))
    return _NON_WORD.sub(" ", value).strip()


# -- full text --------------------------------------------------------------------------------


_FTS_DELETE = text("DELETE FROM lesson_fts WHERE rowid = :id")
_FTS_INSERT = text("INSERT INTO lesson_fts(rowid, key, value, tags) VALUES (:id, :key, :value, :tags)")
_PG_FTS_DELETE = text("DELETE FROM lesson_fts WHERE lesson_id = :id")
_PG_FTS_INSERT = text(
    "INSERT INTO lesson_fts(lesson_id, tenant_id, doc) VALUES (:id, :tenant, "
    f"setweight(to_tsvector('{PG_FTS_CONFIG}', :key), 'A') || "
    f"setweight(to_tsvector('{PG_FTS_CONFIG}', :value), 'D') || "
    f"setweight(to_tsvector('{PG_FTS_CONFIG}', :tags), 'B'))"
)


def fts_put(conn: Connection, row: dict[str, Any]) -> None:
    fts_drop(conn, row["id"])
    fts_insert_many(conn, [row])


def fts_insert_many(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Index lessons that are not in the index yet (fresh creates)."""
    if _pg(conn):
        params = []
        for r in rows:
            p = _fts_params(r)
            params.append(
                {
                    "id": p["id"],
                    "tenant": r["tenant_id"],
                    "key": _fts_words(p["key"]),
                    "value": _fts_words(p["value"]),
                    "tags": _fts_words(p["tags"]),
                }
            )
        conn.execute(_PG_FTS_INSERT, params)
        return
    conn.execute(_FTS_INSERT, [_fts_params(r) for r in rows])


def _fts_params(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "key": row["key"].replace("-", " ").replace("::", " "),
        "value": row["value"],
        "tags": " ".join(json.loads(row["tags"])),
    }


def fts_drop(conn: Connection, lesson_id: int) -> None:
    conn.execute(_PG_FTS_DELETE if _pg(conn) else _FTS_DELETE, {"id": lesson_id})


def fts_has(conn: Connection, lesson_id: int) -> bool:
    sql = "SELECT 1 FROM lesson_fts WHERE " + ("lesson_id" if _pg(conn) else "rowid") + " = :id"
    return conn.execute(text(sql), {"id": lesson_id}).first() is not None


def fts_present(conn: Connection, lesson_ids: list[int]) -> set[int]:
    """Which of ``lesson_ids`` are in the full-text index (the active set), in one query.

    FTS5 answers ``rowid IN (...)`` with one rowid lookup per value, not a scan.
    """
    if not lesson_ids:
        return set()
    return set(conn.execute(_PG_FTS_PRESENT if _pg(conn) else _FTS_PRESENT, {"ids": lesson_ids}).scalars())


_FTS_PRESENT = text("SELECT rowid FROM lesson_fts WHERE rowid IN :ids").bindparams(bindparam("ids", expanding=True))
_PG_FTS_PRESENT = text("SELECT lesson_id FROM lesson_fts WHERE lesson_id IN :ids").bindparams(
    bindparam("ids", expanding=True)
)


def fts_ids(conn: Connection) -> list[int]:
    """Every lesson id in the full-text index (all tenants), for checks and tests."""
    sql = "SELECT lesson_id FROM lesson_fts" if _pg(conn) else "SELECT rowid FROM lesson_fts"
    return list(conn.execute(text(sql)).scalars())


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


# The active predicate (store/predicates.py) rendered over ``l``, inside the arm's own query.
_ACTIVE_SQL = " AND l.tenant_id = :tenant AND " + active_sql("l", "now")


def fts_search(
    conn: Connection,
    tenant_id: str,
    match: FtsQuery,
    scopes: list[str] | None,
    now: datetime,
    limit: int,
    trust: str | None = None,
    tag: str | None = None,
) -> list[tuple[int, float]]:
    """Lesson ids and relevance scores (higher is better) for a full-text query, best first."""
    params: dict[str, Any] = {"tenant": tenant_id, "now": now.replace(tzinfo=None), "limit": limit}
    if _pg(conn):
        tsq = _tsquery(match)
        if tsq is None:
            return []
        params["match"] = tsq
        # ts_rank (term frequency, field weights, length-normalized by log length: flag 1) is the
        # closest Postgres has to BM25; ts_rank_cd would reward term proximity instead.
        sql = (
            f"SELECT l.id, ts_rank('{_PG_WEIGHTS}'::float4[], f.doc, q.q, 1) AS score "
            f"FROM to_tsquery('{PG_FTS_CONFIG}', :match) AS q(q) "
            "JOIN lesson_fts f ON f.doc @@ q.q JOIN lessons l ON l.id = f.lesson_id "
            "WHERE f.tenant_id = :tenant"
        )
        order = " ORDER BY score DESC, l.id LIMIT :limit"
    else:
        params["match"] = _fts5(match)
        # CROSS JOIN fixes the join order: the MATCH drives and each hit looks its lesson up by primary key.
        # With a plain JOIN the planner walked every lesson of the tenant (ix_lessons_tenant_archived) and
        # evaluated the MATCH once per lesson: linear in the store instead of in the matches.
        sql = (
            f"SELECT l.id, -bm25(lesson_fts, {_BM25_ARGS}) AS score FROM lesson_fts CROSS JOIN lessons l "
            "ON l.id = lesson_fts.rowid WHERE lesson_fts MATCH :match"
        )
        order = " ORDER BY score DESC, l.id LIMIT :limit"
    filters = _ACTIVE_SQL + _scope_sql(scopes, params, "l.scope")
    if trust:
        filters += " AND l.trust = :trust"
        params["trust"] = trust
    filters += _tag_sql(tag, params, "l.id")
    if not _pg(conn):
        best = _fts_best_first(conn, filters, params, limit)
        if best is not None:
            return best
    return [(r[0], float(r[1])) for r in conn.execute(text(sql + filters + order), params)]


_BM25_ARGS = ", ".join(str(x) for x in BM25_WEIGHTS)
_FTS_TOP = text(
    f"SELECT rowid, -bm25(lesson_fts, {_BM25_ARGS}) AS score FROM lesson_fts WHERE lesson_fts MATCH :match "
    "ORDER BY score DESC, rowid LIMIT :depth"
)
# How deep the index alone is read before the filters are asked (a multiple of the limit), and the
# deepest such read: below that many eligible hits, the joined query answers instead.
_FTS_TOP_FACTOR = 4
_FTS_TOP_MAX = 2000


def _fts_best_first(
    conn: Connection, filters: str, params: dict[str, Any], limit: int
) -> list[tuple[int, float]] | None:
    """``fts_search``'s answer from the index's best matches, filtered afterwards; None: not found so.

    The joined query looks every match up in ``lessons`` (tenant, active, scope, trust, tag) before
    it sorts: at 100,000 lessons an OR of a query's terms matches thousands of rows, and those
    look-ups are most of the arm's time. Here FTS5 ranks its matches alone and only the best
    ``depth`` are asked, by primary key, whether they pass the same filters (``filters``, the joined
    query's own conditions on ``l``). The order is the same (score, then id), so whenever at least
    ``limit`` of them pass — or the index had no more — the answer is the joined query's; otherwise
    (a narrow scope, another tenant's lessons on top) the joined query runs.
    """
    depth = max(limit * _FTS_TOP_FACTOR, 200)
    while depth <= _FTS_TOP_MAX:
        hits = conn.execute(_FTS_TOP, {"match": params["match"], "depth": depth}).all()
        if not hits:
            return []
        # CROSS JOIN from the id list: each id looked up by primary key (an ``IN`` list beside the
        # tenant condition made SQLite walk the tenant's whole index instead).
        passing = text(
            "SELECT l.id FROM json_each(:ids) AS j CROSS JOIN lessons l ON l.id = j.value WHERE 1 = 1" + filters
        )
        keep = {r[0] for r in conn.execute(passing, {**params, "ids": json.dumps([h[0] for h in hits])})}
        found = [(h[0], float(h[1])) for h in hits if h[0] in keep]
        if len(found) >= limit or len(hits) < depth:
            return found[:limit]
        depth *= 8
    return None


def _match_sql(conn: Connection) -> tuple[str, str]:
    """(id column, predicate on :m) of a term query against the full-text index."""
    if _pg(conn):
        return "lesson_id", f"doc @@ to_tsquery('{PG_FTS_CONFIG}', :m)"
    return "rowid", "lesson_fts MATCH :m"


def _term_param(conn: Connection, term: str) -> str | None:
    q = fts_phrase(term)
    return _tsquery(q) if _pg(conn) else _fts5(q)


def doc_frequencies(conn: Connection, terms: list[str], cap: int | None = None) -> tuple[dict[str, int], int]:
    """Per-term document counts and the number of indexed lessons, for rarity weighting.

    Counting through the index runs each term through the same tokenizer (and stemmer) as the
    index, so the weights always describe the tokens the full-text arm will actually match. With
    ``cap`` a count stops there (reading a common term's whole doclist costs milliseconds at
    100,000 lessons); a term at the cap is "at least that common", which is all rarity needs.
    """
    # SQLite: count the FTS5 table's docsize shadow table (one narrow row per document): counting
    # the virtual table itself reads every document.
    total_sql = "SELECT count(*) FROM lesson_fts" if _pg(conn) else "SELECT count(*) FROM lesson_fts_docsize"
    total = int(conn.execute(text(total_sql)).scalar_one())
    column, predicate = _match_sql(conn)
    sql = f"SELECT count(*) FROM lesson_fts WHERE {predicate}"
    if cap is not None:
        sql = f"SELECT count(*) FROM (SELECT {column} FROM lesson_fts WHERE {predicate} LIMIT :cap) AS capped"
    out: dict[str, int] = {}
    for term in terms:
        m = _term_param(conn, term)
        out[term] = 0 if m is None else int(conn.execute(text(sql), {"m": m, "cap": cap}).scalar_one())
    return out, total


def fts_rowids(conn: Connection, term: str, among: list[int] | None = None) -> list[int]:
    """Every lesson id (of every tenant: callers intersect with their own) whose text has ``term``;
    with ``among``, only those of these ids (a few changed lessons, looked up by id).

    No ranking function runs: reading a doclist is several times cheaper per match than ``bm25()``,
    which is what lets context weigh terms over a million lessons (``service/context.py``).
    """
    m = _term_param(conn, term)
    if m is None or (among is not None and not among):
        return []
    column, predicate = _match_sql(conn)
    if among is None:
        sql = text(f"SELECT {column} FROM lesson_fts WHERE {predicate}")
        return [r[0] for r in conn.execute(sql, {"m": m}).all()]
    sql = text(f"SELECT {column} FROM lesson_fts WHERE {predicate} AND {column} IN :ids").bindparams(
        bindparam("ids", expanding=True)
    )
    return [r[0] for r in conn.execute(sql, {"m": m, "ids": among}).all()]


# -- vectors ----------------------------------------------------------------------------------


def vec_ensure(conn: Connection, model: str, dim: int) -> str:
    """The vector table of ``model`` at ``dim``, created on first use (its name depends on the model)."""
    name = vec_table(model, dim)
    if not _pg(conn):
        conn.execute(
            text(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0("
                "lesson_id INTEGER PRIMARY KEY, tenant_id TEXT PARTITION KEY, scope TEXT, trust TEXT, "
                f"expires INTEGER, embedding BIT[{dim}])"
            )
        )
        return name
    if conn.execute(text("SELECT to_regclass(:n)"), {"n": name}).scalar() is not None:
        return name
    # Requests run as the application role, which may not create tables (it would own them and
    # bypass row-level security): the one SECURITY DEFINER function of store/rls.py creates it, with
    # its policy and grants. Writers of two tenants reaching a new model queue on the schema lock.
    conn.execute(text("SELECT cairn_vector_table(:n, :d)"), {"n": name, "d": dim})
    return name


def vec_tables(conn: Connection) -> list[str]:
    if _pg(conn):
        rows = conn.execute(
            text(
                "SELECT c.relname FROM pg_class c "
                "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'embedding' AND NOT a.attisdropped "
                "JOIN pg_type t ON t.oid = a.atttypid AND t.typname = 'vector' "
                "WHERE c.relkind = 'r' AND c.relname LIKE 'vec\\_%' "
                "AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) "
                "ORDER BY c.relname"
            )
        )
        return [r[0] for r in rows]
    rows = conn.execute(
        text("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%vec0%'")
    )
    return [r[0] for r in rows]


def _vector_literal(blob: bytes) -> str:
    """pgvector's text form of a float32 vector (each value printed exactly; pgvector reads it back
    bit for bit)."""
    import numpy as np

    return "[" + ",".join(map(repr, np.frombuffer(blob, dtype="<f4").tolist())) + "]"


def vec_put(conn: Connection, table: str, row: dict[str, Any], blob: bytes) -> None:
    vec_put_many(conn, table, [(row, blob)])


def vec_put_many(conn: Connection, table: str, items: list[tuple[dict[str, Any], bytes]]) -> None:
    """Write (or replace) the vectors of several lessons: ``(lesson row, float32 blob)`` pairs.

    One prepared DELETE and one prepared INSERT run over the whole list (executemany): the drain's
    per-lesson statements, each compiled and sent on its own, cost more than the rows themselves.
    The DELETE stays keyed on one id per row: vec0 looks a primary key up only for ``=`` (an IN
    list scans the table).
    """
    if not items:
        return
    if _pg(conn):
        embedding = "CAST(:emb AS vector)"
        params = [_vec_params(row, _vector_literal(blob)) for row, blob in items]
    else:
        embedding = "vec_quantize_binary(:emb)"
        params = [_vec_params(row, blob) for row, blob in items]
    conn.execute(text(f"DELETE FROM {table} WHERE lesson_id = :id"), [{"id": p["id"]} for p in params])
    conn.execute(
        text(
            f"INSERT INTO {table}(lesson_id, tenant_id, scope, trust, expires, embedding) "
            f"VALUES (:id, :tenant, :scope, :trust, :expires, {embedding})"
        ),
        params,
    )


def _vec_params(row: dict[str, Any], emb: bytes | str) -> dict[str, Any]:
    expires = int(row["expires_at"].timestamp()) if row["expires_at"] else NO_EXPIRY
    return {
        "id": row["id"],
        "tenant": row["tenant_id"],
        "scope": row["scope"],
        "trust": row["trust"],
        "expires": expires,
        "emb": emb,
    }


def vec_drop(conn: Connection, lesson_id: int) -> None:
    for table in vec_tables(conn):
        conn.execute(text(f"DELETE FROM {table} WHERE lesson_id = :id"), {"id": lesson_id})


def float_vectors(conn: Connection, model: str, ids: list[int]) -> dict[int, bytes]:
    """The exact float32 vectors of ``ids`` made with ``model`` (for re-ranking and relevance)."""
    if not ids:
        return {}
    return {r[0]: bytes(r[1]) for r in conn.execute(_FLOAT_VECTORS, {"model": model, "ids": ids})}


# Built once: parsing a statement with a placeholder per id cost more than reading the vectors.
_FLOAT_VECTORS = text(
    "SELECT lesson_id, vector FROM lesson_embeddings WHERE model = :model AND lesson_id IN :ids"
).bindparams(bindparam("ids", expanding=True))


def vec_refresh(conn: Connection, table: str, row: dict[str, Any]) -> None:
    """Update the filter columns of an existing vector without re-embedding."""
    expires = int(row["expires_at"].timestamp()) if row["expires_at"] else NO_EXPIRY
    conn.execute(
        text(f"UPDATE {table} SET scope = :scope, trust = :trust, expires = :expires WHERE lesson_id = :id"),
        {"id": row["id"], "scope": row["scope"], "trust": row["trust"], "expires": expires},
    )


def vec_drop_table(conn: Connection, table: str) -> None:
    """Drop a vector table no tenant uses. Not on Postgres: a request sees one tenant's rows only
    (row-level security), so it cannot know the table is unused, and it may not drop tables."""
    if not _pg(conn):
        conn.exec_driver_sql(f'DROP TABLE "{table}"')
