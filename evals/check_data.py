"""Validate the hand-labelled retrieval set in ``evals/data``.

These numbers get published, so the labels have to hold up. This script checks what a
reader can't check by eye across 300+ records: ids and references, cluster completeness,
dev/test balance, and whether the ``low_overlap`` / ``paraphrase`` claims are really true
under one fixed, documented definition of "shared content words" (see ``content_stems``).

Usage::

    python evals/check_data.py                 # validate, print counts, exit 1 on any error
    python evals/check_data.py --show-overlap  # also print per-query overlap numbers
    python evals/check_data.py --distractors 5000  # also sanity-check the distractor generator

Stdlib only, so it runs before the project's dependencies are installed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"

# A claimed low-overlap error may share at most this many content words with each answer.
LOW_OVERLAP_MAX = 2

SCOPE_RE = re.compile(
    r"^(global|repo::[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*|project::[a-z0-9][a-z0-9._-]*"
    r"|branch::[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*::[A-Za-z0-9][A-Za-z0-9._/-]*)$"
)
KEY_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
TAG_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")

# English function words plus a few verbs so generic that sharing them says nothing about
# topic ("use", "get", "make"). Kept deliberately short: every word added here makes the
# overlap check more lenient, so additions need a reason.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn did didn do does doesn doing don down
    during each few for from further had hadn has hasn have haven having he her here hers herself
    him himself his how i if in into is isn it its itself just ll me might mightn more most must
    mustn my myself needn no nor not now of off on once only or other our ours ourselves out over
    own re s same shall shan she should shouldn so some such t than that the their theirs them
    themselves then there these they this those through to too under until up ve very was wasn we
    were weren what when where which while who whom why will with won would wouldn y you your yours
    yourself yourselves d m o e g ie eg etc via also may one two use uses using used get gets got
    make makes need needs want like instead way even
    """.split()
)

# File names are paths too; recognising them by extension avoids eating dotted identifiers
# such as ``numpy.dtype`` or ``psycopg2.OperationalError``, which are content.
FILE_EXTS = (
    "py|pyc|pyx|pyi|js|mjs|cjs|ts|tsx|jsx|sh|bash|json|yml|yaml|toml|txt|md|rst|go|rs|c|h|cc|cpp|"
    "html|css|png|jpg|svg|sql|lock|cfg|ini|conf|log|env|pem|crt|key|whl|gz|tgz|zip|csv|ipynb|tf|"
    "tfstate|local|mod|sum|so|dll|dylib|exe"
)
FILENAME_RE = re.compile(rf"^[\w.*-]*\w\.(?:{FILE_EXTS})(?:\.\d+)*(?::\d+)*$", re.IGNORECASE)
# Hex ids (commit shas, container ids, addresses). Six chars minimum keeps codes like E0502.
HEXISH_RE = re.compile(r"^(?:0x[0-9a-f]+|(?=[0-9a-f]*\d)[0-9a-f]{6,})$")
WORD_RE = re.compile(r"[A-Za-z0-9]+")
EDGE_PUNCT = "\"'`()[]{}<>,;:!?"


def _is_path(token: str) -> bool:
    """Paths, URLs and file names carry instance detail, not topic, so they don't count."""
    if "/" in token or "\\" in token:
        return True
    return bool(FILENAME_RE.match(token.strip(EDGE_PUNCT).rstrip(".")))


def _stem(word: str) -> str:
    """Strip common English inflections so 'locked'/'locks'/'locking' count as one word.

    Deliberately crude: it only needs to make the overlap check stricter (merge variants),
    never to be linguistically right.
    """
    for suffix, min_len in (("ing", 6), ("ies", 5), ("ed", 5), ("es", 5), ("s", 4)):
        if word.endswith(suffix) and len(word) >= min_len:
            if suffix == "ies":
                return word[:-3] + "y"
            if suffix == "es" and not word.endswith(("ses", "xes", "zes", "ches", "shes")):
                return word[:-1]
            if suffix == "s" and word.endswith("ss"):
                return word
            return word[: -len(suffix)]
    return word


def content_stems(text: str) -> set[str]:
    """The content words of ``text``: no stop words, numbers, hex ids or paths; stemmed."""
    out: set[str] = set()
    for token in text.split():
        if _is_path(token):
            continue
        for raw in WORD_RE.findall(token):
            word = raw.lower()
            if len(word) < 2 or word in STOPWORDS or word.isdigit() or HEXISH_RE.match(word):
                continue
            out.add(_stem(word))
    return out


