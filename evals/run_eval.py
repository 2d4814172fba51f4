"""Retrieval eval: both sets, both arms, hybrid and a plain BM25 baseline, in one run.

    python evals/run_eval.py                  # the table, evals/out/eval.json
    python evals/run_eval.py --fit            # refit the ranker on the dev halves first (writes
                                              # src/cairn/search/data/ranker.json, evals/abstention_pr.*)
    python evals/run_eval.py --sets set1 --distractors 0   # a quick look at one set

Sets (each searched in its own throwaway SQLite store, filled through ``import`` like ``cairn import``):

* ``set1``: ``evals/data`` (131 lessons, 204 queries) with ``evals/distractors.py``;
* ``set2``: ``evals/data2`` (an independent set by another author) with ``evals/data2/distractors.py``;
* ``conv``: ``evals/data2/conversations.jsonl``: every turn of every conversation is a lesson; each
  question of ``conv_queries.jsonl`` is searched and scored by recall@10 of its evidence turns.

For every query and arm (``fts``, ``vector``, ``hybrid``, and ``bm25``: FTS5's ``bm25()`` over an OR
of the query's raw words, no cleaning, no weights, on the same store) the runner records the rank
of the first right lesson: questions go through ``search``, error texts through ``recall``'s
ranking. ``served@3`` is what an agent gets: for a question, search's top three; for an error text,
what ``recall`` prints at its floor (nothing, when it abstains). Unanswerable queries go through
``recall``: ``abstain`` is the share for which it prints nothing (BM25 and the arms alone always
answer something, so their abstention is 0 by construction).

Tuning discipline: the ranker (fusion and relevance models, the floor) is fitted on the dev halves
of set1 and set2 only; test halves are reported, never fitted on. ``--fit`` prints what it chose.
Embeddings are cached in ``evals/out/embed-cache.sqlite`` (keyed by model and text), so a rerun
only embeds what changed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import itertools
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402

from cairn.runtime.local import local_principal  # noqa: E402
from cairn.service.api import Cairn  # noqa: E402
from cairn.store.engine import Store, sqlite_url  # noqa: E402

EVALS = ROOT / "evals"
OUT = EVALS / "out"
MODES = ("fts", "vector", "hybrid")
ARMS = ("bm25", *MODES)
CONV_K = 10


# ----------------------------------------------------------------------------------------- data


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def available_sets() -> dict[str, dict[str, Any]]:
    """The sets present in this checkout (set2 and conv arrive with evals/data2)."""
    sets: dict[str, dict[str, Any]] = {}
    for name, folder, gen in (
        ("set1", EVALS / "data", EVALS / "distractors.py"),
        ("set2", EVALS / "data2", EVALS / "data2" / "distractors.py"),
    ):
        if (folder / "lessons.jsonl").exists() and (folder / "queries.jsonl").exists():
            sets[name] = {"kind": "lessons", "folder": folder, "distractors": gen if gen.exists() else None}
    conv = EVALS / "data2"
    if (conv / "conversations.jsonl").exists() and (conv / "conv_queries.jsonl").exists():
        sets["conv"] = {"kind": "conv", "folder": conv, "distractors": None}
    return sets


def conv_records(folder: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Turns as lessons, and the conversational questions with their evidence turns as ``relevant``.

    ``conversations.jsonl`` holds one turn a line (``id``, ``conversation``, ``session``, ``speaker``,
    ``text``); a turn becomes a lesson keyed by its id, its value "speaker: text".
    """
    lessons = []
    for turn in read_jsonl(folder / "conversations.jsonl"):
        tid = str(turn["id"])
        speaker = turn.get("speaker") or ""
        value = f"{speaker}: {turn['text']}" if speaker else turn["text"]
        key = "turn-" + re.sub(r"[^a-z0-9]+", "-", tid.lower()).strip("-")
        lessons.append({"id": tid, "scope": "global", "key": key, "value": value[:8000], "tags": []})
    queries = []
    for q in read_jsonl(folder / "conv_queries.jsonl"):
        rel = [str(r) for r in (q.get("relevant") or q.get("evidence") or [])]
        queries.append(
            {
                "id": q["id"],
                "type": "question" if rel else "noanswer",
                "text": q["text"],
                "relevant": rel,
                "split": q.get("split", "test"),
                "category": q.get("category"),
            }
        )
    return lessons, queries


