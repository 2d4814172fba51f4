"""The one home and database resolver every process uses (CLI, hooks, daemon, install, doctor, library)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.runtime.home import DATABASE_ENV, HOME_ENV, database_choice, home_dir


def test_an_explicit_home_wins_over_the_environment_and_tilde_expands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv(HOME_ENV, "/elsewhere")
    assert home_dir("~/work/cairn") == "/home/someone/work/cairn"
    assert home_dir(Path("/given")) == "/given"


def test_without_a_home_the_environment_then_the_user_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv(HOME_ENV, "~/from-env")
    assert home_dir() == home_dir(None) == home_dir("") == "/home/someone/from-env"
    monkeypatch.setenv(HOME_ENV, "")  # set but empty is unset (hooks pass unset variables as "")
    assert home_dir() == "/home/someone/.cairn"
    monkeypatch.delenv(HOME_ENV)
    assert home_dir() == "/home/someone/.cairn"


def test_the_database_is_the_flag_then_the_environment_else_the_homes_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    assert database_choice(None) is None and database_choice("  ") is None
    monkeypatch.setenv(DATABASE_ENV, " postgresql://db/env ")
    assert database_choice(None) == "postgresql://db/env"
    assert database_choice(" sqlite:///flag.db ") == "sqlite:///flag.db"
    monkeypatch.setenv(DATABASE_ENV, "   ")
    assert database_choice("") is None


def test_the_local_store_opens_in_the_resolved_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cairn.open()`` with no home lands where the CLI and the hooks look: ``$CAIRN_HOME``."""
    import cairn

    monkeypatch.setenv(HOME_ENV, str(tmp_path / "h"))
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")
    with cairn.open() as memory:
        memory.write("global", "where", "The store lives in the resolved home.")
    assert (tmp_path / "h").is_dir() and any((tmp_path / "h").glob("*.db"))
