"""Fixtures for the service contract suite: a pinned, movable clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cairn.core.timeparse import FAKE_NOW_ENV


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """``clock("2025-01-01T00:00:00Z")`` pins ``utcnow()`` until the next call."""

    def set_now(iso: str) -> None:
        monkeypatch.setenv(FAKE_NOW_ENV, iso)

    set_now("2025-01-01T00:00:00Z")
    return set_now


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local principal reads these; a developer's shell must not change what the suite sees."""
    for name in ("CAIRN_SESSION", FAKE_NOW_ENV, "CAIRN_PROMOTION_THRESHOLD", "CAIRN_ARCHIVE_RETENTION_DAYS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CAIRN_ACTOR", "agent-a")


@pytest.fixture
def second_store(request, backend: str, tmp_path):  # type: ignore[no-untyped-def]
    """An empty store of the same backend, for round trips."""
    from cairn.store.engine import Store
    from tests.conftest import new_store_url

    s = Store(new_store_url(request, backend, tmp_path / "second"))
    s.ensure_schema()
    yield s
    s.dispose()
