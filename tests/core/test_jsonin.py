"""The one bounded JSON parser: what it refuses (with INVALID_INPUT) and what it keeps exact."""

from __future__ import annotations

import pytest

from cairn.core.jsonin import MAX_DEPTH, MAX_NUMBER_CHARS, loads, nesting
from cairn.errors import CairnError


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"deeper than {MAX_DEPTH}"),
        ("[" * 200_000, f"deeper than {MAX_DEPTH}"),  # would raise RecursionError in json.loads
        ('{"a": ' * 50 + "1" + "}" * 50, f"deeper than {MAX_DEPTH}"),
        ("1" * (MAX_NUMBER_CHARS + 1), "longer than"),
        ("9" * 5000, "longer than"),  # json.loads raises a ValueError about integer conversion
        ("1e999", "out of range"),
        ("[-1e999]", "out of range"),
        ("NaN", "not a JSON number"),
        ('{"x": Infinity}', "not a JSON number"),
        ('{"x": ', "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_refused_with_invalid_input_and_the_reason(text: str | bytes, says: str) -> None:
    with pytest.raises(CairnError) as info:
        loads(text, "the line")
    assert info.value.code == "INVALID_INPUT"
    assert says in info.value.message and info.value.message.startswith("the line")


def test_within_the_bounds_the_value_is_exact() -> None:
    at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert nesting(loads(at_limit)) == MAX_DEPTH
    assert loads('{"id": 9223372036854775807, "f": -1.5e10, "s": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}') == {
        "id": 2**63 - 1,
        "f": -1.5e10,
        "s": "[" * 36,  # brackets inside a string are text, not nesting
    }
    assert loads(b'{"v": "caf\xc3\xa9"}') == {"v": "café"}


def test_nesting_counts_without_recursion() -> None:
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert nesting(deep) > MAX_DEPTH  # stops early, and never hits the recursion limit
    assert nesting(5) == 0 and nesting({"a": [1, {"b": []}]}) == 4
