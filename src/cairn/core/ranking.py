"""Pure retrieval helpers: query terms, error distillation, reciprocal rank fusion, snippets.

No I/O here: the service feeds these with what the indexes returned. Kept pure so the rules that
decide what an error "is about" can be tested on strings alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

RRF_K = 60  # Cormack et al. 2009; rank fusion is insensitive to it across a wide range

STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she should
    so some such than that the their theirs them themselves then there these they this those through to
    too under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves get got use using used make made way need want also may might must shall
    i'm it's don't can't won't isn't doesn't didn't let's via per etc e.g i.e
    """.split()
)

# Words every error message is made of; they say "something failed", not what.
ERROR_NOISE = frozenset(
    """
    error errors err exception exceptions traceback most recent call last line lines file files failed
    failure fail fatal warning warn info debug trace stack caused raised raise thrown during handling
    above occurred another process exited exit code status returned return command
    """.split()
)

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\w.~-]*[/\\])+[\w.-]*")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
# Hex ids: anything 0x-prefixed, and runs of 6+ hex digits mixing digits and letters (commit, object
# and container ids). Shorter mixes (E501, e2e, TS2345) are codes and identifiers, and stay.
_HEX = re.compile(r"\b0x[0-9a-f]+\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\b", re.I)
_TIME = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b|\b\d{2}:\d{2}:\d{2}\b"
)
_NUMBER = re.compile(r"\b\d+(?:\.\d+)*\b")
_WORD = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def words(text: str) -> list[str]:
    """Lowercased content words, in order, without stop words or trailing punctuation."""
    out = []
    for w in _WORD.findall(text):
        w = w.strip("'-").lower()
        if len(w) > 1 and w not in STOP_WORDS:
            out.append(w)
    return out


def query_terms(text: str) -> list[str]:
    """Distinct content words of a search query, in order."""
    return list(dict.fromkeys(words(text)))


def clean_error(text: str) -> str:
    """The error text with what varies between occurrences removed (paths, ids, numbers, times)."""
    text = _URL.sub(" ", text)
    text = _UUID.sub(" ", text)
    text = _TIME.sub(" ", text)
    text = _PATH.sub(lambda m: " " + _last_segment(m.group(0)) + " ", text)
    text = _HEX.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip()


def _last_segment(path: str) -> str:
    """Keep a path's file name stem (``settings.py`` → ``settings``): often the only topical word."""
    tail = re.split(r"[/\\]", path.rstrip("/\\"))[-1]
    stem = tail.split(".")[0]
    return stem if stem and not stem.isdigit() else ""


def split_identifier(token: str) -> list[str]:
    """``ModuleNotFoundError`` → module, not, found, error; ``no_such_table`` → no, such, table."""
    parts: list[str] = []
    for chunk in re.split(r"[_\-.]+", token):
        parts.extend(p.lower() for p in _CAMEL.findall(chunk))
    return [p for p in parts if len(p) > 1]


def distill(text: str, max_terms: int = 24) -> list[str]:
    """Terms that say what an error is about, most distinctive spelling first, without noise."""
    cleaned = clean_error(text)
    terms: list[str] = []
    for raw in re.findall(r"[^\W\d][\w.-]*", cleaned, re.UNICODE):
        raw = raw.strip(".-")
        candidates = [raw.lower()]
        if re.search(r"[a-z][A-Z]|[A-Z]{2}[a-z]|_", raw):  # camelCase, ACRONYMWord, snake_case
            candidates += split_identifier(raw)
        for c in candidates:
            if len(c) > 1 and c not in STOP_WORDS and c not in ERROR_NOISE and not c.isdigit():
                terms.append(c)
    return list(dict.fromkeys(terms))[:max_terms]


def rrf(arms: Sequence[Sequence[int]], k: int = RRF_K, weights: Sequence[float] | None = None) -> dict[int, float]:
    """Reciprocal rank fusion: each arm contributes weight/(k + rank) for every id it returned."""
    scores: dict[int, float] = {}
    for n, arm in enumerate(arms):
        w = 1.0 if weights is None else weights[n]
        for rank, item in enumerate(arm, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    return scores


def distinctiveness(similarities: Sequence[float], window: int = 5) -> list[float]:
    """How far each similarity (sorted high to low) stands above the next ``window`` ones.

    An unrelated query meets a flat field of middling similarities; a query a lesson answers
    meets one that stands out. Recall's relevance adds this margin to the raw cosine.
    """
    out = []
    for i, s in enumerate(similarities):
        below = similarities[i + 1 : i + 1 + window]
        out.append(s - (sum(below) / len(below)) if below else 0.0)
    return out


def snippet(value: str, terms: Iterable[str], width: int = 160) -> str:
    """A window of the value around the first query term it contains (or its start)."""
    flat = re.sub(r"\s+", " ", value).strip()
    if len(flat) <= width:
        return flat
    lower = flat.lower()
    positions = [lower.find(t) for t in terms if t and lower.find(t) >= 0]
    start = max(0, min(positions) - width // 4) if positions else 0
    start = flat.rfind(" ", 0, start) + 1 if start else 0
    piece = flat[start : start + width].rstrip()
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")
