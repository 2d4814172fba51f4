"""When two lessons say the same thing, when they disagree, and when a write repeats forgotten content.

Three decisions, each made from the two texts and the cosine of their embeddings (the caller embeds;
this module does no I/O):

* :func:`is_near_duplicate` — consolidation may merge the two. A wrong merge archives a real lesson,
  so the rule asks for a high cosine *and* shared wording, and refuses any pair whose texts disagree
  (a negation, an antonym, a different number): "use X" and "never use X" embed almost identically.
* :func:`is_contradiction` — the two are about the same thing and disagree: consolidation links them
  with ``contradicts`` and puts both in the review queue. Nothing is resolved automatically, so a
  false flag costs a reviewer a look.
* :func:`is_tombstone_paraphrase` — a write resembles forgotten content: it is held for review
  instead of stored. A miss lets forgotten content back into every read; a false hold costs a
  reviewer's click. A write that *negates* the forgotten content is not a repeat of it.

How two texts "disagree" (:func:`disagreement`) is a documented heuristic, checked in this order:

1. **Preference swapped** — "X instead of Y" / "X rather than Y" / "prefer X over Y" in one text and
   the same two terms the other way round in the other.
2. **Order swapped** — "A before B" in one text and "B before A" (or "A after B") in the other;
   "A before B" and "B after A" agree.
3. **Negation** — the texts hold different numbers of negations (not, never, no, don't, avoid,
   without, ...) and one negates a term the other asserts. A term a text both negates and asserts
   ("is not set ... set it") is ambiguous and ignored; two texts with as many negations each are
   taken to rephrase the same prohibition ("don't run pip as root" / "run pip, not as root").
4. **Antonyms** — one text uses a word of a pair in :data:`ANTONYMS` (enable/disable, always/never,
   allow/deny, ...) and the other uses its opposite without the first.
5. **Numbers** — both texts carry numbers or versions and each has one the other lacks (a timeout of
   30 s against 60 s, Node 18 against Node 20). Dates, times and identifiers (``#123``, ``INC-30401``,
   ``run 22968``, ``incident 4312``) are not counted: two notes of one lesson differ in those. Paraphrases keep their
   numbers; this counts for merges and contradictions but not for tombstones (a forgotten secret with
   one digit changed is still held).

Each text's features (stems, polarity, relations, numbers) are computed once and cached
(:data:`FEATURE_CACHE` texts), since a planner asks about each lesson in many pairs.

The thresholds below are cosines of Cairn's shipped embedder (``cairn.search.embed``), fitted on the
dev halves of the labelled pair sets in ``evals/similarity/`` by ``python evals/similarity/calibrate.py``
(which says how each operating point is chosen); the precision and recall they give on the test
halves are in ``evals/similarity/README.md``. Change them only by re-running that script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from cairn.core.ranking import STOP_WORDS, stem

__all__ = [
    "ANTONYMS",
    "CONTRADICTION_COSINE",
    "MERGE_COSINE",
    "MERGE_OVERLAP",
    "MIN_COSINE",
    "NEGATIONS",
    "PARAPHRASE_COSINE",
    "Disagreement",
    "disagreement",
    "is_contradiction",
    "is_near_duplicate",
    "is_tombstone_paraphrase",
    "judge",
    "lexical_overlap",
    "negated",
    "tokens",
]

#: Cosine at or above which two lessons may be merged (with :data:`MERGE_OVERLAP` and no disagreement).
MERGE_COSINE = 0.8
#: Share of content words (Jaccard of stems) two mergeable lessons must have in common.
MERGE_OVERLAP = 0.15
#: Cosine at or above which two disagreeing lessons are flagged as contradicting each other.
CONTRADICTION_COSINE = 0.71
#: Cosine at or above which a write is held as a paraphrase of a forgotten lesson (unless it negates it).
PARAPHRASE_COSINE = 0.66
#: The lowest cosine at which a consolidation rule (merge or contradiction) can hold: a neighbour
#: search may drop every pair below it without asking.
MIN_COSINE = min(MERGE_COSINE, CONTRADICTION_COSINE)

#: Words that negate what follows them in their clause.
NEGATIONS = frozenset(
    """
    not no never nor none neither cannot without avoid don't doesn't didn't isn't aren't wasn't weren't
    won't can't couldn't shouldn't mustn't needn't dont doesnt didnt isnt arent wasnt wont cant shouldnt
    """.split()
)

#: Pairs of words whose swap turns a lesson into its opposite. Stems are compared (``enabled`` is
#: ``enable``), so list each pair once in its plain form.
ANTONYMS: tuple[tuple[str, str], ...] = (
    ("enable", "disable"),
    ("always", "never"),
    ("allow", "deny"),
    ("allow", "block"),
    ("accept", "reject"),
    ("add", "remove"),
    ("install", "uninstall"),
    ("include", "exclude"),
    ("increase", "decrease"),
    ("raise", "lower"),
    ("true", "false"),
    ("on", "off"),
    ("yes", "no"),
    ("public", "private"),
    ("sync", "async"),
    ("synchronous", "asynchronous"),
    ("lock", "unlock"),
    ("mount", "unmount"),
    ("encrypt", "decrypt"),
    ("required", "optional"),
    ("safe", "unsafe"),
    ("secure", "insecure"),
    ("upper", "lower"),
    ("min", "max"),
    ("minimum", "maximum"),
    ("first", "last"),
    ("start", "stop"),
    ("open", "close"),
    ("inside", "outside"),
    ("local", "global"),
    ("strict", "lenient"),
    ("succeed", "fail"),
    ("works", "breaks"),
)

_CLAUSE = re.compile(r"[.;:!?](?=\s|$)|\n|,\s*(?:but|however|so|then|otherwise)\b|\bbut\b|\bhowever\b|\botherwise\b")
_TOKEN = re.compile(r"[^\W_][\w'’.-]*[^\W_]|[^\W_]", re.UNICODE)
_NUMBER = re.compile(r"(?<![\w.])v?(\d+(?:\.\d+)*)(?:[a-z]{1,3})?(?![\w])", re.I)
#: Words that a negation in front of turns back into an instruction ("don't forget", "never fail to").
_CANCELS = frozenset({"forget", "fail", "miss", "hesitate"})
#: How many content words after a negation it reaches.
_NEGATION_REACH = 2
#: Phrases whose left side is preferred over their right side.
_PREFER = re.compile(r"\b(?:instead\s+of|rather\s+than|in\s+place\s+of|over)\b")
_ORDER = re.compile(r"\b(?:before|after)\b")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?|\b\d{1,2}:\d{2}(?::\d{2})?\b")
_TICKET = re.compile(r"\b[A-Za-z]{2,10}-$")  # INC-30401, PROJ-42: a tracker's id, not a setting
_ID_BEFORE = re.compile(
    r"\b(?:run|incident|issue|pr|ticket|build|job|line|pid|commit|case|order|request|session)\s*#?\s*$", re.I
)


@dataclass(frozen=True, slots=True)
class Disagreement:
    """Why two similar texts disagree: ``kind`` is one of preference, order, negation, antonym,
    number; ``detail`` names the words or numbers involved (for a plan's reason line)."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@lru_cache(maxsize=1 << 16)
def _stem(token: str) -> str:
    """ranking's crude stem, then a final ``e`` dropped (``cache``/``caches``, ``base``/``based``) and a
    doubled final consonant undoubled (``tagging``/``tag``, ``committed``/``commit``)."""
    s = stem(token)
    if len(s) > 3 and s.endswith("e"):
        return s[:-1]
    if len(s) > 3 and s[-1] == s[-2] and s[-1] not in "aeiouls":
        return s[:-1]
    return s


def _norm_token(token: str) -> str:
    return token.lower().replace("’", "'").strip("'.-")


def _content(tokens: list[str]) -> list[str]:
    return [_stem(t) for t in tokens if len(t) > 1 and t not in STOP_WORDS and t not in NEGATIONS]


def _clauses(text: str) -> tuple[tuple[str, ...], ...]:
    out = []
    for part in _CLAUSE.split(text.lower().replace("’", "'")):
        if part:
            toks = tuple(t for t in (_norm_token(m) for m in _TOKEN.findall(part)) if t)
            if toks:
                out.append(toks)
    return tuple(out)


def _stems(clauses: tuple[tuple[str, ...], ...]) -> frozenset[str]:
    return frozenset(s for clause in clauses for s in _content(list(clause)) if not s.isdigit())


def lexical_overlap(a_text: str, b_text: str) -> float:
    """Jaccard similarity of the two texts' content-word stems (0 when either has none)."""
    a, b = _features(a_text).stems, _features(b_text).stems
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lowercased word tokens, contractions kept whole (``don't``): two texts with the same tokens
    differ only in case, spacing and punctuation."""
    return [t.lower().replace("’", "'") for t in _WORD.findall(text)]


def negated(text: str) -> bool:
    """Whether the text holds an odd number of negations (which side of a contradiction says "not")."""
    return sum(1 for t in tokens(text) if _is_negation(t)) % 2 == 1


def _is_negation(token: str) -> bool:
    return token in NEGATIONS or token.endswith("n't")


def _polarity(clauses: tuple[tuple[str, ...], ...]) -> tuple[frozenset[str], frozenset[str], int]:
    """(stems the text only negates, stems it asserts somewhere, how many negations it holds)."""
    negated: set[str] = set()
    asserted: set[str] = set()
    count = 0
    for clause in clauses:
        reach = 0
        for i, tok in enumerate(clause):
            if _is_negation(tok):
                if i + 1 < len(clause) and clause[i + 1] in _CANCELS:
                    continue  # "don't forget to run X" asks to run X
                reach = _NEGATION_REACH
                count += 1
                continue
            if tok in _CANCELS and i and _is_negation(clause[i - 1]):
                continue
            if len(tok) < 2 or tok in STOP_WORDS or tok.isdigit():
                continue
            s = _stem(tok)
            if reach > 0:
                negated.add(s)
                reach -= 1
            else:
                asserted.add(s)
    return frozenset(negated - asserted), frozenset(asserted), count


def _side(chunk: str) -> list[str]:
    """One side of a relation, in order: content stems, and runs of symbols kept as they are, so
    ``[[ ]] rather than [ ]`` has sides too."""
    out: list[str] = []
    for word in chunk.split():
        if any(ch.isalnum() for ch in word):
            out.extend(_content([_norm_token(t) for t in _TOKEN.findall(word)]))
        elif not all(ch in ",;:()\"'`" for ch in word):
            out.append(word)
    return out


def _relations(text: str, pattern: re.Pattern[str], flip: set[str]) -> set[tuple[str, str]]:
    """Ordered (first, second) stem pairs around each match of ``pattern`` in a clause: the nearest
    content words on its left and right. A match word in ``flip`` reverses the pair."""
    pairs: set[tuple[str, str]] = set()
    low = text.lower().replace("’", "'")
    if not pattern.search(low):  # most texts hold no such word: skip the clause split
        return pairs
    for part in _CLAUSE.split(low):
        if not part:
            continue
        for m in pattern.finditer(part):
            before, after = part[: m.start()], part[m.end() :]
            if not before.strip() and "," in after:
                # "Before deploying, run migrations": the clause after the comma is the left side.
                after, before = after.split(",", 1)
            left = _side(before)[-2:]
            right = _side(after)[:2]
            word = m.group(0).split()[0]
            for x in left:
                for y in right:
                    if x != y:
                        pairs.add((y, x) if word in flip else (x, y))
    return pairs


def _swapped(a: frozenset[tuple[str, str]], b: frozenset[tuple[str, str]]) -> tuple[str, str] | None:
    if not a or not b:  # most texts state no preference or order: the common, cheap answer
        return None
    for x, y in sorted(a):
        if (y, x) in b and (x, y) not in b:
            return (x, y)
    return None


def _numbers(text: str) -> frozenset[str]:
    """The numbers and versions a text states, without dates, times and identifiers (``#123``,
    ``run 22968``, ``incident 4312``): two notes of one lesson differ in those without disagreeing."""
    plain = _DATE.sub(" ", text)
    out = set()
    for m in _NUMBER.finditer(plain):
        before = plain[max(0, m.start() - 12) : m.start()]
        if before.endswith("#") or _TICKET.search(before) or (len(m.group(1)) >= 3 and _ID_BEFORE.search(before)):
            continue
        out.add(m.group(1))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class _Features:
    """What the rules read of one text, computed once per text (a planner asks about each lesson in
    many pairs)."""

    stems: frozenset[str]
    negated: frozenset[str]
    asserted: frozenset[str]
    negations: int
    antonyms: frozenset[str]
    preferences: frozenset[tuple[str, str]]
    orders: frozenset[tuple[str, str]]
    numbers: frozenset[str]


#: Texts whose features are kept: a planner compares each lesson with its neighbours in one scope,
#: so the cache holds a large scope's lessons (a few KB each).
FEATURE_CACHE = 8192


@lru_cache(maxsize=FEATURE_CACHE)
def _features(text: str) -> _Features:
    clauses = _clauses(text)
    neg, pos, count = _polarity(clauses)
    every = {_stem(t) for clause in clauses for t in clause}
    return _Features(
        stems=_stems(clauses),
        negated=neg,
        asserted=pos,
        negations=count,
        antonyms=frozenset(every & _ANTONYM_STEMS),
        preferences=frozenset(_relations(text, _PREFER, set())),
        orders=frozenset(_relations(text, _ORDER, {"after"})),
        numbers=_numbers(text),
    )


def disagreement(a_text: str, b_text: str, *, numbers: bool = True) -> Disagreement | None:
    """The first way (in the module's documented order) in which the two texts disagree, or None.

    Only meaningful for texts already known to be about the same thing (a high cosine): on unrelated
    texts it finds "disagreements" that mean nothing. ``numbers=False`` skips the number rule.
    """
    a, b = _features(a_text), _features(b_text)
    swap = _swapped(a.preferences, b.preferences)
    if swap:
        return Disagreement("preference", f"{swap[0]} over {swap[1]} / {swap[1]} over {swap[0]}")
    swap = _swapped(a.orders, b.orders)
    if swap:
        return Disagreement("order", f"{swap[0]} before {swap[1]} / {swap[1]} before {swap[0]}")
    if a.negations != b.negations:
        a_flip, b_flip = a.negated & b.asserted, b.negated & a.asserted
        if (a_flip or b_flip) and not (a_flip and b_flip):
            return Disagreement("negation", ", ".join(sorted(a_flip | b_flip)[:3]))
    if a.antonyms or b.antonyms:
        for p, q, p_word, q_word in _ANTONYM_PAIRS:
            if p in a.antonyms and q in b.antonyms and q not in a.antonyms and p not in b.antonyms:
                if p in a.negated or q in b.negated:
                    continue  # "breaks" against "doesn't work": a negated antonym agrees
                return Disagreement("antonym", f"{p_word} / {q_word}")
    if numbers and a.numbers - b.numbers and b.numbers - a.numbers:
        only_a, only_b = sorted(a.numbers - b.numbers), sorted(b.numbers - a.numbers)
        return Disagreement("number", f"{', '.join(only_a)} / {', '.join(only_b)}")
    return None


def judge(a_text: str, b_text: str, cosine: float) -> str | None:
    """``"duplicate"`` (:func:`is_near_duplicate`), ``"contradiction"`` (:func:`is_contradiction`) or
    None, reading the texts' disagreement once: what a planner asks of each neighbouring pair."""
    if cosine < MIN_COSINE:
        return None
    found = disagreement(a_text, b_text)
    if found is None:
        if cosine >= MERGE_COSINE and lexical_overlap(a_text, b_text) >= MERGE_OVERLAP:
            return "duplicate"
        return None
    return "contradiction" if cosine >= CONTRADICTION_COSINE else None


def is_near_duplicate(a_text: str, b_text: str, cosine: float) -> bool:
    """Whether two lessons say the same thing closely enough that one may supersede the other.

    All three must hold: cosine >= :data:`MERGE_COSINE`, content-word overlap >= :data:`MERGE_OVERLAP`,
    and no :func:`disagreement` between them (a negation pair embeds as near as a paraphrase).
    """
    if cosine < MERGE_COSINE or lexical_overlap(a_text, b_text) < MERGE_OVERLAP:
        return False
    return disagreement(a_text, b_text) is None


def is_contradiction(a_text: str, b_text: str, cosine: float) -> bool:
    """Whether two lessons are about the same thing (cosine >= :data:`CONTRADICTION_COSINE`) and
    disagree (:func:`disagreement`): flagged for a person, never resolved automatically."""
    return cosine >= CONTRADICTION_COSINE and disagreement(a_text, b_text) is not None


def is_tombstone_paraphrase(candidate_text: str, forgotten_text: str, cosine: float) -> bool:
    """Whether a write repeats forgotten content closely enough to be held for review.

    Cosine >= :data:`PARAPHRASE_COSINE`, unless the write disagrees with the forgotten text by
    preference, order, negation or antonym ("never do X" after forgetting "do X" is not a repeat of
    it). Differing numbers do not release a write: forgotten content with one figure changed is
    still that content.
    """
    if cosine < PARAPHRASE_COSINE:
        return False
    return disagreement(candidate_text, forgotten_text, numbers=False) is None


# Antonym pairs as stems (what the rule compares) with their words (what a reason names), both ways round.
_ANTONYM_PAIRS: tuple[tuple[str, str, str, str], ...] = tuple(
    quad for x, y in ANTONYMS for quad in ((_stem(x), _stem(y), x, y), (_stem(y), _stem(x), y, x))
)
_ANTONYM_STEMS = frozenset(s for quad in _ANTONYM_PAIRS for s in quad[:2])
