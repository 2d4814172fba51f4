"""Durations, times and the one clock.

Every timestamp Cairn stores or compares is timezone-aware UTC: bi-temporal reads compare record
time and valid time across machines, and a naive datetime silently means "whatever this host's
zone is". Parsing therefore always ends in aware UTC, and formatting always says ``Z``.

``utcnow`` is the only clock, so that tests (and the negative evals) can pin time and exercise
expiry without sleeping. Which clock it reads is the runtime's choice (``runtime/clock.py`` installs
one that honours ``CAIRN_FAKE_NOW``); core itself reads no environment.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from cairn.errors import CairnError

FAKE_NOW_ENV = "CAIRN_FAKE_NOW"  # read by runtime/clock.py, named here for the tests and the daemon
TTL_MINIMUM = timedelta(seconds=1)
TTL_MAXIMUM = timedelta(days=365)

_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_UNIT_ALIASES = {
    **{alias: "s" for alias in ("s", "sec", "secs", "second", "seconds")},
    **{alias: "m" for alias in ("m", "min", "mins", "minute", "minutes")},
    **{alias: "h" for alias in ("h", "hr", "hrs", "hour", "hours")},
    **{alias: "d" for alias in ("d", "day", "days")},
    **{alias: "w" for alias in ("w", "wk", "wks", "week", "weeks")},
}
# ASCII digits only: int() would also accept other scripts' digits, which no one means here.
_DURATION_RE = re.compile(r"([0-9]+)\s*([a-z]*)", re.ASCII)
_AGO_RE = re.compile(r"(.+?)\s+ago", re.ASCII)
ACCEPTED_DURATIONS = "90s, 30m, 12h, 7d, 2w, or a bare number of seconds such as 3600"
ACCEPTED_TIMES = '"2025-01-31", "2025-01-31T12:00:00Z", "2025-01-31T12:00:00+02:00", "now" or "3d ago"'


def format_duration(delta: timedelta) -> str:
    """Render a duration in the largest unit that divides it, so messages echo the accepted syntax."""
    total = delta.total_seconds()
    seconds = int(total)
    if seconds != total:
        return f"{total:g}s"
    for unit in ("d", "h", "m"):
        size = _UNIT_SECONDS[unit]
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _quote(text: str, limit: int = 40) -> str:
    """Echo user input in a message, bounded and with control characters escaped."""
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    escaped = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in shown)
    return f'"{escaped}"'


def _bounds_text(minimum: timedelta | None, maximum: timedelta | None) -> str:
    if minimum is not None and maximum is not None:
        return f"; it must be between {format_duration(minimum)} and {format_duration(maximum)}"
    if minimum is not None:
        return f"; it must be at least {format_duration(minimum)}"
    if maximum is not None:
        return f"; it must be at most {format_duration(maximum)}"
    return ""


def _parse_delta(text: str) -> timedelta | None:
    match = _DURATION_RE.fullmatch(text.strip().lower())
    if match is None:
        return None
    unit = _UNIT_ALIASES.get(match.group(2) or "s")
    if unit is None:
        return None
    try:
        return timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[unit])
    except OverflowError:
        return None


def parse_duration(
    raw: str | int,
    *,
    minimum: timedelta | None = None,
    maximum: timedelta | None = None,
    code: str = "INVALID_TTL",
) -> timedelta:
    """Parse a whole-number duration; refusals list the accepted forms and the bounds.

    Whole numbers only, and ``m`` is always minutes (never months): a TTL is the wrong place for
    ambiguity. An int is accepted as seconds because JSON callers send one.
    """
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    bounds = _bounds_text(minimum, maximum)
    data = {
        "value": raw,
        "minimum_seconds": None if minimum is None else minimum.total_seconds(),
        "maximum_seconds": None if maximum is None else maximum.total_seconds(),
    }
    delta = _parse_delta(raw) if isinstance(raw, str) else None
    if delta is None:
        shown = _quote(raw) if isinstance(raw, str) else f"of type {type(raw).__name__}"
        raise CairnError(code, f"invalid duration {shown}: use {ACCEPTED_DURATIONS}{bounds}", data)
    if minimum is not None and delta < minimum:
        raise CairnError(code, f"duration {format_duration(delta)} is too short{bounds}", data)
    if maximum is not None and delta > maximum:
        raise CairnError(code, f"duration {format_duration(delta)} is too long{bounds}", data)
    return delta


def parse_ttl(raw: str | int) -> timedelta:
    """A lesson's time to live: at least a second (zero would mean "already gone"), at most a year."""
    return parse_duration(raw, minimum=TTL_MINIMUM, maximum=TTL_MAXIMUM, code="INVALID_TTL")


def _parse_iso(text: str) -> datetime | None:
    """ISO 8601 to aware UTC; a naive value is taken as UTC, never as the host's local zone."""
    try:
        parsed = datetime.fromisoformat(text.upper())
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        return None


def parse_time(raw: str) -> datetime:
    """Parse a user-supplied point in time (for "as of" reads and validity bounds) to aware UTC."""
    text = raw.strip() if isinstance(raw, str) else ""
    lowered = text.lower()
    if lowered == "now":
        return utcnow()
    ago = _AGO_RE.fullmatch(lowered)
    if ago is not None:
        delta = _parse_delta(ago.group(1))
        if delta is not None:
            try:
                return utcnow() - delta
            except OverflowError:
                pass
    elif text:
        parsed = _parse_iso(text)
        if parsed is not None:
            return parsed
    shown = _quote(text) if isinstance(raw, str) else f"of type {type(raw).__name__}"
    raise CairnError(
        "INVALID_TIME",
        f"invalid time {shown}: use ISO 8601 or a relative time, e.g. {ACCEPTED_TIMES}",
        {"value": raw},
    )


def system_now() -> datetime:
    return datetime.now(UTC)


_clock: Callable[[], datetime] = system_now


def set_clock(clock: Callable[[], datetime] | None) -> None:
    """Make ``clock`` the one ``utcnow`` reads (None: the system clock)."""
    global _clock
    _clock = clock or system_now


def utcnow() -> datetime:
    """The current time, aware UTC, from the installed clock."""
    return _clock()


def pinned_time(text: str, source: str = FAKE_NOW_ENV) -> datetime:
    """A pinned clock's time: ISO 8601, aware UTC; anything else is a setup error naming ``source``."""
    parsed = _parse_iso(text)
    if parsed is None:
        raise CairnError("SETUP", f"{source}={_quote(text)} is not an ISO 8601 time (e.g. 2025-01-31T12:00:00Z)")
    return parsed


def format_time(dt: datetime) -> str:
    """ISO 8601 in UTC with ``Z``; microseconds only when present, so whole seconds stay short."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"
