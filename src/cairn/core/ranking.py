"""Pure retrieval helpers: query terms, error distillation, candidate features, fusion, snippets.

No I/O here: the service feeds these with what the indexes returned. Kept pure so the rules that
decide what an error "is about" can be tested on strings alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

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


_TELLING = re.compile(
    r"error|exception|err!|fatal|fail|denied|refused|panic|cannot|can't|could not|unable|not found|no such|"
    r"missing|invalid|unknown|timed? ?out|killed|abort|conflict|rejected|forbidden|unauthori[sz]ed",
    re.I,
)
_SHOUTED = re.compile(r"\b[A-Z][A-Z0-9_]{3,}\b")  # ECONNREFUSED, OOMKILLED, FATAL


def error_focus(text: str, max_chars: int = 1000) -> str:
    """What the embedding of an error should read: its telling lines, not the stack around them.

    The model reads ~256 tokens; a traceback's first frames would fill them and push the message
    out. So the cleaned lines that say what went wrong (an exception name, "error:", "denied",
    "not found", a code) come first, then the last line, and only then the rest, newest first.
    """
    lines = [ln.strip() for ln in clean_error_lines(text) if ln.strip()]
    if not lines:
        return ""
    telling = [ln for ln in lines if _TELLING.search(ln) or _SHOUTED.search(ln)]
    picked = list(dict.fromkeys([*telling[-6:], lines[-1], *reversed(lines)]))
    out = ""
    for ln in picked:
        if len(out) + len(ln) + 1 > max_chars:
            break
        out = f"{out}\n{ln}" if out else ln
    return out or lines[-1][:max_chars]


def clean_error_lines(text: str) -> list[str]:
    """``clean_error`` line by line (the line structure tells the message from the stack)."""
    return [clean_error(ln) for ln in text.splitlines()]


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


# Error codes and exception names: the words that say *which* failure it is. ``ECONNREFUSED``,
# ``EADDRINUSE``, ``ERESOLVE``; compiler/lint codes (``TS2345``, ``E0382``, ``SC2086``); exception
# and status names in CamelCase with a telling suffix (``IntegrityError``, ``CrashLoopBackOff``).
_ERRNO = re.compile(r"^E[A-Z]{3,}$")
_CODE = re.compile(r"^[A-Z]{1,4}\d{3,5}$")
_EXC = re.compile(r"^[A-Z][A-Za-z0-9]*[a-z0-9](?:Error|Exception|Warning|Fault|BackOff|Killed|Exit|Interrupt|Refused)$")
STRONG_WEIGHT = 2.0  # a strong term counts twice in the full-text arm and in coverage


_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+$|^[a-z]+[A-Z][A-Za-z0-9]*$")


def is_strong(raw: str) -> bool:
    """An error code, an exception name or a compound identifier, as written (case matters:
    ``ENOENT``, not ``enoent``): ``ECONNREFUSED``, ``IntegrityError``, ``FROB_GRACE_MS``,
    ``PluginRegistry.clear``, ``getUserById``. A lesson that holds one is about that very thing."""
    return bool(_ERRNO.match(raw) or _CODE.match(raw) or _EXC.match(raw) or _IDENT.match(raw) or raw == "OOMKilled")


def weighted_terms(text: str, *, error: bool, max_terms: int = 32) -> list[tuple[str, float]]:
    """The terms of a query or an error text with their weights, in order of appearance.

    What varies between occurrences (paths but their file stem, URLs, hashes, numbers, line numbers,
    timestamps) is dropped first (``clean_error``). An identifier is kept whole (``integrityerror``,
    ``sqlite3.operationalerror``: it matches a lesson that quotes it) and also split into its words
    (camelCase, snake_case, dotted, hyphenated: a lesson may write them apart). Error codes and
    exception names weigh ``STRONG_WEIGHT``. For error texts the boilerplate every error shares
    (``ERROR_NOISE``) goes too; a question keeps words like "error" (low weight by rarity anyway).
    """
    cleaned = clean_error(text)
    weights: dict[str, float] = {}
    for raw in re.findall(r"[^\W\d][\w.'-]*", cleaned, re.UNICODE):
        raw = raw.strip(".-'")
        if not raw:
            continue
        candidates = [(raw.lower(), STRONG_WEIGHT if is_strong(raw) else 1.0)]
        segments = [seg for seg in raw.split(".") if seg] if "." in raw else [raw]
        for seg in segments:
            if seg is not raw:
                candidates.append((seg.lower(), STRONG_WEIGHT if is_strong(seg) else 1.0))
            if re.search(r"[a-z][A-Z]|[A-Z]{2}[a-z]|_|\w-\w", seg):
                candidates += [(part, 1.0) for part in split_identifier(seg)]
        for term, weight in candidates:
            if len(term) < 2 or term in STOP_WORDS or term.isdigit() or (error and term in ERROR_NOISE):
                continue
            if term.endswith("'s"):
                term = term[:-2]
            weights[term] = max(weights.get(term, 0.0), weight)
    return list(weights.items())[:max_terms]


_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def stem(token: str) -> str:
    """A crude suffix strip, so ``locked``/``locks``/``locking`` meet ``lock`` when counting coverage."""
    for suffix in ("ing", "ies", "ied", "es", "ed", "ly", "s"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            token = token[: -len(suffix)]
            break
    return token


@lru_cache(maxsize=16384)
def text_stems(text: str) -> frozenset[str]:
    """The stems of a lesson's indexed text (key, value and tags), tokenized as the full-text index does."""
    return frozenset(stem(t) for t in _TOKEN.findall(text.lower()))


