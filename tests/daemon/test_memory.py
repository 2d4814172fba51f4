"""The daemon hands freed heap back to the system (``cairn.daemon.memory``)."""

from __future__ import annotations

import ctypes.util
import platform
from pathlib import Path

import pytest

from cairn.daemon.memory import trim_heap

glibc_linux = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or not ctypes.util.find_library("c"),
    reason="malloc_trim is glibc's",
)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@glibc_linux
def test_trim_returns_freed_heap_below_a_live_block() -> None:
    # 60 MB of malloc'd blocks (over pymalloc's 512-byte limit), the last kept alive: free() alone
    # cannot shrink the heap past it, so the freed pages stay resident until the trim.
    blocks = [bytes(1000) + bytes([i % 256]) for i in range(60_000)]
    keep = blocks[-1]
    del blocks
    before = _rss_mb()
    assert trim_heap() is True
    assert before - _rss_mb() > 20
    assert keep[-1] == 59_999 % 256


def test_trim_with_nothing_to_free_is_harmless() -> None:
    trim_heap()
    assert isinstance(trim_heap(), bool)