def exact_corpus(name: str, spec: dict, distractors: int = 5000) -> tuple[list[dict], list[dict], list]:
    """A set's queries, its lessons followed by its seeded distractors (keys suffixed, no id), and the
    ids in corpus order: what the exact-cosine experiment scripts search, built one way for all of them."""
    if spec["kind"] == "conv":
        lessons, qs = conv_records(spec["folder"])
        extra: list[dict] = []
    else:
        lessons = read_jsonl(spec["folder"] / "lessons.jsonl")
        qs = read_jsonl(spec["folder"] / "queries.jsonl")
        extra = load_module(spec["distractors"], f"d_{name}").generate(distractors, seed=0)
    corpus = [dict(x) for x in lessons] + [dict(d, key=d["key"] + "-d", id=None) for d in extra]
    return qs, corpus, [x.get("id") for x in corpus]


# ----------------------------------------------------------------------------------------- embedding cache


class CachedEmbedder:
    """The shipped embedder behind a text → vector cache (the eval embeds the same texts every run)."""

    def __init__(self, inner: Any, path: Path) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("CREATE TABLE IF NOT EXISTS v (h TEXT PRIMARY KEY, b BLOB)")

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.name}\0{text}".encode()).hexdigest()

    def embed(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        texts = list(texts)
        keys = [self._key(t) for t in texts]
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(self.db.execute(f"SELECT h, b FROM v WHERE h IN ({marks})", chunk).fetchall())  # noqa: S608
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            vecs = self.inner.embed([texts[i] for i in missing], batch_size=batch_size)
            rows = [(keys[i], vecs[n].astype("<f4").tobytes()) for n, i in enumerate(missing)]
            self.db.executemany("INSERT OR REPLACE INTO v VALUES (?, ?)", rows)
            self.db.commit()
            found.update(rows)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, k in enumerate(keys):
            out[i] = np.frombuffer(found[k], dtype="<f4")
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


def install_embed_cache() -> None:
    import cairn.search.embed as embed

    real = embed.get_embedder
    cached: dict[str, CachedEmbedder] = {}

    def get_embedder(*args: Any, **kwargs: Any) -> Any:
        inner = real(*args, **kwargs)
        if inner.name not in cached:
            cached[inner.name] = CachedEmbedder(inner, OUT / "embed-cache.sqlite")
        return cached[inner.name]

    embed.get_embedder = get_embedder


# ----------------------------------------------------------------------------------------- store


def build_store(lessons: list[dict[str, Any]], extra: list[dict[str, Any]]) -> tuple[Cairn, Any, dict[str, tuple]]:
    from cairn.core.keys import normalize_key
    from cairn.core.scope import validate_scope

    home = Path(tempfile.mkdtemp(prefix="cairn-eval-"))
    svc = Cairn(Store(sqlite_url(home)))
    p = local_principal()
    svc.ensure_tenant(p)
    records = [{k: x[k] for k in ("scope", "key", "value") if k in x} | {"tags": x.get("tags", [])} for x in lessons]
    records += [
        {"scope": d["scope"], "key": d["key"] + "-d", "value": d["value"], "tags": d.get("tags", [])} for d in extra
    ]
    result = svc.import_lines(p, [json.dumps(r) for r in records])
    if result["refused"]:
        raise SystemExit(f"eval store refused records: {result['refused'][:3]}")
    addr: dict[str, tuple] = {}
    for x in lessons:
        a = (validate_scope(x["scope"]), normalize_key(x["key"]))
        if a in addr.values():
            raise SystemExit(f"two labelled lessons share the address {a}")
        addr[x["id"]] = a
    t = time.perf_counter()
    svc.drain_embeddings(p)
    say(f"  store: {len(records)} lessons, embedded in {time.perf_counter() - t:.1f}s")
    return svc, p, addr


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------- querying


def bm25_baseline(svc: Cairn, text: str, k: int = 20) -> list[tuple[str, str]]:
    """Plain BM25: FTS5's bm25() with default weights over an OR of the query's raw words."""
    from sqlalchemy import text as sql

    words = list(dict.fromkeys(w.lower() for w in re.findall(r"\w+", text) if len(w) > 1))[:64]
    if not words:
        return []
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    with svc.store.engine.connect() as conn:
        rows = conn.execute(
            sql(
                "SELECT l.scope, l.key FROM lesson_fts CROSS JOIN lessons l ON l.id = lesson_fts.rowid "
                "WHERE lesson_fts MATCH :m ORDER BY bm25(lesson_fts) LIMIT :k"
            ),
            {"m": match, "k": k},
        )
        return [(r[0], r[1]) for r in rows]


def is_error_text(q: dict[str, Any]) -> bool:
    """Error texts go to recall, questions to search; a no-answer query is an error text when it reads like one."""
    if q["type"] == "error":
        return True
    if q["type"] == "question":
        return False
    return (
        bool(q.get("error"))
        or "\n" in q["text"]
        or bool(re.search(r"[A-Za-z]+(Error|Exception)\b|ERR|error:", q["text"]))
    )


def run_queries(
    svc: Cairn, p: Any, addr: dict[str, tuple], queries: list[dict[str, Any]], modes: Sequence[str], keep_pools: bool
) -> list[dict[str, Any]]:
    rows = []
    for q in queries:
        rel = {addr[i] for i in q["relevant"] if i in addr}
        err = is_error_text(q)
        row: dict[str, Any] = {k: q.get(k) for k in ("id", "type", "split", "low_overlap", "paraphrase", "category")}
        row["relevant"] = bool(rel)
        row["error_text"] = err
        for mode in ARMS:
            if mode != "bm25" and mode not in modes:
                continue
            if mode == "bm25":
                order = bm25_baseline(svc, q["text"])
            elif err:
                order = [
                    (h["scope"], h["key"]) for h in svc.recall(p, q["text"], floor=-1.0, limit=20, mode=mode)["lessons"]
                ]
            else:
                order = [(h["scope"], h["key"]) for h in svc.search(p, q["text"], limit=CONV_K, mode=mode)["results"]]
            row[f"rank_{mode}"] = next((n for n, a in enumerate(order, start=1) if a in rel), None)
            row[f"found_{mode}"] = sum(1 for a in order[:CONV_K] if a in rel) / len(rel) if rel else None
        if "hybrid" in modes:
            printed = svc.recall(p, q["text"])["lessons"]
            row["printed"] = len(printed)
            row["printed_right"] = any((h["scope"], h["key"]) in rel for h in printed)
            row["top_relevance"] = printed[0]["relevance"] if printed else None
        if keep_pools:
            row["pools"] = pools(svc, p, q, rel, err)
        rows.append(row)
    return rows


def pools(svc: Cairn, p: Any, q: dict[str, Any], rel: set[tuple], err: bool) -> dict[str, Any]:
    """The raw candidate features of the hybrid pool, as search (questions) and recall see it."""
    out = {}
    for kind in {"search": err is False, "recall": True}.items():
        if not kind[1]:
            continue
        found = svc.services.search._retrieve(
            p,
            q["text"] if kind[0] == "search" else q["text"][-8000:],
            error=kind[0] == "recall",
            scopes=None,
            repo=None,
            branch=None,
            project=None,
            tag=None,
            trust=None,
            limit=100,
            mode="hybrid",
            weigh=False,
        )
        from sqlalchemy import select

        from cairn.store.schema import lessons

        ids = [c.id for c in found.pool]
        with svc.store.engine.connect() as conn:
            where = dict(conn.execute(select(lessons.c.id, lessons.c.scope).where(lessons.c.id.in_(ids))).all())
            keys = dict(conn.execute(select(lessons.c.id, lessons.c.key).where(lessons.c.id.in_(ids))).all())
        out[kind[0]] = [
            {
                "cos": c.cos,
                "bm25": c.bm25,
                "fts_rank": c.fts_rank,
                "vec_rank": c.vec_rank,
                "coverage": c.coverage,
                "strong": c.strong,
                "y": int((where[c.id], keys[c.id]) in rel),
            }
            for c in found.pool
        ]
    return out


# ----------------------------------------------------------------------------------------- metrics


def summarize(rows: list[dict[str, Any]], mode: str, conv: bool = False) -> dict[str, Any]:
    ans = [r for r in rows if r["relevant"]]
    no = [r for r in rows if not r["relevant"]]
    out: dict[str, Any] = {"n": len(ans), "n_noanswer": len(no)}
    ranks = [r.get(f"rank_{mode}") for r in ans]
    if ans and f"rank_{mode}" in ans[0]:
        out["r@1"] = statistics.mean(1.0 if k == 1 else 0.0 for k in ranks)
        out["r@3"] = statistics.mean(1.0 if k and k <= 3 else 0.0 for k in ranks)
        out["mrr@10"] = statistics.mean(1.0 / k if k and k <= 10 else 0.0 for k in ranks)
        out["r@10"] = statistics.mean(r[f"found_{mode}"] for r in ans) if conv else None
        if mode == "hybrid" and "printed" in ans[0]:
            # What an agent gets: recall's printed lessons for an error text, search's top three otherwise.
            out["served@3"] = statistics.mean(
                (1.0 if r["printed_right"] else 0.0)
                if r["error_text"]
                else (1.0 if r["rank_hybrid"] and r["rank_hybrid"] <= 3 else 0.0)
                for r in ans
            )
            errs = [r for r in ans if r["error_text"]]
            out["answered"] = statistics.mean(1.0 if r["printed_right"] else 0.0 for r in errs) if errs else None
        elif mode in ("bm25", "fts", "vector"):
            out["served@3"] = out["r@3"]  # an arm alone prints its top three, always
    if no:
        if mode == "hybrid" and "printed" in no[0]:
            out["abstain"] = statistics.mean(1.0 if not r["printed"] else 0.0 for r in no)
        else:
            out["abstain"] = 0.0
    return out


def subtypes(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {"all": rows}
    groups["error"] = [r for r in rows if r["type"] == "error"]
    groups["error/low_overlap"] = [r for r in rows if r["type"] == "error" and r.get("low_overlap")]
    groups["error/lexical"] = [r for r in rows if r["type"] == "error" and not r.get("low_overlap")]
    groups["question"] = [r for r in rows if r["type"] == "question"]
    groups["question/paraphrase"] = [r for r in rows if r["type"] == "question" and r.get("paraphrase")]
    groups["noanswer"] = [r for r in rows if r["type"] == "noanswer"]
    cats = sorted({str(r["category"]) for r in rows if r.get("category")})
    for c in cats:
        groups[f"cat/{c}"] = [r for r in rows if str(r.get("category")) == c]
    return {k: v for k, v in groups.items() if v}


# ----------------------------------------------------------------------------------------- fitting


def _standardize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    return mean, scale


def logistic(
    x: np.ndarray,
    y: np.ndarray,
    l2: float = 1.0,
    bias: bool = True,
    sample_w: np.ndarray | None = None,
    iters: int = 100,
) -> tuple[np.ndarray, float]:
    """L2-regularized logistic regression by Newton's method (x standardized by the caller)."""
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))]) if bias else x
    w = np.zeros(xb.shape[1])
    sw = np.ones(n) if sample_w is None else sample_w
    reg = np.full(xb.shape[1], l2)
    if bias:
        reg[-1] = 0.0
    for _ in range(iters):
        z = np.clip(xb @ w, -30, 30)
        pr = 1 / (1 + np.exp(-z))
        grad = xb.T @ (sw * (pr - y)) + reg * w
        hess = (xb * (sw * pr * (1 - pr))[:, None]).T @ xb + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return (w[:-1], float(w[-1])) if bias else (w, 0.0)


