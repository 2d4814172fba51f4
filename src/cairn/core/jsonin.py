"""Untrusted JSON in: one parser with one set of bounds for every path that reads JSON from outside.

Python's ``json`` recurses once per nesting level (a deep document raises ``RecursionError``, which
no caller expects), turns a 5,000-digit integer into a ``ValueError`` about integer conversion, and
reads ``1e999`` as infinity and ``NaN`` as a number. No Cairn record needs any of that, so every
surface (API bodies, import lines, MCP arguments, the daemon's socket) parses through :func:`loads`
and refuses such input as ``INVALID_INPUT`` with the reason, the same way everywhere.
"""

from __future__ import annotations

import json

from cairn.errors import CairnError

TYPE_CHECKING = False  # not typing's: the daemon client imports this module in every hook process
if TYPE_CHECKING:
    from typing import Any

# The deepest record Cairn reads (an export line: lesson -> versions -> one version -> tags) is 4 levels.
MAX_DEPTH = 32
# Ids and counters fit in 19 digits (a 64-bit integer); a float's text is at most ~25 characters.
MAX_NUMBER_CHARS = 40


class _Refused(ValueError):
    """Raised from the decoder's hooks; turned into the caller's CairnError by :func:`loads`."""


def _number(text: str, kind: type) -> Any:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number is longer than {MAX_NUMBER_CHARS} characters")
    value = kind(text)
    if kind is float and value in (float("inf"), float("-inf")):
        raise _Refused(f"the number {text} is out of range")
    return value


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _int(text: str) -> int:
    return _number(text, int)  # type: ignore[no-any-return]


def _float(text: str) -> float:
    return _number(text, float)  # type: ignore[no-any-return]


_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


def loads(data: str | bytes, what: str = "the body") -> Any:
    """Parse ``data`` (bytes must be UTF-8) or raise ``INVALID_INPUT`` naming ``what`` and the reason."""
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CairnError("INVALID_INPUT", f"{what} is not UTF-8 text (byte {exc.start})") from None
    try:
        value = _DECODER.decode(data)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno} column {exc.colno}" if exc.lineno > 1 else f"column {exc.colno}"
        raise CairnError("INVALID_INPUT", f"{what} is not valid JSON ({exc.msg} at {at})") from None
    except _Refused as exc:
        raise CairnError("INVALID_INPUT", f"{what}: {exc}", {"max_number_chars": MAX_NUMBER_CHARS}) from None
    except RecursionError:
        value = None  # deeper than the interpreter allows: certainly over the bound
        depth = MAX_DEPTH + 1
    else:
        # A document with fewer brackets than the bound cannot be deeper: skip the walk (the usual case).
        depth = 0 if data.count("[") + data.count("{") <= MAX_DEPTH else nesting(value)
    if depth > MAX_DEPTH:
        raise CairnError("INVALID_INPUT", f"{what} is nested deeper than {MAX_DEPTH} levels", {"max_depth": MAX_DEPTH})
    return value


def check(value: Any, what: str = "the arguments") -> Any:
    """The same bounds for a value another parser already read (the MCP SDK parses its own messages)."""
    if nesting(value) > MAX_DEPTH:
        raise CairnError("INVALID_INPUT", f"{what} are nested deeper than {MAX_DEPTH} levels", {"max_depth": MAX_DEPTH})
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, bool):
            continue
        elif isinstance(node, int) and node.bit_length() > 3.33 * MAX_NUMBER_CHARS:  # ~bits of that many digits
            raise CairnError("INVALID_INPUT", f"{what}: a number is longer than {MAX_NUMBER_CHARS} characters")
        elif isinstance(node, float) and (node != node or node in (float("inf"), float("-inf"))):
            raise CairnError("INVALID_INPUT", f"{what}: a number is not finite")
    return value


def nesting(value: Any) -> int:
    """How deep ``value`` nests lists and objects (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_DEPTH:
                return deepest
        stack.extend((child, depth) for child in children)
    return deepest
