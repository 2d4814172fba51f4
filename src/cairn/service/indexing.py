"""Search indexes kept in step with lessons inside the mutating transaction.

Every mutation calls ``sync`` with the lesson's new state and purge calls ``drop``; an index
backend (full text, vectors) registers itself here. Keeping the calls in the one mutation path
means a lesson that leaves the active set leaves every index in the same commit.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

SyncHook = Callable[[Connection, dict[str, Any], bool], None]
DropHook = Callable[[Connection, int], None]

_SYNC: list[SyncHook] = []
_DROP: list[DropHook] = []


def register(sync: SyncHook, drop: DropHook) -> None:
    if sync not in _SYNC:
        _SYNC.append(sync)
        _DROP.append(drop)


def sync(conn: Connection, row: dict[str, Any], active: bool) -> None:
    for hook in _SYNC:
        hook(conn, row, active)


def drop(conn: Connection, lesson_id: int) -> None:
    for hook in _DROP:
        hook(conn, lesson_id)


def is_active_now(row: dict[str, Any], now: datetime) -> bool:
    from cairn.service.records import status

    return status(row, now) == "active"
