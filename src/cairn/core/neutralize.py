"""Stored text on its way to a person's terminal or an agent's context: shown, never obeyed.

Lesson values, keys of tombstones, reasons, actors and error messages that echo input are written
by anyone with a write token (or a webhook). Printed raw they could act on the reader:

- on a terminal, ESC/CSI/OSC sequences move the cursor, erase lines, retitle the window or plant
  hyperlinks; C1 controls do the same on terminals that honour 8-bit controls; a carriage return
  or backspaces overwrite what was printed; bidirectional overrides and isolates reorder what a
  person reads (``for_terminal``);
- in the fenced block an agent reads at session start or after a failure, text that imitates the
  fence (``<<<``/``>>>``, in ASCII or look-alike characters) or the header (``Cairn:``) could
  appear to close the block of data and speak as Cairn (``for_block``).

Both show the offending characters as visible escapes (``\\x1b``, ``\\u202e``) rather than dropping
them, so a reader can tell something was there. A literal backslash is left as it is: doubling it
would mangle every Windows path and regex in a lesson, and an escape that reads like one is
harmless — what matters is that no raw control character is ever printed.

Pure: no I/O. ``--json`` output does not pass through here: JSON escapes control characters itself
and must stay exact.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# Bidirectional formatting characters (Unicode UAX #9): embeddings/overrides U+202A-202E, isolates
# U+2066-2069, the marks LRM/RLM/ALM. Listed by their standard ranges, all of them.
BIDI_CONTROLS = "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
# C0 except tab and newline (layout a person expects), DEL, C1; line/paragraph separators (a
# terminal or an editor may break the line there); lone surrogates (cannot be encoded at all).
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}\ud800-\udfff]")


def escape_char(ch: str) -> str:
    """The visible, ASCII-only spelling of one character: ``\\x1b``, ``\\u202e``, ``\\U0001f600``."""
    o = ord(ch)
    if o < 0x100:
        return f"\\x{o:02x}"
    if o < 0x10000:
        return f"\\u{o:04x}"
    return f"\\U{o:08x}"


def for_terminal(text: str) -> str:
    """``text`` with every control and bidi character shown escaped; newlines and tabs kept.

    Rich markup (``[bold]``, ``[link=…]``) needs no treatment: human output is written to the
    stream as plain text, never through a markup renderer.
    """
    return _UNSAFE.sub(lambda m: escape_char(m.group()), text)


# -- the fenced block ------------------------------------------------------------------------------

# Characters that look like an angle bracket are recognised from Unicode's own data rather than a
# hand-typed table: a character whose compatibility form (NFKC) is made of ``<``/``>`` (fullwidth
# U+FF1C, small U+FE64, …); whose TR39 confusable prototype is (Canadian syllabics U+1438, runic
# U+16B2, U+2039, U+02C2, …: ``core/confusables.py``); or whose name says it is one (angle brackets
# U+3008/U+27E8/U+2329, angle quotation marks U+00AB/U+276E, the less-than/greater-than family
# U+226A/U+22D8). The count is how many angles it shows (« is two). The header word is matched on
# the same skeleton, so Cyrillic ``Саirn:`` reads as ``cairn:``.
_LEFT_NAME = re.compile(r"LESS-THAN|LEFT(?:-POINTING)?(?: DOUBLE| WHITE| HEAVY| MEDIUM| SINGLE)* ANGLE|LEFT ARROWHEAD")
_RIGHT_NAME = re.compile(
    r"GREATER-THAN|RIGHT(?:-POINTING)?(?: DOUBLE| WHITE| HEAVY| MEDIUM| SINGLE)* ANGLE|RIGHT ARROWHEAD"
)
FENCE_RUN = 3  # angles in a row (spaces between allowed) that read as a fence marker
_HEADER = re.compile(r"cairn\s*:")


@lru_cache(maxsize=4096)
def angles(ch: str) -> int:
    """How many fence angles ``ch`` shows: 1 for ``<`` and its look-alikes, 2 for ``«``/``≪``, else 0."""
    if ch in "<>":
        return 1
    if ch.isascii():
        return 0
    folded = unicodedata.normalize("NFKC", ch)
    if folded and folded.strip("<>") == "":
        return len(folded)
    proto = _prototype(ch)
    if proto != ch and proto and proto.strip("<>") == "":
        return len(proto)
    name = unicodedata.name(ch, "")
    if not (_LEFT_NAME.search(name) or _RIGHT_NAME.search(name)):
        return 0
    if "VERY MUCH" in name or "TRIPLE" in name:
        return 3
    return 2 if ("DOUBLE" in name or "MUCH" in name) else 1


def _prototype(ch: str) -> str:
    """``ch``'s TR39 confusable prototype (Cyrillic ``С`` -> ``C``), or ``ch``.

    The table is read on first use, and only for characters beyond Latin-1: none of those maps to
    an angle bracket, a colon or a letter of ``cairn``, and the hook path should not pay for loading
    it because a lesson says ``café``. Without the data (a broken install) the block still renders,
    with the NFKC and name rules alone.
    """
    if ord(ch) <= 0xFF:
        return ch
    from cairn.core import confusables
    from cairn.errors import CairnError

    try:
        return confusables.prototype(ch)
    except CairnError:
        return ch


@lru_cache(maxsize=4096)
def _fold(ch: str) -> str:
    """One character's compatibility, case-folded, confusable skeleton (``Ｃ``, Cyrillic ``С`` -> ``c``)."""
    if ch.isascii():
        return ch.lower()
    folded = unicodedata.normalize("NFKC", ch).casefold()
    return "".join(unicodedata.normalize("NFKC", _prototype(c)).casefold() for c in folded)


