"""Key normalization: the identity half of a lesson's address.

Agents spell the same key many ways (``My Key``, ``my-key``, ``MY  KEY!``); if those were distinct
addresses, a lesson would fork into near-copies instead of recurring. So a key is reduced to its
letters and digits (of any script) joined by ``-``. A single leading ``{word}::`` namespace
survives, because buckets such as ``loop::`` are given their own budget when context is built.
"""

from __future__ import annotations

import unicodedata

from cairn.errors import CairnError

MAX_KEY_CHARS = 200
NAMESPACE_SEPARATOR = "::"


def _error(raw: object, message: str) -> CairnError:
    return CairnError("INVALID_KEY", message, {"key": raw})


def _is_word_char(ch: str) -> bool:
    # Marks (M*) stay: many scripts (Devanagari, Thai, ...) spell words with combining signs, and
    # splitting there would turn one word into several.
    return ch.isalnum() or unicodedata.category(ch).startswith("M")


def _slug(text: str) -> str:
    """Letters, digits and marks kept; every other run becomes one ``-``; ends trimmed."""
    out: list[str] = []
    pending_dash = False
    for ch in text:
        if _is_word_char(ch):
            if pending_dash and out:
                out.append("-")
            pending_dash = False
            out.append(ch)
        else:
            pending_dash = True
    return "".join(out)


def _fold(text: str) -> str:
    # NFKC on both sides of casefold: folding can produce sequences that NFKC would rewrite, and
    # the result must be a fixed point so that normalizing a stored key never changes it.
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def normalize_key(raw: str) -> str:
    """Return the identity form of a key, or refuse one that cannot name anything.

    ``casefold`` rather than ``lower`` so that keys differing only by case in any script (``ß``/``SS``)
    are one address.
    """
    if not isinstance(raw, str):
        raise _error(raw, f"key must be a string, not {type(raw).__name__}")
    if len(raw) > MAX_KEY_CHARS:
        raise _error(raw, f"key is {len(raw)} characters; the limit is {MAX_KEY_CHARS}")
    folded = _fold(raw)
    namespace, sep, body = folded.partition(NAMESPACE_SEPARATOR)
    if not sep:
        namespace, body = "", folded
    elif NAMESPACE_SEPARATOR in body:
        raise _error(raw, 'a key may have only one namespace prefix (as in "loop::name")')
    else:
        namespace = _slug(namespace)
        if not namespace:
            raise _error(raw, 'the namespace before "::" must contain a letter or digit')
    slug = _slug(body)
    if not slug:
        where = " after the namespace" if sep else ""
        raise _error(raw, f"key must contain a letter or digit{where}")
    key = f"{namespace}{NAMESPACE_SEPARATOR}{slug}" if sep else slug
    if len(key) > MAX_KEY_CHARS:
        # Compatibility forms can expand (one ligature becomes many letters); the stored key is bounded.
        raise _error(raw, f"key is {len(key)} characters once normalized; the limit is {MAX_KEY_CHARS}")
    return key