def _same_word(a: str, b: str) -> bool:
    """Treat prefixes as the same word ('config'/'configmap', 'connect'/'connection').

    Over-matching is the safe direction here: it can only make a low-overlap claim fail.
    """
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 4 and long_.startswith(short):
        return True
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common >= 7


def shared_words(query: set[str], lesson: set[str]) -> list[str]:
    """Lesson words that some query word matches (for display)."""
    return sorted(w for w in lesson if any(_same_word(w, q) for q in query))


def overlap(query: set[str], lesson: set[str]) -> int:
    """How many words two texts share, counting each shared word once on either side.

    Taking the smaller of the two matched sets stops one word from counting twice when the
    other side holds two variants of it ('session' vs 'session'/'sessionmaker').
    """
    on_lesson = {w for w in lesson if any(_same_word(w, q) for q in query)}
    on_query = {q for q in query if any(_same_word(w, q) for w in lesson)}
    return min(len(on_lesson), len(on_query))


def lesson_text(lesson: dict[str, Any]) -> str:
    """Everything a store would index for a lesson: key, value and tags."""
    return " ".join([lesson["key"].replace("-", " "), lesson["value"], " ".join(lesson["tags"])])


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read JSONL, reporting the line number of a bad record instead of a bare traceback."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            sys.exit(f"{path.name}:{n}: invalid JSON: {exc}")
    return rows


