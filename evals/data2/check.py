"""Validate the second retrieval evaluation set (stdlib only; exit 1 on any error).

Run from anywhere: ``python evals/data2/check.py``. The overlap measure defined here is the one
the ``low_overlap`` and ``paraphrase`` labels are stated in, so the labels can be re-derived and
argued about: a label that does not hold under this measure is an error, in both directions.

Content words: lowercase ``[a-z0-9]+`` runs (so ``test_total`` is two words and ``ModuleNotFoundError``
one), minus the stopwords below and one- and two-digit numbers, reduced by a crude stemmer (common
suffixes off, trailing ``e`` off, first six characters kept) so that ``install``/``installed``/
``installing`` and ``module``/``modules`` count as one word. A lesson's words come from its key,
value and tags together, because that is what a search over lessons can see.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren as at be because been before
    being below between both but by can cannot could couldn did didn do does doesn doing don down
    during each either else even ever every few for from further get gets got had has hasn have
    having he her here hers herself him himself his how however i if in into is isn it its itself
    just let like may me might more most much must my myself need no nor not now of off often on
    once one only or other our ours ourselves out over own same shall she should so some such than
    that the their theirs them themselves then there these they this those through to too under
    until up upon us very was wasn we were weren what when where which while who whom why will with
    within without won would yet you your yours yourself yourselves via per e g eg ie etc vs s t
    re ll ve d m
    error errors warning warnings fatal failed fail fails failure file files line lines note hint
    see use used uses using run runs running ran instead still already really way thing things
    something anything nothing new old want wants make sure
    """.split()
)

_TOKEN = re.compile(r"[a-z0-9]+")
_SUFFIXES = ("ingly", "edly", "ings", "ing", "ied", "ies", "ed", "es", "ly", "s")


