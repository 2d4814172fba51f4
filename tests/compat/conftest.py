from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.compat.gateway_helpers import Result, base_env, run


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    c = tmp_path / "corpus"
    c.mkdir()
    return c


@pytest.fixture
def gw_env(tmp_path: Path) -> dict[str, str]:
    return base_env(tmp_path / "audit")


@pytest.fixture
def gw(corpus: Path, gw_env: dict[str, str]) -> Callable[..., Result]:
    def call(*args: str, body: str | None = None, **extra: str) -> Result:
        return run(corpus, *args, body=body, env={**gw_env, **extra})

    return call
