"""Database URLs: the libpq forms a user types become the one driver URL; passwords never echo."""

from __future__ import annotations

import pytest

from cairn.errors import CairnError
from cairn.runtime.local import database_url
from cairn.store.engine import normalize_url, redact_url


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u@db.example/cairn", "postgresql+psycopg://u@db.example/cairn"),
        ("postgres://u:pw@db:5433/cairn?sslmode=require", "postgresql+psycopg://u:pw@db:5433/cairn?sslmode=require"),
        ("postgresql+psycopg://cairn@/cairn?host=/run/pg&port=5", "postgresql+psycopg://cairn@/cairn?host=/run/pg&port=5"),
        ("POSTGRESQL:///cairn", "postgresql+psycopg:///cairn"),
        # libpq reads a percent-encoded host starting with "/" as a socket directory.
        ("postgresql://%2Frun%2Fpostgresql/cairn", "postgresql+psycopg:///cairn?host=%2Frun%2Fpostgresql"),
        ("postgresql://u@%2Frun%2Fpg:5433/cairn?sslmode=disable", "postgresql+psycopg://u@/cairn?host=%2Frun%2Fpg&port=5433&sslmode=disable"),
        ("sqlite:////tmp/x/cairn.db", "sqlite:////tmp/x/cairn.db"),
    ],
)  # fmt: skip
def test_libpq_forms_become_the_psycopg_url(given: str, expected: str) -> None:
    assert normalize_url(given) == expected


def test_a_socket_directory_url_reaches_the_driver_as_a_host() -> None:
    from sqlalchemy.dialects.postgresql.psycopg import dialect
    from sqlalchemy.engine import make_url

    _, kwargs = dialect().create_connect_args(make_url(normalize_url("postgresql://%2Frun%2Fpostgresql/cairn")))
    assert kwargs == {"host": "/run/postgresql", "dbname": "cairn"}


@pytest.mark.parametrize("bad", ["mysql://u@h/db", "postgresql+psycopg2://u@h/db", "/just/a/path", "cairn.db"])
def test_other_urls_are_refused_with_the_forms_that_work(bad: str) -> None:
    with pytest.raises(CairnError) as info:
        normalize_url(bad)
    assert info.value.code == "SETUP"
    assert "postgresql://" in info.value.message


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://alice:s3cret@db/cairn",
        "postgresql://alice:s3cret@db/cairn?sslmode=require",
        "postgresql://alice@db/cairn?password=s3cret&sslmode=require",
        "postgresql://alice@db/cairn?sslmode=require&PASSWORD=s3cret",
        "postgres://alice:s3cret@%2Frun%2Fpg/cairn",
    ],
)
def test_passwords_are_redacted_wherever_they_are(url: str) -> None:
    shown = redact_url(url)
    assert "s3cret" not in shown and "alice" in shown
    with pytest.raises(CairnError) as info:
        normalize_url(url.replace("postgres", "mysql", 1))
    assert "s3cret" not in info.value.message


def test_the_database_is_the_flag_then_the_environment_then_the_home(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("CAIRN_DATABASE_URL", raising=False)
    assert database_url(tmp_path) == f"sqlite:///{tmp_path / 'cairn.db'}"
    monkeypatch.setenv("CAIRN_DATABASE_URL", "postgresql://env@db/cairn")
    assert database_url(tmp_path) == "postgresql://env@db/cairn"
    assert database_url(tmp_path, "postgresql://flag@db/cairn") == "postgresql://flag@db/cairn"
    monkeypatch.setenv("CAIRN_DATABASE_URL", "  ")
    assert database_url(tmp_path) == f"sqlite:///{tmp_path / 'cairn.db'}"
