"""Opaque page cursors for list operations: where the last page ended, not how many rows it skipped.

An offset moves when rows are written between two pages (a busy store gets duplicates and gaps);
a keyset position does not: the next page starts strictly after the last row shown, in the list's
own order. The cursor is that position (the sort key and the row id, the tie-breaker) with the
list's name, as URL-safe base64 JSON. It is not a secret and not signed: a forged cursor can only
move the start of a list the caller may already read, and every row still passes the tenancy and
scope checks of the query it is fed into.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any

from cairn.errors import CairnError

MAX_CURSOR = 512
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"  # what encode produces: URL-safe base64 without padding


def encode(kind: str, *position: Any) -> str:
    """A cursor after ``position`` in list ``kind``; datetimes travel as integer microseconds."""
    values = [_micros(v) if isinstance(v, datetime) else v for v in position]
    raw = json.dumps([kind, values], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(kind: str, cursor: str, shape: tuple[type, ...]) -> list[Any]:
    """The position in ``cursor``, typed by ``shape`` (``datetime`` / ``int`` / ``str`` per value).

    A cursor of another list, a truncated one or any other string is INVALID_INPUT with the remedy:
    cursors come from ``next_cursor`` of the same list, and the first page needs none.
    """
    hint = f"not a cursor of this list ({kind}): pass the next_cursor this list returned, or none for the first page"
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR:
        raise CairnError("INVALID_INPUT", f"cursor is {hint}")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        got_kind, values = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, TypeError, binascii.Error, UnicodeError):
        raise CairnError("INVALID_INPUT", f"cursor is {hint}") from None
    if got_kind != kind or not isinstance(values, list) or len(values) != len(shape):
        raise CairnError("INVALID_INPUT", f"cursor is {hint}")
    out: list[Any] = []
    for value, typ in zip(values, shape, strict=True):
        if typ is datetime:
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**62:
                raise CairnError("INVALID_INPUT", f"cursor is {hint}")
            out.append(datetime.fromtimestamp(0, UTC) + _delta(value))
        elif typ is int:
            if not isinstance(value, int) or isinstance(value, bool) or not -(2**62) <= value < 2**62:
                raise CairnError("INVALID_INPUT", f"cursor is {hint}")
            out.append(value)
        else:
            if not isinstance(value, str) or len(value) > 300:
                raise CairnError("INVALID_INPUT", f"cursor is {hint}")
            out.append(value)
    return out


def _micros(dt: datetime) -> int:
    delta = dt.astimezone(UTC) - datetime.fromtimestamp(0, UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _delta(micros: int):  # type: ignore[no-untyped-def]
    from datetime import timedelta

    try:
        return timedelta(microseconds=micros)
    except OverflowError:
        raise CairnError("INVALID_INPUT", "cursor is out of range") from None