def cands_of(pool: list[dict[str, Any]]) -> list[Any]:
    from cairn.core.ranking import Candidate

    return [
        Candidate(
            i,
            cos=c["cos"],
            bm25=c["bm25"],
            fts_rank=c["fts_rank"],
            vec_rank=c["vec_rank"],
            coverage=c["coverage"],
            strong=c.get("strong", 0.0),
        )
        for i, c in enumerate(pool)
    ]


def fit(dev_rows: list[dict[str, Any]], floor_min_abstain: float) -> dict[str, Any]:
    """Fit fusion (pairwise logistic), relevance (pointwise logistic) and the floor on dev pools."""
    from cairn.core.ranking import RANK_FEATURES, RELEVANCE_FEATURES, rank_rows, relevance_rows
    from cairn.search.ranker import Linear

    # Fusion: for every dev query with a right lesson in its pool, pairs (right, wrong) of candidates;
    # a linear scorer whose differences separate them orders the pool (RankNet with a linear net).
    feats_by_q = []
    for r in dev_rows:
        for kind, pool in r["pools"].items():
            if kind == "recall" and not r["error_text"] and r["relevant"]:
                continue  # an answerable question is ranked by search; its recall pool trains relevance only
            x = np.array(rank_rows(cands_of(pool)), dtype=float) if pool else np.zeros((0, len(RANK_FEATURES)))
            y = np.array([c["y"] for c in pool], dtype=float)
            feats_by_q.append((x, y))
    allx = np.vstack([x for x, _ in feats_by_q if len(x)])
    mean, scale = _standardize(allx)
    diffs, weights = [], []
    for x, y in feats_by_q:
        if not len(x) or y.sum() == 0 or y.sum() == len(y):
            continue
        xs = (x - mean) / scale
        pos, neg = xs[y == 1], xs[y == 0]
        d = (pos[:, None, :] - neg[None, :, :]).reshape(-1, xs.shape[1])
        diffs.append(d)
        weights.append(np.full(len(d), 1.0 / len(d)))  # every query counts the same
    d = np.vstack(diffs)
    sw = np.concatenate(weights)
    xx = np.vstack([d, -d])
    yy = np.concatenate([np.ones(len(d)), np.zeros(len(d))])
    best = None
    candidates = []
    for l2 in (0.01, 0.1, 1.0):
        w, _ = logistic(xx, yy, l2=l2, bias=False, sample_w=np.concatenate([sw, sw]))
        candidates.append(
            (f"pairwise l2={l2}", tuple(float(v) for v in w), tuple(map(float, mean)), tuple(map(float, scale)))
        )
    # A small grid on the raw features too: with a few hundred dev queries the pairwise fit spreads its
    # weight over all pairs, while what counts is the top three; the grid optimizes that directly.
    ones, zeros = tuple(1.0 for _ in RANK_FEATURES), tuple(0.0 for _ in RANK_FEATURES)
    for wb, wcov, ws, wf, wv in itertools.product((0, 0.5, 1, 2), (0, 0.5, 1, 2), (0, 1, 2), (0, 0.5, 1), (0, 0.5, 1)):
        candidates.append((f"grid {wb},{wcov},{ws},{wf},{wv}", (4.0, 0.0, wb, wcov, ws, wf, wv), zeros, ones))
    for label, w, m, sc in candidates:
        fusion = Linear(RANK_FEATURES, w, 0.0, m, sc)
        r3, mrr = dev_rank_quality(dev_rows, fusion)
        if best is None or (r3, mrr) > best[0]:
            best = ((r3, mrr), fusion, label)
    assert best is not None
    say(f"  fusion: {best[2]}: dev R@3 {best[0][0]:.3f}, MRR {best[0][1]:.3f} (of {len(candidates)} candidates)")
    fusion = best[1]

    # Relevance: the top candidates of every dev recall pool, ordered by the fitted fusion.
    rel_x, rel_y, per_query = [], [], []
    for r in dev_rows:
        pool = r["pools"].get("recall")
        if pool is None or r["set"] == "conv":
            continue  # recall reads failures; conversational questions train fusion only
        cands = cands_of(pool)
        for c, f in zip(cands, rank_rows(cands), strict=True):
            c.score = fusion.logit(f)
        order = sorted(range(len(cands)), key=lambda i: -cands[i].score)
        ranked = [cands[i] for i in order]
        ys = [pool[i]["y"] for i in order]
        rows = relevance_rows(ranked)
        rel_x += rows[:RELEVANCE_TRAIN_DEPTH]
        rel_y += ys[:RELEVANCE_TRAIN_DEPTH]
        per_query.append((r, rows[:20], ys[:20]))
    x = np.array(rel_x, dtype=float)
    y = np.array(rel_y, dtype=float)
    rmean, rscale = _standardize(x)
    w, b = logistic((x - rmean) / rscale, y, l2=1.0)
    relevance = Linear(RELEVANCE_FEATURES, tuple(map(float, w)), b, tuple(map(float, rmean)), tuple(map(float, rscale)))

    # The floor: sweep; per query, what recall would print (candidates at or above it, best three).
    curve = []
    for t in np.round(np.arange(0.02, 0.99, 0.01), 2):
        ans = ans_ok = noans = noans_quiet = printed_q = printed_ok = 0
        for r, rows, ys in per_query:
            probs = [relevance.prob(f) for f in rows]
            shown = sorted([(pr, yv) for pr, yv in zip(probs, ys, strict=True) if pr >= t], reverse=True)[:3]
            ok = any(yv for _, yv in shown)
            if shown:
                printed_q += 1
                printed_ok += ok
            if r["relevant"] and r["error_text"]:
                ans += 1
                ans_ok += ok
            elif not r["relevant"]:
                noans += 1
                noans_quiet += not shown
        curve.append(
            {
                "floor": float(t),
                "answered": ans_ok / ans,
                "abstain": noans_quiet / noans,
                "precision": printed_ok / printed_q if printed_q else 1.0,
            }
        )
    ok_points = [c for c in curve if c["abstain"] >= floor_min_abstain]
    chosen = max(ok_points, key=lambda c: (c["answered"], -c["floor"])) if ok_points else curve[-1]
    say(
        f"  floor {chosen['floor']:.2f}: dev answered {chosen['answered']:.3f}, abstain {chosen['abstain']:.3f}, "
        f"precision {chosen['precision']:.3f}"
    )
    return {
        "fusion": fusion,
        "relevance": relevance,
        "floor": chosen["floor"],
        "curve": curve,
        "chosen": chosen,
        "fusion_choice": best[2],
        "dev_r3": best[0],
    }


