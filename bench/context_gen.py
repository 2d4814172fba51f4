"""Generate realistic Cairn stores for the context/recall benchmark (issue 4).

    .venv/bin/python bench/context_gen.py [--sizes 6,600,6000,60000,1000000] [--regen] [--verify]

One store per size, each its own CAIRN_HOME under ``bench/out/context-stores/<size>/`` (cached: rebuilt
only with ``--regen`` or when ``GENERATOR_VERSION`` or the schema head changes; ``meta.json`` records
both). The mix, for one tenant (``local``):

* scopes: ``global``, 20 repos ``repo::acme/<name>``, branches ``branch::acme/<repo>::<branch>`` for some,
  ``project::<name>``. The measured ladder (repo ``acme/api``, branch ``feat/retry-backoff``, project
  ``api``, plus ``global``) holds ~38% of the store, so "the whole ladder ranked" is a large set;
* ~15% bot-loop bookkeeping: key namespace ``loop::``, a tag ``loop::<bucket>`` (``loop::aw-lessons``,
  ``loop::reviewer-lessons``, ...), written by agents, recurring a lot;
* near-duplicates (an earlier lesson's text with a small edit, under another key), ~10%;
* ~40% candidates, the rest verified (a few rejected, with their tombstones); recurrences (``seen_count``
  1-20, skewed low); helped / not-helped feedback on ~20%; ``updated_at`` spread over a year, skewed
  recent; ~3% expired, ~3% expiring later, ~4% archived, ~0.6% superseded (with a ``supersedes`` link);
* keys are new to the store except where meant: ~4% of repo and branch lessons reuse a key of their
  ladder's broader rung (and so shadow that lesson, as ladder precedence intends);
* text from the real eval lessons (``evals/data/lessons.jsonl``), the eval distractor generator
  (``evals/distractors.py``), and templated API / bot-loop notes, varied per lesson (context sentences,
  incident numbers, small edits, a second sentence), 40-600 characters, every value distinct.

Loading: up to ``SERVICE_LOADER_MAX`` lessons through the service's lossless import
(``Cairn.import_lines`` with exported-format ``lesson`` records: lesson rows, full version histories,
tags, tombstones, links, the hash-chained audit and the full-text index, written by the service in
its batches). That path runs at ~110-300 lessons/s here, so larger stores use ``bulk_replay`` /
``bulk_drain``: the same rows through the service's own statements and functions, batched.
``--check N`` builds N lessons both ways and compares every table; a bulk build re-runs it at
``PRE_CHECK`` lessons first and stops on any difference.

Embeddings are a deliberate shortcut. Embedding a million texts at ~70 texts/s would take four hours
on this machine, and the vector index's cost does not depend on the vectors being exact model
outputs. So the ~3,900 distinct base texts are embedded with the real model (all-MiniLM-L6-v2 int8,
cached), and each lesson gets its base text's vector plus small gaussian noise, L2-normalized (a
near-duplicate gets its original's vector plus smaller noise). The service's own
``drain_embeddings`` writes them (vec0 row, float vector, signature, ``embed_state``), handed them
by ``StandInModel`` (the real model's name and dimension), so they land where real vectors would and
no search or session start begins by draining a million-lesson queue.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "evals"))

OUT_DIR = ROOT / "bench" / "out"
STORES = OUT_DIR / "context-stores"
GENERATOR_VERSION = 3
DEFAULT_SIZES = (6, 600, 6_000, 60_000, 1_000_000)
CHUNK = 10_000  # records per import_lines call (the import itself commits every 500)
DISTRACTORS = 3_000
NOISE = 0.015  # per-dimension sigma: cosine to the base vector ~0.96
DUP_NOISE = 0.006  # a near-duplicate's vector around its original's: cosine ~0.99

# The working context the benchmark measures: these four rungs hold ~37% of every store.
LADDER = {"repo": "acme/api", "branch": "feat/retry-backoff", "project": "api"}
LADDER_SCOPES = ["branch::acme/api::feat/retry-backoff", "repo::acme/api", "project::api", "global"]

REPOS = [
    "api", "web", "billing", "auth", "search", "mobile", "infra", "etl", "docs", "payments", "gateway",
    "notifications", "analytics", "admin", "worker", "cli", "sdk", "ml", "data-platform", "design-system",
]  # fmt: skip
OTHER_API_BRANCHES = ["main", "fix/timeout-budget", "release/2.4", "feat/oauth-pkce"]
BRANCHED_REPOS = {
    "web": ["main", "feat/checkout-v2", "fix/hydration"],
    "billing": ["main", "release/2024.11"],
    "auth": ["feat/passkeys", "main"],
    "mobile": ["release/5.2", "main"],
    "infra": ["main", "chore/terraform-1.9"],
    "search": ["feat/hybrid-ranking"],
}
OTHER_PROJECTS = ["platform", "data", "growth", "mobile"]
LOOP_BUCKETS = [  # (bucket tag, key prefix, source agent, weight)
    ("loop::aw-lessons", "aw", "aw", 5),
    ("loop::reviewer-lessons", "reviewer", "pr-reviewer", 3),
    ("loop::triage-lessons", "triage", "triage-bot", 1),
    ("loop::deps-lessons", "deps", "renovate-loop", 1),
    ("loop::flaky-hunter", "flaky", "flaky-hunter", 1),
]
HUMANS = ["dana@acme.dev", "lee@acme.dev", "priya@acme.dev", "sam@acme.dev", "yuki@acme.dev", "omar@acme.dev"]
AGENTS = ["claude-code", "codex", "cursor", "aider"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]  # fmt: skip


def _scope_table() -> list[tuple[str, float]]:
    """(scope, weight); the ladder's four rungs first (0.37 of the mass)."""
    table = [
        ("branch::acme/api::feat/retry-backoff", 0.04),
        ("repo::acme/api", 0.15),
        ("project::api", 0.06),
        ("global", 0.12),
    ]
    table += [(f"branch::acme/api::{b}", 0.03 / len(OTHER_API_BRANCHES)) for b in OTHER_API_BRANCHES]
    table += [(f"project::{p}", 0.05 / len(OTHER_PROJECTS)) for p in OTHER_PROJECTS]
    others = REPOS[1:]
    zipf = [1 / (i + 1) ** 0.8 for i in range(len(others))]
    table += [(f"repo::acme/{r}", 0.44 * z / sum(zipf)) for r, z in zip(others, zipf, strict=True)]
    branches = [(r, b) for r, bs in BRANCHED_REPOS.items() for b in bs]
    table += [(f"branch::acme/{r}::{b}", 0.08 / len(branches)) for r, b in branches]
    return table


