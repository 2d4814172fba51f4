"""Shared fixtures. ``store_url`` is the seam where the Postgres backend joins the contract suite."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.core.principal import Principal, local_principal
from cairn.service.api import Cairn
from cairn.settings import Settings
from cairn.store.engine import Store, sqlite_url

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store migrated to HEAD per run; each test gets a copy (running alembic costs ~0.5 s)."""
    home = tmp_path_factory.mktemp("template")
    s = Store(sqlite_url(home))
    s.ensure_schema()
    s.dispose()  # closing the last connection checkpoints the WAL into cairn.db
    assert not (home / "cairn.db-wal").exists() or (home / "cairn.db-wal").stat().st_size == 0
    return home / "cairn.db"


@pytest.fixture(params=["sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path, migrated_sqlite: Path) -> str:
    import shutil

    shutil.copyfile(migrated_sqlite, tmp_path / "cairn.db")
    return sqlite_url(tmp_path)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store(store_url)
    s.ensure_schema()
    yield s
    s.dispose()


@pytest.fixture
def svc(store: Store) -> Cairn:
    return Cairn(store, Settings())


@pytest.fixture
def me(svc: Cairn) -> Principal:
    """The local single-user principal (an agent, no session)."""
    p = local_principal()
    svc.ensure_tenant(p)
    return p


def session(p: Principal, name: str) -> Principal:
    return Principal(p.tenant_id, p.actor, name, p.permissions, p.scope_patterns, p.human)


def human(p: Principal) -> Principal:
    return Principal(p.tenant_id, p.actor, p.session, p.permissions, p.scope_patterns, True)


@pytest.fixture
def cairn_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


def run_cli(home: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None):
    """Run the real ``cairn`` entry point in a subprocess, as a user would."""
    full_env = {**os.environ, "CAIRN_HOME": str(home), **(env or {})}
    full_env.pop("CAIRN_SESSION", None) if env is None or "CAIRN_SESSION" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        # Not the repository the suite runs from: context/recall read the cwd's git checkout.
        cwd=next(p for p in (home, *home.parents) if p.is_dir()),
        timeout=120,
    )