def for_block(text: str) -> str:
    """One line of the fenced block: no line break, no control, nothing that reads as fence or header.

    - every line break (``\\n``, ``\\r``, U+2028, U+0085, …) and run of spaces becomes one space, so
      a lesson stays on its own line, which starts with ``- (scope)`` — never with ``<<<`` or
      ``Cairn:``;
    - controls and bidi characters are escaped (as for the terminal);
    - a run of ``FENCE_RUN`` or more angles (``<<<``, ``> > >``, ``＜＜＜``, ``‹‹‹``, ``«<``),
      mixed and spaced any way, is escaped whole (``\\x3c\\x3c\\x3c``); one or two stay as
      written (``a < b``, ``List<T>``, ``2>&1``, ``>> log``);
    - ``Cairn:`` (any case, fullwidth too) has its colon escaped, so no sentence reads as the header.
    """
    flat = " ".join(text.split())
    plain = flat.isascii()
    if plain and "<" not in flat and ">" not in flat and "cairn" not in flat.lower():
        return for_terminal(flat)
    chars = list(flat)
    _escape_fence_runs(chars)
    folded = [c.lower() for c in chars] if plain else [_fold(c) for c in chars]
    if "cairn" in "".join(folded):
        _escape_header(chars, folded)
    return for_terminal("".join(chars))


def _escape_fence_runs(chars: list[str]) -> None:
    i, n = 0, len(chars)
    while i < n:
        if not angles(chars[i]):
            i += 1
            continue
        members, total, j = [], 0, i
        while j < n and (angles(chars[j]) or (chars[j] == " " and j + 1 < n and angles(chars[j + 1]))):
            if chars[j] != " ":
                members.append(j)
                total += angles(chars[j])
            j += 1
        if total >= FENCE_RUN:
            for k in members:
                chars[k] = escape_char(chars[k])
        i = j


def _escape_header(chars: list[str], folded: list[str]) -> None:
    # Map positions of the folded string back to the characters they came from.
    joined, origin = [], []
    for idx, f in enumerate(folded):
        joined.append(f)
        origin.extend([idx] * len(f))
    for m in _HEADER.finditer("".join(joined)):
        colon = origin[m.end() - 1]
        if not chars[colon].startswith("\\"):
            chars[colon] = escape_char(chars[colon])