# ------------------------------------------------------------------------------------------------ text pool

API_TOPICS = [
    ("retry-backoff", ["http", "retries"],
     "Outbound calls from acme/api to {svc} retry with exponential backoff and full jitter (base {ms} ms, "
     "cap {cap} s); a fixed sleep between retries synchronised {n} pods into a thundering herd."),
    ("retry-budget", ["http", "retries"],
     "Give every request a retry budget: at most {n} retries and {cap} s in total across the call chain, "
     "or a slow {svc} turns one user request into dozens."),
    ("retry-idempotency", ["http", "idempotency"],
     "Only retry {svc} calls that carry an Idempotency-Key; POSTs without one were charged twice when "
     "the first attempt timed out after the write had committed."),
    ("backoff-429", ["http", "rate-limit"],
     "On HTTP 429 from {svc}, honour Retry-After instead of our own backoff schedule; ignoring it got the "
     "API key throttled for {n} minutes."),
    ("timeout-budget", ["http", "timeouts"],
     "Set the client timeout below the caller's deadline: acme/api's gateway gives up after {cap} s, so a "
     "{svc} call with a {n} s timeout keeps working for a client that is already gone."),
    ("circuit-breaker", ["resilience"],
     "Wrap {svc} in the circuit breaker from acme/api's resilience module (opens after {n} failures in "
     "{cap} s); retrying into an outage only deepens it."),
    ("pagination-cursor", ["api", "pagination"],
     "List endpoints in acme/api page by opaque cursor, never by offset: offsets skip rows when {svc} "
     "inserts during a walk. The cursor encodes (created_at, id)."),
    ("error-envelope", ["api", "errors"],
     "Every acme/api error response uses the envelope {{code, message, details}}; clients switch on code, "
     "so never change a code's meaning, add a new one (see ERRORS.md, {n} codes so far)."),
    ("auth-token-refresh", ["auth", "http"],
     "Refresh the {svc} OAuth token {n} s before expiry, not on the first 401: a burst of 401s during the "
     "refresh window retried into the rate limit."),
    ("db-pool-size", ["db", "perf"],
     "acme/api's SQLAlchemy pool is {n} per worker; raising it past the Postgres max_connections divided "
     "by the worker count made {svc} time out under load."),
    ("migration-lock", ["db", "migrations"],
     "Run acme/api migrations from the release job only; two pods racing `alembic upgrade head` held an "
     "ACCESS EXCLUSIVE lock on {svc}'s table for {n} s."),
    ("webhook-dedupe", ["webhooks", "idempotency"],
     "Webhook deliveries from {svc} arrive at least once: dedupe on the event id in the webhook_events "
     "table before acting, kept {n} days."),
    ("feature-flag-cleanup", ["flags"],
     "Remove a feature flag from acme/api within {n} days of full rollout; the stale {svc} flag kept a "
     "dead code path alive that broke the next migration."),
    ("openapi-drift", ["api", "ci"],
     "CI fails when openapi.yaml and the routes disagree: regenerate with `make openapi` after touching "
     "a handler for {svc}, never edit the YAML by hand."),
    ("request-id", ["observability"],
     "Propagate X-Request-Id from acme/api into every {svc} call and log line; without it the {n}-hop "
     "traces could not be stitched together during incidents."),
    ("jitter-tests", ["tests", "retries"],
     "Tests of retry logic inject the clock and the RNG (`RetryPolicy(clock=fake, rng=seeded)`); "
     "sleeping for real made the {svc} suite take {n} minutes and flake."),
    ("grpc-deadline", ["grpc", "timeouts"],
     "gRPC calls to {svc} must set a deadline; the default is none, and a hung backend held {n} "
     "worker threads until the pod was OOMKilled."),
    ("cache-stampede", ["cache", "perf"],
     "Cache {svc} lookups with a jittered TTL ({cap} s +/- 10%) and a single-flight lock; all keys "
     "expiring together sent {n}x the normal load to the database."),
]  # fmt: skip
API_SERVICES = ["the payments provider", "the ledger service", "Stripe", "the search cluster", "the auth server",
                "the email gateway", "the inventory service", "the geocoding API", "the fraud scorer",
                "the notification hub", "S3", "the pricing service"]  # fmt: skip

LOOP_OBSERVATIONS = [
    "the build step failed because the lockfile was stale",
    "tests passed locally but CI ran them in parallel and a fixture leaked state",
    "the PR touched generated code that `make generate` would overwrite",
    "reviewers asked for a changelog entry that was missing",
    "the migration lacked a down revision",
    "a retry loop had no jitter",
    "the new endpoint was missing from openapi.yaml",
    "a log line printed a bearer token",
    "the plan skipped reading CONTRIBUTING.md and used the wrong commit format",
    "type checking failed on an untyped third-party import",
    "the flaky test was quarantined instead of fixed",
    "the dependency bump broke the lockfile hash in the cache key",
    "the PR description did not link the issue",
    "the benchmark numbers were taken on a busy machine",
    "an assertion compared floats for equality",
    "the test relied on dict ordering from a JSON fixture",
    "the handler swallowed an exception and returned 200",
    "a TODO was left without an issue number",
]  # fmt: skip
LOOP_ACTIONS = [
    "run `make lint test` before pushing",
    "regenerate the lockfile with the pinned tool version",
    "check the diff of generated files separately",
    "add the changelog entry in the same commit",
    "write the down migration and run it once",
    "use the shared RetryPolicy instead of a hand-rolled loop",
    "run `make openapi` and commit the result",
    "redact headers with the logging filter",
    "read CONTRIBUTING.md at the start of every task",
    "add a stub package to the type-check requirements",
    "reproduce with `pytest -p no:randomly -n 0` first",
    "link the issue in the PR body with Fixes #N",
    "compare with math.isclose and an explicit tolerance",
    "sort keys before comparing JSON",
    "let the error handler map exceptions to the error envelope",
]  # fmt: skip

