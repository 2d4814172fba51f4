"""The clock the runtime installs: the system's, pinned by ``CAIRN_FAKE_NOW`` read on every call."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cairn.core.timeparse import FAKE_NOW_ENV, utcnow
from cairn.errors import CairnError

FAKE = "2025-01-31T12:00:00Z"
FAKE_DT = datetime(2025, 1, 31, 12, 0, tzinfo=UTC)


def test_utcnow_fake_is_read_on_every_call(monkeypatch):
    monkeypatch.setenv(FAKE_NOW_ENV, FAKE)
    assert utcnow() == FAKE_DT
    monkeypatch.setenv(FAKE_NOW_ENV, "2025-02-01T00:00:00+01:00")
    assert utcnow() == datetime(2025, 1, 31, 23, 0, tzinfo=UTC)
    monkeypatch.setenv(FAKE_NOW_ENV, "2025-03-01")
    assert utcnow() == datetime(2025, 3, 1, tzinfo=UTC)


def test_utcnow_bad_fake_is_a_setup_error(monkeypatch):
    monkeypatch.setenv(FAKE_NOW_ENV, "tomorrow")
    with pytest.raises(CairnError) as info:
        utcnow()
    assert info.value.code == "SETUP"