RELEVANCE_TRAIN_DEPTH = 5


def dev_rank_quality(dev_rows: list[dict[str, Any]], fusion: Any) -> tuple[float, float]:
    """Mean over the dev sets (each weighs the same) of recall@3 and MRR@10 under ``fusion``."""
    from cairn.core.ranking import rank_rows

    per_set: dict[str, list[tuple[float, float]]] = {}
    for r in dev_rows:
        if not r["relevant"]:
            continue
        pool = r["pools"]["recall" if r["error_text"] else "search"]
        cands = cands_of(pool)
        scores = [fusion.logit(f) for f in rank_rows(cands)] if cands else []
        order = sorted(range(len(cands)), key=lambda i: -scores[i])
        first = next((n for n, i in enumerate(order[:10], start=1) if pool[i]["y"]), None)
        per_set.setdefault(r["set"], []).append((1.0 if first and first <= 3 else 0.0, 1.0 / first if first else 0.0))
    r3 = statistics.mean(statistics.mean(a for a, _ in v) for v in per_set.values())
    mrr = statistics.mean(statistics.mean(b for _, b in v) for v in per_set.values())
    return round(r3, 4), round(mrr, 4)


def write_model(fitted: dict[str, Any], provenance: dict[str, Any]) -> None:
    path = ROOT / "src" / "cairn" / "search" / "data" / "ranker.json"
    data = {
        "fitted": provenance,
        "floor": fitted["floor"],
        "fusion": fitted["fusion"].as_dict(),
        "relevance": fitted["relevance"].as_dict(),
    }
    path.write_text(json.dumps(data, indent=1) + "\n")
    say(f"wrote {path.relative_to(ROOT)}")