CONTEXT_SENTENCES = [
    "Seen again on acme/{repo} in {month}.",
    "Hit during INC-{n}.",
    "Confirmed by {who} on {date}.",
    "Also applies to the {repo} service.",
    "Came up in review of PR #{n}.",
    "Cost half a day in {month} before anyone remembered this.",
    "Reproduced on CI run {n}.",
    "Still true after the {month} upgrade.",
]
PREFIXES = ["", "", "", "", "Reminder: ", "Note: ", "Team rule: ", "Heads up: ", "Important: "]
EDITS = [  # near-duplicate edits: small changes a second writer makes
    (" must ", " should "), (" never ", " do not "), ("; ", ". "), (" the ", " our "), (", ", " - "),
    (" is ", " is usually "), (" before ", " prior to "), (" instead of ", " rather than "),
]  # fmt: skip


def _slug(text: str, limit: int = 40) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].strip("-") or "note"


def text_pool() -> list[dict[str, Any]]:
    """Distinct base texts: {key, value, tags, loop}; deterministic."""
    import distractors

    rng = random.Random(GENERATOR_VERSION * 7919)
    pool: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(key: str, value: str, tags: list[str], loop: bool = False) -> None:
        if value in seen:
            return
        seen.add(value)
        pool.append({"key": _slug(key, 48), "value": value, "tags": tags[:4], "loop": loop})

    for line in (ROOT / "evals" / "data" / "lessons.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            add(rec["key"], rec["value"], list(rec.get("tags") or []))
    for rec in distractors.generate(DISTRACTORS, seed=11):
        add(str(rec["key"]), str(rec["value"]), [str(t) for t in rec["tags"]])
    for key, tags, template in API_TOPICS:
        for svc in API_SERVICES:
            for _ in range(2):
                value = template.format(
                    svc=svc,
                    ms=rng.choice([50, 100, 200, 250]),
                    cap=rng.choice([2, 5, 10, 30]),
                    n=rng.choice([3, 5, 8, 12, 20, 40]),
                )
                add(f"{key}-{_slug(svc.replace('the ', ''), 20)}", value, ["api", *tags])
    for bucket, prefix, _agent, _w in LOOP_BUCKETS:
        for obs in LOOP_OBSERVATIONS:
            for act in rng.sample(LOOP_ACTIONS, 4):
                value = f"{prefix} loop: {obs}; next time {act}."
                add(f"{_slug(obs, 30)}-{_slug(act, 16)}", value, [bucket], loop=True)
    return pool


def pool_vectors(pool: list[dict[str, Any]]) -> Any:
    """The real model's vectors for the pool, cached next to the stores."""
    import numpy as np

    from cairn.search.embed import MODEL_NAME, get_embedder
    from cairn.service.embeddings import embed_text as _embed_text

    texts = [_embed_text({"key": p["key"], "value": p["value"]}) for p in pool]
    digest = hashlib.sha256(("\n".join(texts) + MODEL_NAME).encode()).hexdigest()[:16]
    cache = STORES / f"pool-{digest}.npy"
    if cache.exists():
        return np.load(cache)
    STORES.mkdir(parents=True, exist_ok=True)
    say(f"embedding the text pool: {len(texts):,} texts with {MODEL_NAME}")
    t0 = time.perf_counter()
    emb = get_embedder()
    parts = []
    for start in range(0, len(texts), 256):
        parts.append(emb.embed(texts[start : start + 256]))
        done = min(start + 256, len(texts))
        if done % 1024 == 0 or done == len(texts):
            say(f"  {done:,}/{len(texts):,} ({done / (time.perf_counter() - t0):.0f} texts/s)")
    vecs = np.vstack(parts).astype("<f4")
    np.save(cache, vecs)
    return vecs


# ------------------------------------------------------------------------------------------------ records


def _t(d: datetime) -> str:
    from cairn.core.timeparse import format_time

    return format_time(d)


class Generator:
    """Deterministic lesson records in export format, chunk by chunk."""

    def __init__(self, pool: list[dict[str, Any]], now: datetime, seed: int = GENERATOR_VERSION) -> None:
        self.pool = pool
        self.plain = [i for i, p in enumerate(pool) if not p["loop"]]
        self.loops_by_bucket: dict[str, list[int]] = {}
        for i, p in enumerate(pool):
            if p["loop"]:
                self.loops_by_bucket.setdefault(p["tags"][0], []).append(i)
        self.api = [i for i in self.plain if "acme/api" in pool[i]["value"]]
        self.now = now
        self.rng = random.Random(seed * 104_729)
        scopes = _scope_table()
        self.scope_names = [s for s, _ in scopes]
        total = sum(w for _, w in scopes)
        acc = 0.0
        self.scope_cdf = []
        for _, w in scopes:
            acc += w / total
            self.scope_cdf.append(acc)
        self.buckets = [b for b in LOOP_BUCKETS for _ in range(b[3])]
        self.keys: dict[str, int] = {}
        self.recent: dict[str, list[str]] = {}  # recent keys per scope, for overrides
        self.taken: set[tuple[str, str]] = set()
        self.values: set[int] = set()
        self.i = 0

    def _scope(self) -> str:
        # A low-discrepancy sequence: proportions hold even in a 6-lesson store.
        u = (self.i * 0.6180339887498949 + 0.5) % 1.0
        for name, edge in zip(self.scope_names, self.scope_cdf, strict=True):
            if u < edge:
                return name
        return self.scope_names[-1]

    def _key(self, scope: str, base: str) -> str:
        """A key new to the whole store (numbered per base key, not per scope), so that the same key
        in two rungs of a ladder, which shadows the broader lesson, happens only where meant
        (``_override``), as when a repo pins its own version of a global lesson."""
        n = self.keys.get(base, 0)
        self.keys[base] = n + 1
        key = base if n == 0 else f"{base}-{n + 1}"
        self.recent.setdefault(scope, []).append(key)
        if len(self.recent[scope]) > 400:
            del self.recent[scope][:200]
        return key

    def _override(self, scope: str) -> str | None:
        """Now and then a repo or branch lesson reuses a key of its ladder's broader rung (~4%)."""
        if not scope.startswith(("repo::", "branch::")) or self.rng.random() >= 0.04:
            return None
        if scope.startswith("branch::"):
            broader = "repo::" + scope.split("::")[1]
        else:
            broader = self.rng.choice(["global", "project::" + scope.split("/")[-1]])
        keys = self.recent.get(broader)
        if not keys:
            return None
        key = self.rng.choice(keys)
        if (scope, key) in self.taken:
            return None
        return key

    def _fill(self, text: str) -> str:
        r = self.rng
        return text.format(
            repo=r.choice(REPOS),
            month=r.choice(MONTHS),
            n=r.randint(100, 99_999),
            who=r.choice(HUMANS).split("@")[0].title(),
            date=f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
        )

    def _distinct(self, value: str) -> str:
        value = value[:600]
        while hash(value) in self.values or len(value) < 40:
            extra = " " + self._fill(self.rng.choice(CONTEXT_SENTENCES))
            value = (value[: 600 - len(extra)] + extra).strip()
        self.values.add(hash(value))
        return value

    def chunk(self, n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[int, int]]]:
        """``n`` lesson records, extra records (tombstones, links), and per lesson (base, dup_of index)."""
        r = self.rng
        recs: list[dict[str, Any]] = []
        extra: list[dict[str, Any]] = []
        origin_vec: list[tuple[int, int]] = []
        for _ in range(n):
            scope = self._scope()
            self.i += 1
            loop = r.random() < 0.15
            dup_of = -1
            if loop:
                bucket, prefix, agent, _w = r.choice(self.buckets)
                base = r.choice(self.loops_by_bucket[bucket])
                p = self.pool[base]
                value = p["value"]
                if r.random() < 0.8:
                    value += f" (run {r.randint(1000, 99_999)})"
                key = self._key(scope, f"loop::{prefix}-{p['key']}")
                tags = [bucket]
                origin, author, source = "agent", agent, agent
            else:
                if recs and r.random() < 0.10:  # near-duplicate of a lesson from this chunk
                    dup_of = r.randrange(max(0, len(recs) - 500), len(recs))
                    src = recs[dup_of]
                    if src["key"].startswith("loop::"):
                        dup_of = -1
                if dup_of >= 0:
                    src = recs[dup_of]
                    base = origin_vec[dup_of][0]
                    value = src["versions"][-1]["value"]
                    old, new = r.choice(EDITS)
                    value = value.replace(old, new, 1) if old in value else value.rstrip(".") + "!"
                    scope = src["scope"] if r.random() < 0.6 else scope
                    key = self._key(scope, self.pool[base]["key"] + r.choice(["-again", "-note", "-tip", "-v2"]))
                    tags = list(src["versions"][-1]["tags"])
                else:
                    in_api = scope in LADDER_SCOPES[:3] or scope.startswith("branch::acme/api")
                    base = r.choice(self.api if in_api and r.random() < 0.5 else self.plain)
                    p = self.pool[base]
                    roll = r.random()
                    if roll < 0.10:  # short: the first sentence only
                        value = re.split(r"(?<=[.;:])\s", p["value"])[0]
                    elif roll < 0.20:  # long: with a second lesson's text appended
                        value = p["value"] + " " + self.pool[r.choice(self.plain)]["value"]
                    else:
                        value = p["value"]
                    value = r.choice(PREFIXES) + value
                    if r.random() < 0.5:
                        value += " " + self._fill(r.choice(CONTEXT_SENTENCES))
                    key = self._override(scope) or self._key(scope, p["key"])
                    tags = list(p["tags"])
                o = r.random()
                if o < 0.20:
                    origin, author, source = "human", r.choice(HUMANS), None
                elif o < 0.90:
                    origin, author, source = "agent", r.choice(HUMANS), r.choice(AGENTS)
                else:
                    origin, author, source = "import", "migration-2025", None
            value = self._distinct(value)
            self.taken.add((scope, key))
            recs.append(self._lesson(scope, key, value, tags, origin, author, source, loop))
            origin_vec.append((base, dup_of))
            # A near-duplicate sometimes replaces its original: supersede, with the link.
            if dup_of >= 0 and r.random() < 0.10:
                old = recs[dup_of]
                last = old["versions"][-1]
                new = recs[-1]
                if (
                    old["superseded_by"] is None
                    and old["archived_at"] is None
                    and last["trust"] != "rejected"
                    and last["expires_at"] is None
                    and new["versions"][-1]["trust"] != "rejected"
                    and (old["scope"], old["key"]) != (new["scope"], new["key"])
                ):
                    at = max(datetime.fromisoformat(new["created_at"]), datetime.fromisoformat(last["recorded_at"]))
                    at += timedelta(seconds=5)
                    if at < self.now:
                        old["versions"].append(
                            dict(last, version=last["version"] + 1, action="superseded", recorded_at=_t(at))
                        )
                        old["superseded_by"] = {"scope": new["scope"], "key": new["key"]}
                        extra.append(
                            {
                                "type": "link",
                                "src": {"scope": new["scope"], "key": new["key"]},
                                "dst": {"scope": old["scope"], "key": old["key"]},
                                "rel": "supersedes",
                                "created_at": _t(at),
                                "created_by": new["created_by"],
                            }
                        )
            last = recs[-1]["versions"][-1]
            if last["trust"] == "rejected":
                from cairn.core.content import content_hash

                extra.append(
                    {
                        "type": "tombstone",
                        "content_hash": content_hash(last["value"]),
                        "scope": scope,
                        "key": key,
                        "reason": "wrong: contradicted by the runbook",
                        "created_at": last["recorded_at"],
                        "created_by": last["actor"],
                        "lifted_at": None,
                        "lifted_by": None,
                        "lift_reason": None,
                    }
                )
        return recs, extra, origin_vec

    def _lesson(
        self,
        scope: str,
        key: str,
        value: str,
        tags: list[str],
        origin: str,
        author: str,
        source: str | None,
        loop: bool,
    ) -> dict[str, Any]:
        r = self.rng
        now = self.now
        age = timedelta(days=365 * r.random() ** 1.6, seconds=3600 + r.randint(0, 3600))
        created = now - age
        human = origin == "human"
        actor = author if human else "agent"
        if loop:
            seen = 1 + int(19 * r.random() ** 1.3)
            trust = "candidate" if r.random() < 0.7 else "verified"
        else:
            seen = 1 if r.random() < 0.55 else 2 + int(18 * r.random() ** 2.5)
            trust = "verified" if human or r.random() >= 0.434 else "candidate"
        if r.random() < 0.01:
            trust = "rejected"
        helped = not_helped = 0
        if r.random() < 0.2:
            helped, not_helped = int(8 * r.random() ** 2), int(4 * r.random() ** 2)
        expires = None
        roll = r.random()
        if roll < 0.03:  # expired: a TTL that ran out
            expires = created + timedelta(days=r.uniform(1, 30))
            if expires >= now:
                expires = now - timedelta(hours=1)
        elif roll < 0.06:
            expires = now + timedelta(days=r.uniform(7, 180))
        archive = trust != "rejected" and r.random() < 0.04
        kind = r.choices(["lesson", "fact", "preference", "reference"], [70, 12, 10, 8])[0]
        trigger = r.choice(["session-end", "tool-failure", "review", None, None]) if not human else None
        steps: list[tuple[str, dict[str, Any]]] = []
        state = {
            "value": value,
            "trust": "verified" if human else "candidate",
            "seen_count": 1,
            "helped_count": 0,
            "not_helped_count": 0,
            "archived": False,
        }
        if r.random() < 0.08:  # an edit: the first version said a little less
            first = value.rsplit(" ", 3)[0]
            if len(first) >= 40 and first != value:
                steps.append(("create", dict(state, value=first)))
                steps.append(("update", dict(state)))
        if not steps:
            steps.append(("create", dict(state)))
        if seen > 1:
            state["seen_count"] = seen
            steps.append(("recur", dict(state)))
        if trust == "verified" and not human:
            state["trust"] = "verified"
            steps.append(("promote" if seen >= 3 else "verify", dict(state)))
        if helped or not_helped:
            state.update(helped_count=helped, not_helped_count=not_helped)
            steps.append(("feedback", dict(state)))
        if trust == "rejected":
            state["trust"] = "rejected"
            steps.append(("forget", dict(state)))
        if archive:
            state["archived"] = True
            steps.append(("archive", dict(state)))
        span = (now - created).total_seconds()
        times = sorted(created + timedelta(seconds=span * r.random() ** 0.7) for _ in steps[1:])
        times = [created, *times]
        versions = []
        for n, ((action, st), at) in enumerate(zip(steps, times, strict=True), start=1):
            versions.append(
                {
                    "version": n,
                    "action": action,
                    "value": st["value"],
                    "tags": tags,
                    "kind": kind,
                    "source_agent": source,
                    "trigger": trigger,
                    "trust": st["trust"],
                    "archived": st["archived"],
                    "seen_count": st["seen_count"],
                    "helped_count": st["helped_count"],
                    "not_helped_count": st["not_helped_count"],
                    "valid_from": None,
                    "valid_to": None,
                    "expires_at": _t(expires) if expires else None,
                    "recorded_at": _t(at),
                    "actor": actor if action in ("create", "update", "recur") else r.choice(HUMANS),
                    "session": f"s-{r.randint(1, 10**9):x}" if action in ("create", "recur") and not human else None,
                }
            )
        return {
            "type": "lesson",
            "scope": scope,
            "key": key,
            "origin": origin,
            "author": author,
            "url": None,
            "archived_at": versions[-1]["recorded_at"] if archive else None,
            "superseded_by": None,
            "created_at": _t(created),
            "created_by": actor,
            "versions": versions,
        }