def term_present(term: str, stems: frozenset[str]) -> bool:
    """Whether every word of ``term`` (``sqlite3.operationalerror`` has two) is in the lesson."""
    parts = _TOKEN.findall(term)
    return bool(parts) and all(stem(p) in stems for p in parts)


def coverage(
    terms: Sequence[tuple[str, float]], idf: dict[str, float], stems: frozenset[str], unknown: float | None = None
) -> float:
    """IDF-and-weight-weighted share of the query's terms the lesson contains (0..1).

    Terms the store does not know (``idf`` lacks them) count with the weight ``unknown`` (the IDF of
    a term in one lesson), or are left out when it is None. Error texts leave them out: an error names
    the user's own functions and files, which no lesson can be expected to hold. A question keeps
    them: when only one of its words is in the store, a lesson holding that word covers little of it.
    """
    total = got = 0.0
    for term, weight in terms:
        w = idf.get(term) or unknown
        if not w:
            continue
        total += w * weight
        if term in idf and term_present(term, stems):
            got += w * weight
    return got / total if total else 0.0


# -- candidate features ---------------------------------------------------------------------------
# The fitted models (``cairn/search/ranker.py``) read these by name; the eval refits them when they change.
RANK_FEATURES = ("cos", "cos_gap", "bm25_rel", "coverage", "strong", "fts_rank", "vec_rank")
RELEVANCE_FEATURES = ("score", "score_gap", "cos", "distinct", "coverage", "strong", "agree", "position")


@dataclass
class Candidate:
    """What the two arms know about one lesson for one query."""

    id: int
    cos: float | None = None  # exact cosine to the query (None: no vector, or the vector arm is off)
    bm25: float | None = None  # full-text score, higher is better (None: no term matched)
    fts_rank: int | None = None  # 1-based rank in each arm (None: not returned by it)
    vec_rank: int | None = None
    coverage: float = 0.0  # core.ranking.coverage
    strong: float = 0.0  # the same over the query's strong terms only (codes, exception names, identifiers)
    score: float = 0.0  # fusion logit
    relevance: float = 0.0  # probability from the relevance model (recall)


def _inv_rank(rank: int | None) -> float:
    """1 for first place, decaying slowly (1/(1+ln r)), 0 when the arm did not return it."""
    return 1.0 / (1.0 + math.log(rank)) if rank else 0.0


def rank_rows(cands: Sequence[Candidate]) -> list[list[float]]:
    """Each candidate's ``RANK_FEATURES``, relative to the pool where a raw score has no fixed scale."""
    best_cos = max((c.cos for c in cands if c.cos is not None), default=0.0)
    best_bm25 = max((c.bm25 for c in cands if c.bm25 is not None), default=0.0)
    rows = []
    for c in cands:
        cos = c.cos if c.cos is not None else 0.0
        rows.append(
            [
                cos,
                cos - best_cos,
                (c.bm25 / best_bm25) if c.bm25 is not None and best_bm25 > 0 else 0.0,
                c.coverage,
                c.strong,
                _inv_rank(c.fts_rank),
                _inv_rank(c.vec_rank),
            ]
        )
    return rows


def relevance_rows(ranked: Sequence[Candidate], window: int = 5) -> list[list[float]]:
    """Each ranked candidate's ``RELEVANCE_FEATURES``: itself, and how it stands against the rest."""
    by_cos = sorted(range(len(ranked)), key=lambda i: -(ranked[i].cos or 0.0))
    gaps = distinctiveness([ranked[i].cos or 0.0 for i in by_cos], window)
    distinct = {i: g for i, g in zip(by_cos, gaps, strict=True)}
    rows = []
    for n, c in enumerate(ranked):
        nxt = ranked[n + 1].score if n + 1 < len(ranked) else c.score
        rows.append(
            [
                c.score,
                c.score - nxt,
                c.cos if c.cos is not None else 0.0,
                distinct[n],
                c.coverage,
                c.strong,
                min(_inv_rank(c.fts_rank), _inv_rank(c.vec_rank)),
                math.log1p(n),
            ]
        )
    return rows


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