def write_curve(fitted: dict[str, Any]) -> None:
    (EVALS / "abstention_pr.json").write_text(
        json.dumps({"chosen": fitted["chosen"], "curve": fitted["curve"]}, indent=1) + "\n"
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = fitted["curve"]
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    ax[0].plot([p["answered"] for p in c], [p["precision"] for p in c], marker=".")
    ax[0].set_xlabel("answered (answerable error texts printed with a right lesson)")
    ax[0].set_ylabel("precision (printed answers holding a right lesson)")
    ch = fitted["chosen"]
    ax[0].scatter([ch["answered"]], [ch["precision"]], color="red", zorder=3, label=f"floor {ch['floor']:.2f}")
    ax[0].legend()
    ax[1].plot([p["floor"] for p in c], [p["answered"] for p in c], label="answered")
    ax[1].plot([p["floor"] for p in c], [p["abstain"] for p in c], label="abstain (no-answer queries)")
    ax[1].axvline(ch["floor"], color="red", linestyle="--")
    ax[1].set_xlabel("relevance floor")
    ax[1].legend()
    fig.suptitle("recall's relevance model, dev halves of set1 + set2")
    fig.tight_layout()
    fig.savefig(EVALS / "abstention_pr.png", dpi=110)
    say("wrote evals/abstention_pr.json, evals/abstention_pr.png")


# ----------------------------------------------------------------------------------------- main


def markdown(results: list[dict[str, Any]]) -> str:
    """The results as a Markdown table (recall@3 per arm, served@3 and abstention for hybrid) for evals/README.md."""
    groups = ["all", "error", "error/low_overlap", "error/lexical", "question", "question/paraphrase", "noanswer"]
    out = [
        "| set | half | group | n | BM25 | full text | vector | hybrid | evidence R@10 BM25 / hybrid "
        "| served@3 | abstain |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    by = {(r["set"], r["split"], r["group"], r["arm"]): r for r in results}
    order = sorted(
        {(r["set"], r["split"], r["group"]) for r in results},
        key=lambda k: (k[0], k[1] != "test", groups.index(k[2]) if k[2] in groups else 99, k[2]),
    )
    for key in order:
        h = by.get((*key, "hybrid"))
        if h is None:
            continue
        n = h["n"] if key[2] != "noanswer" else h["n_noanswer"]
        cells = [fmt(by.get((*key, a), {}).get("r@3")) for a in ("bm25", "fts", "vector", "hybrid")]
        r10 = f"{fmt(by[(*key, 'bm25')].get('r@10'))} / {fmt(h.get('r@10'))}" if h.get("r@10") is not None else "—"
        out.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {n} | "
            + " | ".join(cells)
            + f" | {r10} | {fmt(h.get('served@3'))} | {fmt(h.get('abstain'))} |"
        )
    return "\n".join(out) + "\n"


def fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else ("—" if v is None else str(v))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--distractors", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sets", nargs="*", default=None, help="set1 set2 conv (default: every set present)")
    ap.add_argument("--modes", nargs="*", default=list(MODES))
    ap.add_argument("--fit", action="store_true", help="refit the ranker on the dev halves, then report")
    ap.add_argument("--min-abstain", type=float, default=0.9, help="--fit: the dev abstention the floor must keep")
    ap.add_argument("--splits", nargs="*", default=["dev", "test"])
    args = ap.parse_args()
    install_embed_cache()
    import cairn.service.search as search_module

    sets = available_sets()
    chosen = [s for s in (args.sets or list(sets)) if s in sets]
    stores: dict[str, tuple] = {}
    queries: dict[str, list[dict[str, Any]]] = {}
    for name in chosen:
        spec = sets[name]
        say(f"building {name}…")
        if spec["kind"] == "conv":
            lessons, qs = conv_records(spec["folder"])
            extra: list[dict[str, Any]] = []
        else:
            lessons, qs = read_jsonl(spec["folder"] / "lessons.jsonl"), read_jsonl(spec["folder"] / "queries.jsonl")
            extra = []
            if args.distractors and spec["distractors"]:
                extra = load_module(spec["distractors"], f"distractors_{name}").generate(
                    args.distractors, seed=args.seed
                )
        stores[name] = build_store(lessons, extra)
        queries[name] = qs

    if args.fit:
        dev_rows = []
        for name in chosen:
            svc, p, addr = stores[name]
            dev = [q for q in queries[name] if q["split"] == "dev"]
            t = time.perf_counter()
            rows = run_queries(svc, p, addr, dev, ["hybrid"], keep_pools=True)
            dev_rows += [r | {"set": name} for r in rows]
            say(f"  {name}: {len(dev)} dev pools in {time.perf_counter() - t:.0f}s")
        (OUT / "dev-pools.json").write_text(json.dumps(dev_rows))  # for --refit (feature work without the stores)
        fitted = fit(dev_rows, args.min_abstain)
        write_model(
            fitted,
            {
                "how": "evals/run_eval.py --fit. fusion: of pairwise logistic regressions (RankNet, linear; every "
                "(right, wrong) candidate pair of each dev query's hybrid pool, queries weighted equally) and a small "
                "grid of raw-feature weights, the one with the best dev recall@3 (then MRR), each dev set weighing "
                "the same; relevance: L2 logistic regression on the top "
                f"{RELEVANCE_TRAIN_DEPTH} candidates of each dev recall pool of set1 and set2 (label: a right "
                "lesson); floor: the most answers on dev error texts while dev abstention on no-answer queries "
                f"stays >= {args.min_abstain}",
                "fusion_choice": fitted["fusion_choice"],
                "data": {
                    name: {
                        "queries": sum(1 for q in queries[name] if q["split"] == "dev"),
                        "distractors": args.distractors,
                        "seed": args.seed,
                    }
                    for name in chosen
                },
                "dev": fitted["chosen"],
            },
        )
        write_curve(fitted)
        import cairn.search.ranker as ranker

        ranker.model.cache_clear()
        search_module.RECALL_FLOOR = ranker.model().floor

    report: dict[str, Any] = {
        "floor": search_module.RECALL_FLOOR,
        "distractors": args.distractors,
        "seed": args.seed,
        "results": [],
    }
    header = (
        f"{'set':<5} {'split':<5} {'group':<20} {'arm':<7} {'n':>4} {'R@1':>6} {'R@3':>6} {'MRR':>6} "
        f"{'R@10':>6} {'served@3':>8} {'abstain':>8}"
    )
    lines = [header, "-" * len(header)]
    for name in chosen:
        svc, p, addr = stores[name]
        conv = sets[name]["kind"] == "conv"
        t = time.perf_counter()
        rows = run_queries(
            svc, p, addr, [q for q in queries[name] if q["split"] in args.splits], args.modes, keep_pools=False
        )
        say(f"  {name}: {len(rows)} queries × {len(args.modes) + 1} arms in {time.perf_counter() - t:.0f}s")
        for split in args.splits:
            split_rows = [r for r in rows if r["split"] == split]
            if not split_rows:
                continue
            for group, grows in subtypes(split_rows).items():
                for mode in ("bm25", *args.modes):
                    m = summarize(grows, mode, conv)
                    report["results"].append({"set": name, "split": split, "group": group, "arm": mode, **m})
                    if group == "all" or not conv or group.startswith("cat/"):
                        lines.append(
                            f"{name:<5} {split:<5} {group:<20} {mode:<7} {m['n']:>4} {fmt(m.get('r@1')):>6} "
                            f"{fmt(m.get('r@3')):>6} {fmt(m.get('mrr@10')):>6} {fmt(m.get('r@10')):>6} "
                            f"{fmt(m.get('served@3')):>8} {fmt(m.get('abstain')):>8}"
                        )
            lines.append("")
        report.setdefault("rows", {})[name] = rows
    print("\n".join(lines))
    print(
        f"recall floor {search_module.RECALL_FLOOR}; served@3 = search's top 3 for a question, what recall "
        "prints for an error text; abstain = recall prints nothing for a no-answer query"
    )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "eval.json").write_text(json.dumps(report, indent=1))
    (OUT / "results.md").write_text(markdown(report["results"]))
    print(f"wrote {OUT / 'eval.json'} and {OUT / 'results.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
