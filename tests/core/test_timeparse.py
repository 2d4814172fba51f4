from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.core.timeparse import (
    FAKE_NOW_ENV,
    format_duration,
    format_time,
    parse_duration,
    parse_time,
    parse_ttl,
    pinned_time,
    set_clock,
    utcnow,
)
from cairn.errors import CairnError
from cairn.runtime import clock

FAKE = "2025-01-31T12:00:00Z"
FAKE_DT = datetime(2025, 1, 31, 12, 0, tzinfo=UTC)


@pytest.fixture
def fake_now(monkeypatch):
    monkeypatch.setenv(FAKE_NOW_ENV, FAKE)


def refuse_ttl(raw):
    with pytest.raises(CairnError) as info:
        parse_ttl(raw)
    assert info.value.code == "INVALID_TTL"
    return info.value


# --- durations ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("3600", timedelta(hours=1)),
        (" 15M ", timedelta(minutes=15)),
        ("7 days", timedelta(days=7)),
        ("1 second", timedelta(seconds=1)),
        ("10 minutes", timedelta(minutes=10)),
        ("365d", timedelta(days=365)),
        (3600, timedelta(hours=1)),
    ],
)
def test_parse_ttl(raw, expected):
    assert parse_ttl(raw) == expected


@pytest.mark.parametrize(
    "raw",
    ["", "abc", "1.5h", "-5s", "5y", "5 mo", "h", "1h30m", "٣d", "True", True, None, 2.5],
)
def test_parse_ttl_refuses_bad_syntax_and_lists_forms(raw):
    error = refuse_ttl(raw)
    for form in ("90s", "30m", "12h", "7d", "2w"):
        assert form in error.message
    assert "1s" in error.message
    assert "365d" in error.message


@pytest.mark.parametrize("raw", ["0", "0s", "366d", "53w", "99999999999999999999d"])
def test_parse_ttl_refuses_out_of_bounds_and_says_the_bounds(raw):
    error = refuse_ttl(raw)
    assert "between 1s and 365d" in error.message


def test_parse_duration_custom_code_and_bounds():
    with pytest.raises(CairnError) as info:
        parse_duration("5m", minimum=timedelta(hours=1), code="INVALID_INPUT")
    assert info.value.code == "INVALID_INPUT"
    assert "at least 1h" in info.value.message
    with pytest.raises(CairnError) as info:
        parse_duration("2d", maximum=timedelta(days=1))
    assert info.value.code == "INVALID_TTL"
    assert "at most 1d" in info.value.message


def test_parse_duration_unbounded():
    assert parse_duration("0") == timedelta(0)
    assert parse_duration("1000w") == timedelta(weeks=1000)


@given(st.integers(1, 365 * 86400), st.sampled_from(["s", "m", "h", "d", "w"]))
def test_parse_ttl_bounds_property(number, unit):
    seconds = number * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]
    raw = f"{number}{unit}"
    if seconds <= 365 * 86400:
        assert parse_ttl(raw) == timedelta(seconds=seconds)
    else:
        refuse_ttl(raw)


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=1), "1s"),
        (timedelta(seconds=90), "90s"),
        (timedelta(hours=2), "2h"),
        (timedelta(days=365), "365d"),
        (timedelta(0), "0s"),
        (timedelta(seconds=1.5), "1.5s"),
    ],
)
def test_format_duration(delta, text):
    assert format_duration(delta) == text


# --- parse_time -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2025-01-31", datetime(2025, 1, 31, tzinfo=UTC)),
        ("2025-01-31T12:00:00Z", FAKE_DT),
        ("2025-01-31t12:00:00z", FAKE_DT),
        ("2025-01-31T12:00:00", FAKE_DT),
        ("2025-01-31 12:00", FAKE_DT),
        ("2025-01-31T14:00:00+02:00", FAKE_DT),
        ("2025-01-31T07:00:00-05:00", FAKE_DT),
        ("2025-01-31T12:00:00.250Z", FAKE_DT.replace(microsecond=250000)),
    ],
)
def test_parse_time_iso(raw, expected):
    parsed = parse_time(raw)
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.usefixtures("fake_now")
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("now", FAKE_DT),
        (" NOW ", FAKE_DT),
        ("3d ago", FAKE_DT - timedelta(days=3)),
        ("2h ago", FAKE_DT - timedelta(hours=2)),
        ("90 minutes ago", FAKE_DT - timedelta(minutes=90)),
        ("1w ago", FAKE_DT - timedelta(weeks=1)),
    ],
)
def test_parse_time_relative(raw, expected):
    assert parse_time(raw) == expected


@pytest.mark.parametrize(
    "raw",
    ["", "yesterday", "3d", "ago", "in 3d", "3x ago", "2025-13-01", "2025-01-31T25:00", "1700000000", None],
)
def test_parse_time_refuses_with_an_example(raw):
    with pytest.raises(CairnError) as info:
        parse_time(raw)
    assert info.value.code == "INVALID_TIME"
    assert "2025-01-31" in info.value.message


def test_parse_time_refuses_overflow():
    with pytest.raises(CairnError) as info:
        parse_time("99999999w ago")
    assert info.value.code == "INVALID_TIME"
    with pytest.raises(CairnError) as info:
        parse_time("0001-01-01T00:00:00+01:00")
    assert info.value.code == "INVALID_TIME"


# --- utcnow ---------------------------------------------------------------------------------------


def test_utcnow_is_aware_utc(monkeypatch):
    monkeypatch.delenv(FAKE_NOW_ENV, raising=False)
    now = utcnow()
    assert now.tzinfo is UTC
    assert abs(now - datetime.now(UTC)) < timedelta(seconds=5)


def test_core_reads_no_environment_for_the_clock(monkeypatch):
    """Without the runtime's clock, pinning time in the environment does nothing: core reads none."""
    monkeypatch.setenv(FAKE_NOW_ENV, FAKE)
    set_clock(None)
    try:
        assert abs(utcnow() - datetime.now(UTC)) < timedelta(seconds=5)
        set_clock(lambda: FAKE_DT)
        assert utcnow() == FAKE_DT
    finally:
        clock.install()


def test_a_pinned_time_that_is_not_iso_is_a_setup_error():
    with pytest.raises(CairnError) as info:
        pinned_time("tomorrow")
    assert info.value.code == "SETUP" and FAKE_NOW_ENV in info.value.message


# --- format_time ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dt", "text"),
    [
        (FAKE_DT, "2025-01-31T12:00:00Z"),
        (FAKE_DT.replace(microsecond=123456), "2025-01-31T12:00:00.123456Z"),
        (FAKE_DT.replace(microsecond=1), "2025-01-31T12:00:00.000001Z"),
        (datetime(2025, 1, 31, 14, 0, tzinfo=timezone(timedelta(hours=2))), "2025-01-31T12:00:00Z"),
        (datetime(2025, 1, 31, 12, 0), "2025-01-31T12:00:00Z"),
    ],
)
def test_format_time(dt, text):
    assert format_time(dt) == text


@given(
    st.datetimes(
        min_value=datetime(1000, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]),
    )
)
def test_format_then_parse_round_trips(dt):
    text = format_time(dt)
    assert text.endswith("Z")
    assert parse_time(text) == dt
    assert format_time(parse_time(text)) == text
