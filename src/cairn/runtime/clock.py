"""The clock every process installs: the system's, unless ``CAIRN_FAKE_NOW`` pins it.

``CAIRN_FAKE_NOW`` (ISO 8601) is read on every call, so a test can move time forward without
reloading anything, and a command forwarded to the daemon runs at its caller's pinned time (the
daemon swaps in the caller's environment). Installed by the CLI's entry point, by every local
opening of a store and by the test suite; ``core/timeparse.utcnow`` then reads it.
"""

from __future__ import annotations

import os
from datetime import datetime

from cairn.core.timeparse import FAKE_NOW_ENV, pinned_time, set_clock, system_now


def env_now() -> datetime:
    fake = os.environ.get(FAKE_NOW_ENV, "").strip()
    return pinned_time(fake) if fake else system_now()


def install() -> None:
    set_clock(env_now)