def _stem(word: str) -> str:
    """A deliberately crude stemmer: enough to merge inflections, no dictionary needed."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if suffix in ("ied", "ies"):
                word += "y"
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word[:6]


def content_words(text: str) -> set[str]:
    """The set of stemmed content words of a text (see the module docstring)."""
    out = set()
    for tok in _TOKEN.findall(text.lower()):
        if tok in STOPWORDS or len(tok) < 2:
            continue
        if tok.isdigit() and len(tok) < 3:
            continue
        out.add(_stem(tok))
    return out


def lesson_text(lesson: dict) -> str:
    """Everything a search can match for a lesson: key, value and tags."""
    return " ".join([lesson["key"].replace("-", " "), lesson["value"], " ".join(lesson["tags"])])


def shared_words(query_text: str, lesson: dict) -> set[str]:
    return content_words(query_text) & content_words(lesson_text(lesson))


def load_jsonl(path: Path) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{path.name}:{n}: not JSON ({exc})") from exc
    return rows


SCOPE_RE = re.compile(
    r"^(global|project::[a-z0-9][a-z0-9._-]*|repo::[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*"
    r"|branch::[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*::[A-Za-z0-9/._-]+)$"
)
KEY_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def _balanced(counter: Counter) -> bool:
    return abs(counter["dev"] - counter["test"]) <= 1 and set(counter) <= {"dev", "test"}


def check() -> list[str]:
    errs: list[str] = []
    lessons = load_jsonl(HERE / "lessons.jsonl")
    queries = load_jsonl(HERE / "queries.jsonl")
    turns = load_jsonl(HERE / "conversations.jsonl")
    cqueries = load_jsonl(HERE / "conv_queries.jsonl")

    # Lessons.
    by_id = {}
    keys = set()
    clusters = defaultdict(list)
    for les in lessons:
        lid = les.get("id", "?")
        for field in ("id", "scope", "key", "value", "tags"):
            if field not in les:
                errs.append(f"lesson {lid}: missing {field}")
        if not re.fullmatch(r"M\d{3}", lid):
            errs.append(f"lesson {lid}: id must look like M001")
        if lid in by_id:
            errs.append(f"lesson {lid}: duplicate id")
        by_id[lid] = les
        if les.get("key") in keys:
            errs.append(f"lesson {lid}: duplicate key {les.get('key')}")
        keys.add(les.get("key"))
        if not KEY_RE.match(les.get("key", "")):
            errs.append(f"lesson {lid}: key {les.get('key')!r} is not kebab-case")
        if not SCOPE_RE.match(les.get("scope", "")):
            errs.append(f"lesson {lid}: scope {les.get('scope')!r} is not in the scope grammar")
        if not isinstance(les.get("tags"), list) or not les["tags"]:
            errs.append(f"lesson {lid}: tags must be a non-empty list")
        if les.get("cluster"):
            clusters[les["cluster"]].append(lid)
    for cid, members in clusters.items():
        if not 2 <= len(members) <= 3:
            errs.append(f"cluster {cid}: {len(members)} members (want 2-3)")
    cluster_of = {lid: les.get("cluster") for lid, les in by_id.items()}

    # Queries.
    seen = set()
    groups: dict[tuple, Counter] = defaultdict(Counter)
    for q in queries:
        qid = q.get("id", "?")
        if qid in seen:
            errs.append(f"query {qid}: duplicate id")
        seen.add(qid)
        if not re.fullmatch(r"P\d{3}", qid):
            errs.append(f"query {qid}: id must look like P001")
        qtype = q.get("type")
        if qtype not in ("error", "question", "noanswer"):
            errs.append(f"query {qid}: bad type {qtype!r}")
            continue
        if q.get("split") not in ("dev", "test"):
            errs.append(f"query {qid}: bad split {q.get('split')!r}")
        rel = q.get("relevant", [])
        near = q.get("near", [])
        for lid in rel + near:
            if lid not in by_id:
                errs.append(f"query {qid}: unknown lesson id {lid}")
        if set(rel) & set(near):
            errs.append(f"query {qid}: a lesson is both relevant and near")
        if len(set(rel)) != len(rel):
            errs.append(f"query {qid}: repeated relevant id")
        if qtype == "noanswer":
            if rel:
                errs.append(f"query {qid}: noanswer with relevant lessons")
            sub = "near" if near else "unrelated"
            if q.get("low_overlap") or q.get("paraphrase"):
                errs.append(f"query {qid}: noanswer carries low_overlap/paraphrase")
        else:
            if not rel:
                errs.append(f"query {qid}: {qtype} without relevant lessons")
            known = [lid for lid in rel if lid in by_id]
            # Every member of a cluster answers the same thing, so all of them are relevant.
            for lid in known:
                cid = cluster_of.get(lid)
                if cid:
                    missing = set(clusters[cid]) - set(rel)
                    if missing:
                        errs.append(f"query {qid}: cluster {cid} partly relevant, missing {sorted(missing)}")
            worst = max((len(shared_words(q["text"], by_id[lid])) for lid in known), default=0)
            if qtype == "error":
                if q.get("paraphrase"):
                    errs.append(f"query {qid}: paraphrase label on an error")
                label = bool(q.get("low_overlap"))
                if label != (worst <= 2):
                    errs.append(f"query {qid}: low_overlap={label} but max shared content words = {worst}")
                sub = "low_overlap" if label else "overlap"
            else:
                if q.get("low_overlap"):
                    errs.append(f"query {qid}: low_overlap label on a question")
                label = bool(q.get("paraphrase"))
                if label != (worst == 0):
                    errs.append(f"query {qid}: paraphrase={label} but max shared content words = {worst}")
                sub = "paraphrase" if label else "plain"
        groups[(qtype, sub)][q.get("split")] += 1
    for group, counter in sorted(groups.items()):
        if not _balanced(counter):
            errs.append(f"queries {group}: splits unbalanced {dict(counter)}")

    # Conversations.
    turn_ids = set()
    for t in turns:
        tid = t.get("id", "?")
        if tid in turn_ids:
            errs.append(f"turn {tid}: duplicate id")
        turn_ids.add(tid)
        m = re.fullmatch(r"(C\d+)-T(\d{2,3})", tid)
        if not m or m.group(1) != t.get("conversation"):
            errs.append(f"turn {tid}: id does not match conversation {t.get('conversation')!r}")
        for field in ("speaker", "session", "text"):
            if not t.get(field):
                errs.append(f"turn {tid}: missing {field}")
    cq_seen = set()
    cq_split = Counter()
    for cq in cqueries:
        cid = cq.get("id", "?")
        if cid in cq_seen:
            errs.append(f"conv query {cid}: duplicate id")
        cq_seen.add(cid)
        ev = cq.get("evidence", [])
        if not ev:
            errs.append(f"conv query {cid}: no evidence")
        for tid in ev:
            if tid not in turn_ids:
                errs.append(f"conv query {cid}: unknown turn {tid}")
        if len({tid.split("-")[0] for tid in ev}) > 1:
            errs.append(f"conv query {cid}: evidence spans conversations")
        cq_split[cq.get("split")] += 1
    if not _balanced(cq_split):
        errs.append(f"conv queries: splits unbalanced {dict(cq_split)}")

    # Distractors.
    spec = importlib.util.spec_from_file_location("data2_distractors", HERE / "distractors.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    dist = mod.generate(5000, seed=0)
    if dist != mod.generate(5000, seed=0):
        errs.append("distractors: generate() is not deterministic for a fixed seed")
    if len(dist) != 5000:
        errs.append(f"distractors: asked for 5000, got {len(dist)}")
    d_ids = [d["id"] for d in dist]
    d_keys = [d["key"] for d in dist]
    d_values = [d["value"] for d in dist]
    if len(set(d_ids)) != len(d_ids) or d_ids[:1] != ["D00001"]:
        errs.append("distractors: ids must be unique and start at D00001")
    if len(set(d_keys)) != len(d_keys):
        errs.append("distractors: duplicate keys")
    if len(set(d_values)) != len(d_values):
        errs.append("distractors: duplicate values")
    for key in set(d_keys) & keys:
        errs.append(f"distractors: key {key} collides with a lesson key")
    for d in dist[:5000]:
        if not SCOPE_RE.match(d["scope"]) or not KEY_RE.match(d["key"]) or not d["tags"]:
            errs.append(f"distractor {d['id']}: bad scope/key/tags")
            break
    # A distractor must not restate a lesson: no pair may share most of its content words.
    lesson_words = [(lid, content_words(lesson_text(les))) for lid, les in by_id.items()]
    worst = (0.0, "", "")
    for d in dist:
        dw = content_words(lesson_text(d))
        for lid, lw in lesson_words:
            jac = len(dw & lw) / len(dw | lw)
            if jac > worst[0]:
                worst = (jac, d["id"], lid)
    if worst[0] >= 0.35:
        errs.append(f"distractors: {worst[1]} is too close to lesson {worst[2]} (Jaccard {worst[0]:.2f})")
    return errs


def summary() -> str:
    lessons = load_jsonl(HERE / "lessons.jsonl")
    queries = load_jsonl(HERE / "queries.jsonl")
    counts = Counter()
    for q in queries:
        if q["type"] == "error":
            sub = "low_overlap" if q["low_overlap"] else "overlap"
        elif q["type"] == "question":
            sub = "paraphrase" if q["paraphrase"] else "plain"
        else:
            sub = "near" if q["near"] else "unrelated"
        counts[(q["type"], sub, q["split"])] += 1
    lines = [f"lessons: {len(lessons)}  queries: {len(queries)}"]
    for key in sorted(counts):
        lines.append(f"  {key[0]:9s} {key[1]:12s} {key[2]:5s} {counts[key]}")
    return "\n".join(lines)


def main() -> int:
    errs = check()
    for err in errs:
        print(f"ERROR: {err}")
    if errs:
        print(f"{len(errs)} error(s)")
        return 1
    print(summary())
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
