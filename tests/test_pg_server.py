"""The throwaway PostgreSQL the Postgres tests stand on: pgvector, full text, both URL forms, cleanup."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from tests.pg_server import PgServer, postgres_or_skip


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    server = postgres_or_skip(tmp_path_factory.mktemp("pg"))
    yield server
    server.stop()


def _engine(url: str) -> Engine:
    return create_engine(url)


def test_versions(pg: PgServer) -> None:
    major = int(pg.server_version.split()[1].split(".")[0])
    assert major >= 15, pg.server_version
    assert tuple(int(x) for x in pg.vector_version.split(".")[:2]) >= (0, 7), pg.vector_version


def test_socket_url_form(pg: PgServer) -> None:
    url = make_url(pg.url)
    assert url.drivername == "postgresql+psycopg"
    assert url.host is None and url.query["host"] == str(pg.socket_dir)
    assert (pg.socket_dir / f".s.PGSQL.{pg.port}").exists()
    eng = _engine(pg.url)
    try:
        with eng.connect() as c:
            who = c.execute(text("SELECT current_user, current_database(), inet_server_addr() IS NULL")).one()
        assert tuple(who) == ("cairn", "cairn", True)  # no server address: it came over the socket
    finally:
        eng.dispose()


def test_tcp_url_form(pg: PgServer) -> None:
    assert make_url(pg.tcp_url).host == "127.0.0.1"
    eng = _engine(pg.tcp_url)
    try:
        with eng.connect() as c:
            addr = c.execute(text("SELECT host(inet_server_addr()), inet_server_port()")).one()
        assert tuple(addr) == ("127.0.0.1", pg.port)
    finally:
        eng.dispose()


def test_admin_is_superuser_app_is_not(pg: PgServer) -> None:
    for url, expect in ((pg.admin_url, "on"), (pg.admin_tcp_url, "on"), (pg.url, "off")):
        eng = _engine(url)
        try:
            with eng.connect() as c:
                assert c.execute(text("SHOW is_superuser")).scalar_one() == expect, url
        finally:
            eng.dispose()


def test_pgvector_hnsw(pg: PgServer) -> None:
    eng = _engine(pg.url)
    try:
        with eng.begin() as c:
            # Already created for the cairn database; IF NOT EXISTS must not need a superuser.
            c.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
            c.execute(text("CREATE TABLE emb (id int PRIMARY KEY, v vector(384) NOT NULL)"))
            rows = []
            for i in range(50):
                v = [0.0] * 384
                v[i % 384] = 1.0
                v[(i * 7 + 1) % 384] = 0.5
                rows.append({"id": i, "v": "[" + ",".join(str(x) for x in v) + "]"})
            c.execute(text("INSERT INTO emb (id, v) VALUES (:id, CAST(:v AS vector))"), rows)
            c.execute(text("CREATE INDEX emb_hnsw ON emb USING hnsw (v vector_cosine_ops)"))
        with eng.connect() as c:
            c.execute(text("SET enable_seqscan = off"))
            q = [0.0] * 384
            q[3] = 1.0
            q[22] = 0.5
            qv = "[" + ",".join(str(x) for x in q) + "]"
            sql = "SELECT id, v <=> CAST(:q AS vector) AS d FROM emb ORDER BY v <=> CAST(:q AS vector) LIMIT 3"
            plan = "\n".join(r[0] for r in c.execute(text("EXPLAIN " + sql), {"q": qv}))
            assert "emb_hnsw" in plan, plan
            best = c.execute(text(sql), {"q": qv}).all()
        assert best[0].id == 3 and best[0].d == pytest.approx(0.0, abs=1e-6)
        assert [r.d for r in best] == sorted(r.d for r in best)
    finally:
        eng.dispose()


def test_full_text(pg: PgServer) -> None:
    eng = _engine(pg.url)
    docs = {1: "Retry the flaky database migration with a backoff", 2: "Café notes: ÉCOLE naming", 3: "unrelated text"}
    try:
        with eng.begin() as c:
            c.execute(text("CREATE TABLE doc (id int PRIMARY KEY, body text, tsv tsvector)"))
            for i, body in docs.items():
                c.execute(
                    text("INSERT INTO doc VALUES (:i, :b, to_tsvector('english', :b))"),
                    {"i": i, "b": body},
                )
            c.execute(text("CREATE INDEX doc_tsv ON doc USING gin (tsv)"))
        with eng.connect() as c:
            hits = c.execute(
                text(
                    "SELECT id, ts_rank_cd(tsv, q) AS r FROM doc, websearch_to_tsquery('english', :q) q "
                    "WHERE tsv @@ q ORDER BY r DESC"
                ),
                {"q": '"database migrations" -unrelated or retrying'},
            ).all()
            assert [h.id for h in hits] == [1] and hits[0].r > 0
            # Non-ASCII words are words, and are lower-cased (the builtin C.UTF-8 locale on PostgreSQL 17+).
            lex = c.execute(text("SELECT to_tsvector('simple', 'Café ÉCOLE')::text")).scalar_one()
            assert "'café'" in lex, lex
    finally:
        eng.dispose()


def test_create_database(pg: PgServer) -> None:
    url = pg.create_database("scratch_one")
    eng = _engine(url)
    try:
        with eng.connect() as c:
            assert c.execute(text("SELECT current_database()")).scalar_one() == "scratch_one"
            assert c.execute(text("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")).scalar_one() == 1
    finally:
        eng.dispose()
    with pytest.raises(ValueError):
        pg.create_database("Robert'); DROP")


def test_start_and_stop_clean_up(tmp_path: Path) -> None:
    """A second server of its own: stop() ends it, removes its files and is idempotent."""
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.parents}
    server = postgres_or_skip(tmp_path)
    work, data, sock, pid = server.work_dir, server.data_dir, server.socket_dir, server.pid
    assert data.is_dir() and (data / "PG_VERSION").exists() and server.running
    if os.geteuid() == 0:  # the server runs as its own OS user, which owns its data
        assert data.stat().st_uid != 0
    server.stop()
    server.stop()
    assert not server.running
    assert not data.exists() and not work.exists() and not sock.exists()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert {p: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.parents} == modes  # o+x grants undone


def test_require_all_turns_skip_into_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without usable binaries: a loud skip normally, a failure under CAIRN_REQUIRE_ALL_TESTS=1."""
    monkeypatch.setenv("CAIRN_PG_BINDIR", str(tmp_path / "nowhere"))
    monkeypatch.delenv("CAIRN_REQUIRE_ALL_TESTS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="^POSTGRES UNAVAILABLE: CAIRN_PG_BINDIR="):
        postgres_or_skip(tmp_path)
    monkeypatch.setenv("CAIRN_REQUIRE_ALL_TESTS", "1")
    with pytest.raises(pytest.fail.Exception, match="POSTGRES UNAVAILABLE: .*CAIRN_REQUIRE_ALL_TESTS=1"):
        postgres_or_skip(tmp_path)