# ------------------------------------------------------------------------------------------------ stores


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def schema_head() -> str:
    from cairn.store.migrations import HEAD

    return HEAD


def store_home(size: int) -> Path:
    return STORES / str(size)


def cached_meta(size: int) -> dict[str, Any] | None:
    meta_file = store_home(size) / "meta.json"
    if not meta_file.exists():
        return None
    meta = json.loads(meta_file.read_text())
    if (
        meta.get("complete")
        and meta.get("generator_version") == GENERATOR_VERSION
        and meta.get("schema_head") == schema_head()
    ):
        return meta
    return None


SERVICE_LOADER_MAX = 60_000  # stores up to this size load through Cairn.import_lines itself
PRE_CHECK = 2_000  # a bulk build first compares the two loaders on this many lessons


def build_store(
    size: int,
    regen: bool = False,
    loader: str | None = None,
    home: Path | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Build (or reuse) the store of ``size`` lessons; returns its meta (build figures included).

    ``loader``: ``service`` imports every record with ``Cairn.import_lines`` (the lossless path, one
    ``mutate.replay`` per lesson: ~300 lessons/s here); ``bulk`` writes the very same rows with the
    service's own statements and functions, batched (``bulk_replay``); ``--check`` proves the two
    stores identical. Default: ``service`` up to ``SERVICE_LOADER_MAX`` lessons, ``bulk`` above.
    """
    loader = loader or ("service" if size <= SERVICE_LOADER_MAX else "bulk")
    meta = None if regen or home is not None else cached_meta(size)
    if meta is not None:
        return {**meta, "cached": True}
    import numpy as np
    from sqlalchemy import func, select

    from cairn.core.timeparse import utcnow
    from cairn.runtime.local import local_principal
    from cairn.search.embed import DIM
    from cairn.service.api import Cairn
    from cairn.store.engine import Store, sqlite_url
    from cairn.store.schema import embed_queue

    for name in ("CAIRN_EMBED_MODEL", "CAIRN_FAKE_NOW", "CAIRN_SESSION", "CAIRN_ACTOR"):
        os.environ.pop(name, None)
    if loader == "bulk" and home is None:
        # The fast path must still write what the service writes: prove it on a small store first.
        proof = check(PRE_CHECK)
        if not proof["identical"]:
            raise SystemExit(f"bulk loader no longer matches Cairn.import_lines: {json.dumps(proof, default=str)}")
        say(f"bulk loader checked against the service at {PRE_CHECK:,} lessons: identical")
    home = home or store_home(size)
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    pool = text_pool()
    vecs = pool_vectors(pool)
    say(f"store {size:,}: generating and loading ({loader}) into {home}")
    svc = Cairn(Store(sqlite_url(home)))
    p = local_principal()
    svc.ensure_tenant(p)
    if loader == "bulk":
        svc.drain_embeddings(p)  # nothing queued yet: records the model in embed_state, as a first search does
    now = now or utcnow()
    gen = Generator(pool, now)
    nprng = np.random.default_rng(GENERATOR_VERSION)
    totals = {"created": 0, "tombstones": 0, "links": 0, "vectors": 0}
    t_gen = t_import = t_vec = 0.0
    started = time.perf_counter()
    done = 0
    while done < size:
        n = min(CHUNK, size - done)
        t0 = time.perf_counter()
        recs, extra, origins = gen.chunk(n)
        t1 = time.perf_counter()
        if loader == "service":
            lines = [json.dumps(x, ensure_ascii=False) for x in recs + extra]
            result = svc.import_lines(p, lines, restore=True)  # the operator's exact restore
        else:
            result = bulk_replay(svc, p, recs, extra)
        t2 = time.perf_counter()
        if result["refused"] or result["created"] != n:
            raise SystemExit(f"import did not create every lesson: {json.dumps(result)[:2000]}")
        for k in ("created", "tombstones", "links"):
            totals[k] += result[k]
        # Vectors: the base text's plus noise; a near-duplicate's around its original's. The service's
        # own drain writes them (vec0 row, float vector, signature, generation counter: whatever the
        # current drain_embeddings writes), handed these vectors by a stand-in for the model.
        chunk_vecs = np.empty((n, DIM), dtype="<f4")
        noise = nprng.standard_normal((n, DIM)).astype("<f4")
        for j, (base, dup_of) in enumerate(origins):
            v = chunk_vecs[dup_of] + DUP_NOISE * noise[j] if dup_of >= 0 else vecs[base] + NOISE * noise[j]
            chunk_vecs[j] = v / np.linalg.norm(v)
        by_value = {rec["versions"][-1]["value"].rstrip(): chunk_vecs[j] for j, rec in enumerate(recs)}
        with stand_in_model(by_value):
            if loader == "service":
                totals["vectors"] += svc.drain_embeddings(p)
            else:
                totals["vectors"] += bulk_drain(svc, p, by_value)
        t3 = time.perf_counter()
        t_gen += t1 - t0
        t_import += t2 - t1
        t_vec += t3 - t2
        done += n
        if size >= 50_000:
            el = time.perf_counter() - started
            say(
                f"  {done:,}/{size:,} lessons ({done / el:,.0f}/s overall; generate {t_gen:.0f} s, "
                f"load {t_import:.0f} s, vectors {t_vec:.0f} s; ~{(size - done) / (done / el) / 60:.1f} min left)"
            )
    left = svc.store.run(lambda c: c.execute(select(func.count()).select_from(embed_queue)).scalar(), write=False)
    svc.store.dispose()
    _finish(home)
    total_s = time.perf_counter() - started
    meta = {
        "generator_version": GENERATOR_VERSION,
        "schema_head": schema_head(),
        "lessons": size,
        "loader": loader,
        "generated_at": _t(now),
        "pool_texts": len(pool),
        **totals,
        "embed_queue_left": left,
        "seconds": round(total_s, 1),
        "per_s": round(size / total_s, 1),
        "generate_seconds": round(t_gen, 1),
        "load_seconds": round(t_import, 1),
        "load_per_s": round(size / t_import, 1) if t_import else None,
        "vector_seconds": round(t_vec, 1),
        "db_mb": round((home / "cairn.db").stat().st_size / 1e6, 1),
        "complete": True,
    }
    meta.update(store_counts(home))
    (home / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    say(f"store {size:,}: {total_s:.1f} s ({meta['per_s']:,.0f} lessons/s), {meta['db_mb']} MB")
    return {**meta, "cached": False}


class StandInModel:
    """Answers ``embed`` with the generator's vectors for exactly the texts it was given.

    It carries the real model's name and dimension, so the vectors land where the real model's would.
    """

    def __init__(self, name: str, dim: int, by_value: dict[str, Any]) -> None:
        self.name, self.dim, self.by_value = name, dim, by_value

    def embed(self, texts: Any, batch_size: int = 16) -> Any:
        import numpy as np

        # _embed_text is "<key words>. <value>" and keys are slugs (no ". "): the value follows it.
        return np.vstack([self.by_value[t.split(". ", 1)[1]] for t in texts]).astype("<f4")


@contextmanager
def stand_in_model(by_value: dict[str, Any]) -> Iterator[None]:
    from cairn.search import embed

    real = embed.get_embedder
    embed.get_embedder = lambda: StandInModel(embed.MODEL_NAME, embed.DIM, by_value)  # type: ignore[assignment]
    try:
        yield
    finally:
        embed.get_embedder = real  # type: ignore[assignment]


def bulk_drain(svc: Any, p: Any, by_value: dict[str, Any]) -> int:
    """What ``Cairn.drain_embeddings`` writes for a queue of fresh lessons, in one transaction.

    The drain reads ``DRAIN_BATCH`` queued lessons, embeds them and writes each batch with
    ``embeddings._write_vectors`` in a transaction of its own; here the whole chunk's queue is read
    once and handed, ``DRAIN_BATCH`` at a time, to that same function (vec0 rows, float vectors,
    signatures, the queue entries dropped, one ``embed_state.generation`` bump per batch) inside one
    transaction, so the rows are the drain's own. ``build_store`` first calls ``drain_embeddings`` on
    the empty queue, which records the model in ``embed_state``. ``--check`` compares all of it with
    the real drain's.
    """
    from cairn.search import embed
    from cairn.service.embeddings import DRAIN_BATCH, _queued, _write_vectors
    from cairn.service.embeddings import embed_text as _embed_text

    model = embed.get_embedder()  # the stand-in: the real model's name and dimension
    tenant = p.tenant_id

    def tx(conn: Any) -> int:
        _big_cache(conn)
        queued = _queued(conn, tenant, 10**9)
        written = 0
        for start in range(0, len(queued), DRAIN_BATCH):
            batch = queued[start : start + DRAIN_BATCH]
            vectors = model.embed([_embed_text(r) for r in batch])
            written += _write_vectors(conn, tenant, model, batch, vectors)[0]
        return written

    return int(write_tx(svc, tx, tenant))


def _big_cache(conn: Any) -> None:
    """A page cache that holds the indexes a million-lesson build inserts into (~400 MB).

    With SQLite's default 2 MB, each batch re-reads the B-tree pages of every index it touches
    from the file, which is most of a large build's time. The setting is the connection's; the
    store's own pragmas (WAL, synchronous, foreign keys) are left as they are.
    """
    if conn.dialect.name == "sqlite":  # backends_bench drains into Postgres with bulk_drain too
        conn.exec_driver_sql("PRAGMA cache_size = -400000")


def write_tx(svc: Any, fn: Any, tenant: str) -> Any:
    """``Store.run(fn, write=True)``, naming the tenant where the store wants it named."""
    import inspect

    if "tenant" in inspect.signature(svc.store.run).parameters:
        return svc.store.run(fn, write=True, tenant=tenant)
    return svc.store.run(fn, write=True)


BULK_TX = 5_000  # lessons per transaction in bulk_replay


def bulk_replay(svc: Any, p: Any, recs: list[dict[str, Any]], extra: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``Cairn.import_lines(..., restore=True)`` does with exported ``lesson`` records, batched.

    The import parses each JSON line, validates it like a write (``make_write``) and hands plainly new
    lessons to ``mutate.replay_many`` in batches of its ``BATCH`` (500). This validates the values the
    same way (``validate_value``, ``normalize_tags``, ``content_hash``: the records are the generator's
    own, not a file) and calls that same ``replay_many`` with ``BULK_TX`` lessons a transaction: the
    lesson rows, full version histories, tags, the full-text entry and embed queue entry of active
    lessons, the inactive ones kept out of the indexes, and one ``import`` audit row each with its
    state proofs read back from the database. Tombstone and link records, and the ``superseded_by``
    pointers, go through ``Cairn.import_lines`` itself afterwards (~1% of records). ``--check``
    compares a store built this way with one built by ``import_lines``, table by table.
    """
    from cairn.core.content import content_hash, validate_value
    from cairn.core.timeparse import utcnow
    from cairn.service import mutate
    from cairn.service.write_input import normalize_tags

    def ts(v: str | None) -> datetime | None:
        return datetime.fromisoformat(v) if v else None

    items: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for rec in recs:
        hashes: dict[str, str] = {}
        versions = []
        for v in rec["versions"]:
            value = validate_value(v["value"])
            if value not in hashes:
                hashes[value] = content_hash(value)
            versions.append(
                {
                    **v,
                    "value": value,
                    "content_hash": hashes[value],
                    "tags": json.dumps(normalize_tags(v["tags"])),
                    "archived": bool(v["archived"]),
                    "valid_from": ts(v["valid_from"]),
                    "valid_to": ts(v["valid_to"]),
                    "expires_at": ts(v["expires_at"]),
                    "recorded_at": ts(v["recorded_at"]),
                }
            )
        lesson = {
            "scope": rec["scope"],
            "key": rec["key"],
            "origin": rec["origin"],
            "author": rec["author"],
            "url": rec["url"],
            "archived_at": ts(rec["archived_at"]),
            "created_at": ts(rec["created_at"]),
            "created_by": rec["created_by"],
        }
        items.append((lesson, versions))

    def tx(conn: Any, part: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> None:
        _big_cache(conn)
        mutate.replay_many(conn, p, part, utcnow())

    for start in range(0, len(items), BULK_TX):
        part = items[start : start + BULK_TX]
        write_tx(svc, lambda c, part=part: tx(c, part), p.tenant_id)
    # Tombstones, links and superseded_by pointers: the import's own path.
    sup = [
        {"type": "lesson", "scope": r["scope"], "key": r["key"], "superseded_by": r["superseded_by"]}
        for r in recs
        if r["superseded_by"]
    ]
    result = {"created": len(items), "updated": 0, "unchanged": 0, "tombstones": 0, "links": 0, "refused": []}
    if extra:
        out = svc.import_lines(p, [json.dumps(x, ensure_ascii=False) for x in extra], restore=True)
        result.update(tombstones=out["tombstones"], links=out["links"], refused=out["refused"])
    if sup:
        from cairn.service.transfer import _link_supersessions

        pairs = [((s["scope"], s["key"]), (s["superseded_by"]["scope"], s["superseded_by"]["key"])) for s in sup]
        write_tx(svc, lambda c: _link_supersessions(c, p, pairs), p.tenant_id)
    return result


def _finish(home: Path) -> None:
    """Fold the WAL into the database file (so a copy of ``cairn.db`` alone is the whole store).

    No ``ANALYZE``: the service never runs it, so a real store has no planner statistics, and with
    them SQLite picks other plans (see the README section).
    """
    import pysqlite3.dbapi2 as sqlite3

    con = sqlite3.connect(str(home / "cairn.db"))
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()


def store_counts(home: Path) -> dict[str, Any]:
    """Exact counts by direct SQL (independent of the service): the sanity reference for context's M."""
    import pysqlite3.dbapi2 as sqlite3

    con = sqlite3.connect(str(home / "cairn.db"))
    try:
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")  # how UTCDateTime stores time
        active = (
            "trust != 'rejected' AND archived_at IS NULL AND superseded_by IS NULL "
            "AND (expires_at IS NULL OR expires_at > ?)"
        )
        marks = ", ".join("?" for _ in LADDER_SCOPES)
        q = f"SELECT count(*) FROM lessons WHERE scope IN ({marks}) AND {active}"  # noqa: S608
        ladder_active = con.execute(q, [*LADDER_SCOPES, now]).fetchone()[0]
        # What context calls eligible: a narrower rung's lesson shadows a broader one with the same key
        # (keys are unique within a scope), so one per distinct key.
        q = f"SELECT count(DISTINCT key) FROM lessons WHERE scope IN ({marks}) AND {active}"  # noqa: S608
        ladder_eligible = con.execute(q, [*LADDER_SCOPES, now]).fetchone()[0]
        q = f"SELECT scope, count(*) FROM lessons WHERE {active} GROUP BY scope"  # noqa: S608
        per_scope = dict(con.execute(q, [now]).fetchall())
        total = con.execute("SELECT count(*) FROM lessons").fetchone()[0]
        active_n = con.execute(f"SELECT count(*) FROM lessons WHERE {active}", [now]).fetchone()[0]  # noqa: S608
        loops = con.execute("SELECT count(*) FROM lessons WHERE key LIKE 'loop::%'").fetchone()[0]
        cand = con.execute("SELECT count(*) FROM lessons WHERE trust = 'candidate'").fetchone()[0]
        return {
            "total": total,
            "active": active_n,
            "ladder_active": ladder_active,
            "ladder_eligible": ladder_eligible,
            "ladder_share": round(ladder_active / active_n, 3) if active_n else 0.0,
            "loop_share": round(loops / total, 3) if total else 0.0,
            "candidate_share": round(cand / total, 3) if total else 0.0,
            "scopes": len(per_scope),
        }
    finally:
        con.close()


def ladder_eligible_count(home: Path) -> int:
    """What ``context`` must report as M now: active lessons of the ladder, one per key (ladder
    precedence), counted by plain SQL. Status moves with time (a lesson may have expired since)."""
    return int(store_counts(home)["ladder_eligible"])


def verify(size: int) -> dict[str, Any]:
    return verify_home(store_home(size))


def verify_home(home: Path) -> dict[str, Any]:
    """``cairn audit verify``, per-scope counts and a search through the CLI."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["PYTHONPATH"] = str(ROOT / "src")
    cli = [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "--json"]
    t0 = time.perf_counter()
    audit = json.loads(subprocess.run([*cli, "audit", "verify"], capture_output=True, text=True, env=env).stdout)
    t1 = time.perf_counter()
    hits = json.loads(subprocess.run([*cli, "search", "retry backoff"], capture_output=True, text=True, env=env).stdout)
    t2 = time.perf_counter()
    data = audit.get("data") or {}
    results = (hits.get("data") or {}).get("results") or []
    return {
        "audit_ok": bool(data.get("ok")),
        "audit_checked": data.get("checked"),
        "audit_seconds": round(t1 - t0, 1),
        "search_hits": len(results),
        "search_top": results[0]["key"] if results else None,
        "search_seconds": round(t2 - t1, 1),
        "counts": store_counts(home),
    }


COMPARED = {  # table: (columns left out of the comparison, order by)
    # A version's uid is random (mutate.new_uid), so tips and parents differ between any two builds.
    "lessons": (("tips",), "id"),
    "lesson_versions": (("uid", "parents"), "id"),
    "lesson_tags": ((), "lesson_id, tag"),
    "tombstones": ((), "id"),
    "links": ((), "id"),
    "audit_log": (("at", "prev_hash", "row_hash"), "seq"),  # "at" is the import's own clock
    "lesson_embeddings": (("embedded_at",), "lesson_id"),
    "lesson_signatures": (("embedded_at",), "lesson_id"),
    "embed_queue": (("queued_at",), "lesson_id"),
    "embed_state": (("updated_at",), "tenant_id"),
}


def check(size: int = 6_000) -> dict[str, Any]:
    """Build one store with each loader from the same records and compare them table by table."""
    import tempfile

    import pysqlite3.dbapi2 as sqlite3
    import sqlite_vec

    from cairn.core.timeparse import utcnow

    now = utcnow()
    with tempfile.TemporaryDirectory(prefix="context-check-", dir=OUT_DIR) as tmp:
        homes = {name: Path(tmp) / name for name in ("service", "bulk")}
        metas = {name: build_store(size, loader=name, home=home, now=now) for name, home in homes.items()}
        cons = {name: sqlite3.connect(str(home / "cairn.db")) for name, home in homes.items()}
        for con in cons.values():
            con.enable_load_extension(True)
            sqlite_vec.load(con)
        diffs: dict[str, Any] = {}
        try:
            tables = dict(COMPARED)
            vec = (
                cons["service"]
                .execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%vec0%'"
                )
                .fetchone()[0]
            )
            tables[vec] = (("embedding",), "lesson_id")
            for table, (skip, order) in tables.items():
                cols = [r[1] for r in cons["service"].execute(f"PRAGMA table_info({table})") if r[1] not in skip]
                q = f"SELECT {', '.join(cols)} FROM {table} ORDER BY {order}"  # noqa: S608
                a = cons["service"].execute(q).fetchall()
                b = cons["bulk"].execute(q).fetchall()
                if a != b:
                    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
                    diffs[table] = {"rows": [len(a), len(b)], "first_difference": first,
                                    "service": a[first] if first < len(a) else None,
                                    "bulk": b[first] if first < len(b) else None}  # fmt: skip
            q = "SELECT rowid, key, value, tags FROM lesson_fts ORDER BY rowid"
            if cons["service"].execute(q).fetchall() != cons["bulk"].execute(q).fetchall():
                diffs["lesson_fts"] = "differs"
            q = f"SELECT lesson_id, embedding FROM {vec} ORDER BY lesson_id"  # noqa: S608
            if cons["service"].execute(q).fetchall() != cons["bulk"].execute(q).fetchall():
                diffs[vec + ".embedding"] = "differs"
        finally:
            for con in cons.values():
                con.close()
        audits = {name: verify_home(home)["audit_ok"] for name, home in homes.items()}
    return {
        "lessons": size,
        "identical": not diffs,
        "differences": diffs,
        "audit_ok": audits,
        "service_load_per_s": metas["service"]["load_per_s"],
        "bulk_load_per_s": metas["bulk"]["load_per_s"],
        "service_seconds": metas["service"]["seconds"],
        "bulk_seconds": metas["bulk"]["seconds"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES))
    ap.add_argument("--regen", action="store_true", help="rebuild even when a cached store is current")
    ap.add_argument("--verify", action="store_true", help="audit verify, counts and a CLI search per store")
    ap.add_argument("--loader", choices=("service", "bulk"), help="force a loader (default: by size)")
    ap.add_argument("--check", type=int, metavar="N", help="build N lessons with both loaders and compare")
    args = ap.parse_args(argv)
    if args.check:
        result = check(args.check)
        print(json.dumps(result, indent=1, default=str))
        return 0 if result["identical"] else 1
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    for size in sizes:
        meta = build_store(size, regen=args.regen, loader=args.loader)
        line = {k: meta.get(k) for k in ("lessons", "loader", "cached", "seconds", "per_s", "load_per_s", "db_mb")}
        line.update({k: meta.get(k) for k in ("active", "ladder_active", "ladder_share", "loop_share")})
        print(json.dumps(line))
        if args.verify:
            print(json.dumps({"lessons": size, **verify(size)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
