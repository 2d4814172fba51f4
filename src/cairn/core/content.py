"""Lesson values: what may be stored, and what counts as "the same content".

Content identity drives two promises: a forgotten lesson stays forgotten (the tombstone is keyed on
the content hash, whatever key it comes back under) and a repeated lesson recurs instead of being
copied. Both fail if trivial rewording escapes them, so identity ignores case, punctuation,
symbols, spacing and invisible format characters.

Two identities, from the narrow to the wide:

* ``content_hash`` — the stored hash (lessons, versions, the audit ledger, embeddings, recurrence):
  case, punctuation, spacing and format characters folded. It never changes meaning, because every
  audit row ever written records it.
* ``content_identity`` — what the tombstone check compares: additionally every Unicode
  default-ignorable code point, accents, and TR39 confusable skeletons (Cyrillic and Greek
  look-alikes, dotless i), so that forgotten content cannot come back looking the same. Storage
  keeps the text as written; only the comparison folds. It is wider than a reader would call "the
  same text" on purpose: a whole lesson that *looks* like a forgotten one is refused.
"""

from __future__ import annotations

import hashlib
import unicodedata

from cairn.core import confusables
from cairn.errors import CairnError

MAX_VALUE_BYTES = 65536
ELLIPSIS = "…"


def validate_value(text: str) -> str:
    """Return the value as it will be stored, or refuse it.

    Only trailing whitespace is removed: leading indentation and inner layout are often the lesson
    (a code block, a command). The size limit applies to the stored form, in UTF-8 bytes, because
    that is what the database and the embedding pipeline pay for.
    """
    if not isinstance(text, str):
        raise CairnError("INVALID_VALUE", f"value must be a string, not {type(text).__name__}")
    nul = text.find("\x00")
    if nul != -1:
        message = f"value contains a NUL character (at offset {nul})"
        raise CairnError("INVALID_VALUE", message, {"offset": nul})
    stored = text.rstrip()
    if not stored:
        raise CairnError("INVALID_VALUE", "value is empty" if not text else "value is only whitespace")
    try:
        size = len(stored.encode("utf-8"))
    except UnicodeEncodeError as exc:
        # Lone surrogates arrive from JSON ("\ud800"); they cannot be stored as UTF-8.
        raise CairnError(
            "INVALID_VALUE",
            f"value is not valid Unicode (unpaired surrogate at offset {exc.start})",
            {"offset": exc.start},
        ) from None
    if size > MAX_VALUE_BYTES:
        raise CairnError(
            "VALUE_TOO_LARGE",
            f"value is {size} bytes (UTF-8); the limit is {MAX_VALUE_BYTES} bytes (64 KiB)",
            {"size": size, "limit": MAX_VALUE_BYTES},
        )
    return stored


def _fold(text: str) -> str:
    if text.isascii():  # NFKC leaves ASCII as it is, and ASCII case-folds to lower case
        return text.lower()
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def _is_invisible(ch: str) -> bool:
    return not ch.isspace() and unicodedata.category(ch) in ("Cc", "Cf", "Cs")


def _is_separator(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS"


# The per-character rules below as ``str.translate`` tables over ASCII, where most lessons live:
# one C loop per value instead of a Python call per character, with the same result (each rule
# decides character by character, and the tables are computed from the rules themselves).
_ASCII_INVISIBLE = {i: None for i in range(128) if _is_invisible(chr(i))}
_ASCII_SEPARATOR = {i: " " for i in range(128) if _is_separator(chr(i))}


def _strip_invisible(text: str) -> str:
    # Format characters (zero-width space/joiner, BOM, bidi controls), non-whitespace controls and
    # surrogates are deleted outright rather than turned into spaces: inserting one inside a word
    # must not make it a different word, or a tombstone could be dodged with a U+200B.
    if text.isascii():
        return text.translate(_ASCII_INVISIBLE)
    return "".join(ch for ch in text if not _is_invisible(ch))


def _space_separators(text: str) -> str:
    # Punctuation and symbols become spaces, not nothing: "--no-cache" must read as "no cache".
    if text.isascii():
        return text.translate(_ASCII_SEPARATOR)
    return "".join(" " if _is_separator(ch) else ch for ch in text)


def _drop_accents(text: str) -> str:
    if text.isascii():  # no combining mark is ASCII
        return text
    return "".join(ch for ch in text if not confusables.is_accent(ch))


def normalize_content(text: str) -> str:
    """The form two values share when they say the same thing in trivially different ways.

    Invisible characters go before folding, not after: deleting one later could bring a base
    letter next to a combining mark that NFKC would then compose, and a stored normal form must
    be a fixed point (normalizing it again never changes it).
    """
    return " ".join(_space_separators(_fold(_strip_invisible(text))).split())


def content_hash(text: str) -> str:
    """Identity of a value's content (tombstones, recurrence), stable across rewording noise."""
    return hashlib.sha256(normalize_content(text).encode("utf-8")).hexdigest()


def identity_form(text: str) -> str:
    """The form the tombstone check compares: ``normalize_content`` widened to look-alikes.

    Default-ignorables go first (invisible, so never part of what a reader sees). Then the narrow
    normalization, then, until nothing changes: decompose, drop accents (``confusables.is_accent``
    says which marks count), map every character to its TR39 prototype, fold case and compatibility
    forms again (a prototype may be upper case: ``0`` -> ``O``). Punctuation is spaced out before
    the skeleton, as in the narrow form, so ``|`` stays a separator rather than becoming ``l``.

    Changing this function (or the pinned Unicode data behind it) changes what stored tombstone
    identities match: it needs a migration that recomputes ``tombstones.identity``, as 0005 does.
    """
    form = normalize_content(confusables.strip_ignorable(text))
    for _ in range(4):  # a fixed point is reached in one or two rounds; the bound is a guard
        decomposed = unicodedata.normalize("NFD", form)
        skeleton = unicodedata.normalize("NFD", confusables.skeleton_chars(_drop_accents(decomposed)))
        nxt = _fold(_drop_accents(skeleton))
        if nxt == form:
            break
        form = nxt
    return " ".join(_space_separators(form).split())


def content_identity(text: str) -> str:
    """Hash of ``identity_form``: what a tombstone stores besides ``content_hash``, and compares."""
    return hashlib.sha256(identity_form(text).encode("utf-8")).hexdigest()


def first_line(text: str, limit: int = 160) -> str:
    """A one-line title for listings: the first non-blank line, cut to ``limit`` characters.

    The ellipsis counts toward the limit so that callers can budget characters exactly.
    """
    if limit < 1:
        raise CairnError("INVALID_INPUT", f"first_line limit must be at least 1, got {limit}")
    line = next((candidate.strip() for candidate in text.splitlines() if candidate.strip()), "")
    if len(line) <= limit:
        return line
    return line[: limit - 1].rstrip() + ELLIPSIS