class Report:
    """Collects errors (fail the run) and warnings (printed for review, don't fail)."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def error(self, msg: str) -> None:
        self.errors.append(msg)

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)


def check_lessons(lessons: list[dict[str, Any]], rep: Report) -> dict[str, list[str]]:
    """Shape checks for lessons; returns cluster id -> member ids."""
    seen_ids: set[str] = set()
    seen_addr: set[tuple[str, str]] = set()
    seen_values: set[str] = set()
    clusters: dict[str, list[str]] = defaultdict(list)
    for les in lessons:
        lid = les.get("id", "?")
        missing = {"id", "scope", "key", "value", "tags"} - les.keys()
        if missing:
            rep.error(f"{lid}: missing fields {sorted(missing)}")
            continue
        if not re.fullmatch(r"L\d{3}", lid):
            rep.error(f"{lid}: lesson id must look like L001")
        if lid in seen_ids:
            rep.error(f"{lid}: duplicate lesson id")
        seen_ids.add(lid)
        if not SCOPE_RE.match(les["scope"]):
            rep.error(f"{lid}: non-canonical scope {les['scope']!r}")
        if not KEY_RE.match(les["key"]):
            rep.error(f"{lid}: key {les['key']!r} is not short-kebab-case")
        addr = (les["scope"], les["key"])
        if addr in seen_addr:
            rep.error(f"{lid}: duplicate scope+key {addr}")
        seen_addr.add(addr)
        if les["value"] in seen_values:
            rep.error(f"{lid}: duplicate value text")
        seen_values.add(les["value"])
        sentences = len(re.findall(r"[.!?](?:\s|$)", les["value"]))
        if not 1 <= sentences <= 4:
            rep.warn(f"{lid}: value has ~{sentences} sentences (want 1-4)")
        if not les["tags"] or not all(isinstance(t, str) and TAG_RE.match(t) for t in les["tags"]):
            rep.error(f"{lid}: tags must be a non-empty list of lower-case words")
        if "cluster" in les:
            if not re.fullmatch(r"C\d{2}", les["cluster"]):
                rep.error(f"{lid}: cluster id must look like C01")
            clusters[les["cluster"]].append(lid)
    for cid, members in sorted(clusters.items()):
        if not 2 <= len(members) <= 4:
            rep.error(f"cluster {cid} has {len(members)} members (want 2-4)")
    return dict(clusters)


def check_queries(
    queries: list[dict[str, Any]],
    lessons: dict[str, dict[str, Any]],
    clusters: dict[str, list[str]],
    rep: Report,
    show: bool,
) -> None:
    """Reference, flag and overlap checks for queries."""
    lesson_words = {lid: content_stems(lesson_text(les)) for lid, les in lessons.items()}
    cluster_of = {lid: cid for cid, members in clusters.items() for lid in members}
    seen_ids: set[str] = set()
    seen_text: set[str] = set()
    for q in queries:
        qid = q.get("id", "?")
        missing = {"id", "type", "text", "relevant", "paraphrase", "low_overlap", "split"} - q.keys()
        if missing:
            rep.error(f"{qid}: missing fields {sorted(missing)}")
            continue
        if not re.fullmatch(r"Q\d{3}", qid):
            rep.error(f"{qid}: query id must look like Q001")
        if qid in seen_ids:
            rep.error(f"{qid}: duplicate query id")
        seen_ids.add(qid)
        if q["text"] in seen_text:
            rep.error(f"{qid}: duplicate query text")
        seen_text.add(q["text"])
        if q["type"] not in {"error", "question", "noanswer"}:
            rep.error(f"{qid}: bad type {q['type']!r}")
        if q["split"] not in {"dev", "test"}:
            rep.error(f"{qid}: bad split {q['split']!r}")
        if q["paraphrase"] and q["type"] != "question":
            rep.error(f"{qid}: paraphrase=true is only defined for questions")
        if q["low_overlap"] and q["type"] != "error":
            rep.error(f"{qid}: low_overlap=true is only defined for errors")
        unknown = [r for r in q["relevant"] if r not in lessons]
        if unknown:
            rep.error(f"{qid}: relevant ids not in lessons: {unknown}")
            continue
        for ref in q.get("near", []):
            if ref not in lessons:
                rep.error(f"{qid}: near id {ref} not in lessons")
        if q["type"] == "noanswer":
            if q["relevant"]:
                rep.error(f"{qid}: noanswer query must have relevant == []")
            if show:
                qw = content_stems(q["text"])
                best = max(lessons, key=lambda lid: overlap(qw, lesson_words[lid]))
                print(
                    f"  {qid} noanswer  nearest={best} ({overlap(qw, lesson_words[best])} words: "
                    f"{shared_words(qw, lesson_words[best])})"
                )
            continue
        if not q["relevant"]:
            rep.error(f"{qid}: {q['type']} query has no relevant lessons")
            continue
        for lid in q["relevant"]:
            cid = cluster_of.get(lid)
            if cid and not set(clusters[cid]) <= set(q["relevant"]):
                rep.error(f"{qid}: lists {lid} of {cid} but not all members {clusters[cid]}")
        qw = content_stems(q["text"])
        per_lesson = {lid: shared_words(qw, lesson_words[lid]) for lid in q["relevant"]}
        worst = max(overlap(qw, lesson_words[lid]) for lid in q["relevant"])
        detail = "; ".join(f"{lid}: {v}" for lid, v in per_lesson.items())
        if show:
            print(f"  {qid} {q['type']:<8} max_shared={worst}  {detail}")
        if q["type"] == "error":
            if q["low_overlap"] and worst > LOW_OVERLAP_MAX:
                rep.error(f"{qid}: claims low_overlap but shares {worst} words ({detail})")
            if not q["low_overlap"] and worst <= LOW_OVERLAP_MAX:
                rep.error(f"{qid}: not marked low_overlap but shares only {worst} words ({detail})")
        if q["type"] == "question":
            if q["paraphrase"] and worst > 0:
                rep.error(f"{qid}: claims paraphrase but shares {worst} words ({detail})")
            if not q["paraphrase"] and worst == 0:
                rep.error(f"{qid}: shares no words; mark it paraphrase ({detail})")


def stratum(q: dict[str, Any]) -> str:
    """The groups that must each be split evenly, so dev and test measure the same mix."""
    if q["type"] == "error":
        return "error/low_overlap" if q["low_overlap"] else "error/lexical"
    if q["type"] == "question":
        return "question/paraphrase" if q["paraphrase"] else "question/lexical"
    return "noanswer/near-miss" if q.get("near") else "noanswer/unrelated"


def print_counts(lessons: list[dict[str, Any]], queries: list[dict[str, Any]], rep: Report) -> None:
    """Print the table the README quotes, and flag any stratum split unevenly."""
    scopes = Counter(les["scope"].split("::")[0] for les in lessons)
    clustered = sum(1 for les in lessons if "cluster" in les)
    n_clusters = len({les["cluster"] for les in lessons if "cluster" in les})
    print(f"lessons: {len(lessons)}  scopes: {dict(scopes)}  clusters: {n_clusters} ({clustered} lessons)")
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for q in queries:
        table[q["type"]][q["split"]] += 1
        table[stratum(q)][q["split"]] += 1
    print(f"queries: {len(queries)}")
    print(f"  {'group':<22}{'dev':>5}{'test':>6}{'total':>7}")
    for name in (
        "error",
        "error/low_overlap",
        "error/lexical",
        "question",
        "question/paraphrase",
        "question/lexical",
        "noanswer",
        "noanswer/near-miss",
        "noanswer/unrelated",
    ):
        c = table.get(name, Counter())
        print(f"  {name:<22}{c['dev']:>5}{c['test']:>6}{c['dev'] + c['test']:>7}")
        if abs(c["dev"] - c["test"]) > 1:
            rep.error(f"split imbalance in {name}: dev={c['dev']} test={c['test']}")
    total = Counter(q["split"] for q in queries)
    print(f"  {'all':<22}{total['dev']:>5}{total['test']:>6}{len(queries):>7}")
    used = {lid for q in queries for lid in q["relevant"]}
    print(f"lessons that answer at least one query: {len(used)}/{len(lessons)}")


def check_distractors(n: int, lessons: list[dict[str, Any]], queries: list[dict[str, Any]], rep: Report) -> None:
    """Generator sanity: deterministic, well-formed, and not colliding with real lessons."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import distractors  # noqa: PLC0415 - optional check, keep import local

    first = distractors.generate(n, seed=0)
    if first != distractors.generate(n, seed=0):
        rep.error("distractors: generate() is not deterministic for a fixed seed")
    if first == distractors.generate(n, seed=1):
        rep.error("distractors: seed has no effect")
    real_addr = {(les["scope"], les["key"]) for les in lessons}
    real_values = {les["value"] for les in lessons}
    ids = [d["id"] for d in first]
    if len(first) != n or len(set(ids)) != n:
        rep.error(f"distractors: expected {n} unique ids, got {len(set(ids))}")
    addrs = Counter((d["scope"], d["key"]) for d in first)
    dup_addr = [a for a, c in addrs.items() if c > 1]
    if dup_addr:
        rep.error(f"distractors: {len(dup_addr)} duplicate scope+key pairs, e.g. {dup_addr[:3]}")
    for d in first:
        if (
            not re.fullmatch(r"D\d{5}", d["id"])
            or not SCOPE_RE.match(d["scope"])
            or not KEY_RE.match(d["key"])
            or not d["tags"]
        ):
            rep.error(f"distractors: malformed record {d}")
            break
        if (d["scope"], d["key"]) in real_addr or d["value"] in real_values:
            rep.error(f"distractors: {d['id']} collides with a real lesson")
    print(f"distractors: {n} generated, {len({d['value'] for d in first})} distinct values")
    # For human review: the distractor lexically closest to each query. A distractor that
    # shares many words is fine (that's the point); one that *answers* the query is not.
    stems = [content_stems(lesson_text(d)) for d in first]
    closest = []
    for q in queries:
        qw = content_stems(q["text"])
        # Exact-stem intersection is a cheap prefilter; the fuzzy overlap runs on the top 25 only.
        shortlist = sorted(range(len(first)), key=lambda i: len(qw & stems[i]), reverse=True)[:25]
        best = max(shortlist, key=lambda i: overlap(qw, stems[i]))
        closest.append((overlap(qw, stems[best]), q["id"], first[best]["value"]))
    closest.sort(reverse=True)
    print("  closest distractors (review these by hand):")
    for k, qid, value in closest[:15]:
        print(f"    {qid} shares {k}: {value[:110]}")


def main(argv: Iterable[str] | None = None) -> int:
    """Run every check; exit status 1 if anything is wrong so CI can gate on it."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--show-overlap", action="store_true", help="print per-query overlap")
    ap.add_argument(
        "--distractors", type=int, default=0, metavar="N", help="also generate N distractors and sanity-check them"
    )
    args = ap.parse_args(list(argv) if argv is not None else None)

    rep = Report()
    lessons = load_jsonl(DATA / "lessons.jsonl")
    queries = load_jsonl(DATA / "queries.jsonl")
    clusters = check_lessons(lessons, rep)
    by_id = {les["id"]: les for les in lessons}
    check_queries(queries, by_id, clusters, rep, args.show_overlap)
    print_counts(lessons, queries, rep)
    if args.distractors:
        check_distractors(args.distractors, lessons, queries, rep)

    for msg in rep.warnings:
        print(f"WARNING: {msg}")
    for msg in rep.errors:
        print(f"ERROR: {msg}")
    print("OK" if not rep.errors else f"{len(rep.errors)} error(s)")
    return 1 if rep.errors else 0


if __name__ == "__main__":
    sys.exit(main())
