"""Seeded generator of plausible lessons that answer none of the eval queries.

A retrieval eval over ~130 lessons is easy mode: a real store holds thousands of lessons, most
of them irrelevant to any given failure. ``generate`` pads the corpus with lessons that look
like the real thing (same shape, same voice, same generic vocabulary: pods, CI, deploys,
tests, migrations) so ranking and the ``recall`` threshold are measured against realistic
clutter, while no distractor can be a legitimate answer.

How "none answers a query" is kept true:

* Tool facts are real tips about tools that no query is about (mypy, Celery, Airflow, dbt,
  Prometheus, ...). Tools that appear in queries or no-answer queries (git, Docker,
  Postgres, SQLite, pytest, npm, Kafka, Redis, Gradle, Terraform, nginx, ...) are excluded,
  and so are topics a query asks about (timeouts, retries of flaky tests, profiling, CPU
  limits, money representation, ...).
* Internal conventions and incident notes are about made-up services, teams and tables, so
  they are unanswerable by construction. Service names avoid the real scopes (widget,
  payments, inventory-sync, infra) and words like billing or ledger that queries use.

If you add a query, check that no fact below answers it (``check_data.py --distractors N``
prints the closest distractor per query for exactly this review).

Usage::

    python evals/distractors.py 5000 --seed 0 > evals/out/distractors.jsonl

Stdlib only; output is identical for identical ``(n, seed)``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Callable

# --------------------------------------------------------------------------------------------
# Vocabularies
# --------------------------------------------------------------------------------------------

# (tool, tags, [(key, fact)]). Each fact is a self-contained, correct tip in the voice of a lesson.
TOOL_FACTS: list[tuple[str, list[str], list[tuple[str, str]]]] = [
    (
        "ruff",
        ["python", "lint"],
        [
            (
                "safe-vs-unsafe-fixes",
                "`ruff check --fix` only applies safe fixes; unsafe ones need `--unsafe-fixes`, so review that "
                "diff separately before committing it.",
            ),
            (
                "per-file-ignores",
                "Put per-file rule exemptions in `[tool.ruff.lint.per-file-ignores]` instead of scattering "
                "blanket `# noqa` comments through the code.",
            ),
            (
                "check-before-format",
                "Run `ruff check --fix` before `ruff format`; the import-sorting rules and the formatter agree, "
                "but only if sorting runs first.",
            ),
            (
                "target-version",
                "Set `target-version` in the ruff config: the pyupgrade rules use it to decide which newer "
                "syntax they are allowed to rewrite to.",
            ),
        ],
    ),
    (
        "mypy",
        ["python", "typing"],
        [
            (
                "check-untyped-defs",
                "mypy skips the bodies of unannotated functions unless `check_untyped_defs = true`; a clean run "
                "says little about legacy modules.",
            ),
            (
                "reveal-type",
                "`reveal_type(expr)` makes mypy print the inferred type at that line; delete it before "
                "committing, the runtime doesn't define it on older Pythons.",
            ),
            (
                "types-stub-packages",
                "Prefer installing the `types-*` stub package for a library over a global "
                "`ignore_missing_imports = true`, which silently hides typos in module names.",
            ),
            (
                "warn-unused-ignores",
                "Enable `warn_unused_ignores` so `# type: ignore` comments are flagged once the underlying "
                "issue is fixed.",
            ),
        ],
    ),
    (
        "pre-commit",
        ["pre-commit", "tooling"],
        [
            (
                "run-all-files",
                "Run `pre-commit run --all-files` after adding a hook; by default hooks only see the files "
                "staged in the current commit.",
            ),
            (
                "autoupdate-separate-commit",
                "`pre-commit autoupdate` bumps every hook's rev; commit that separately so reviewers can see "
                "which hooks moved.",
            ),
            (
                "clean-broken-cache",
                "Hook environments are cached under ~/.cache/pre-commit; `pre-commit clean` fixes a hook that "
                "fails with a half-installed environment.",
            ),
        ],
    ),
    (
        "tox",
        ["python", "tox"],
        [
            (
                "pass-env",
                "tox 4 no longer passes most host environment variables into test envs; list the ones the "
                "suite needs under `pass_env`.",
            ),
            (
                "forward-posargs",
                "Use `tox -e py312 -- -x` to forward arguments after `--` to the test command instead of "
                "editing tox.ini for one run.",
            ),
        ],
    ),
    (
        "nox",
        ["python", "nox"],
        [
            (
                "reuse-venvs",
                "nox rebuilds every session's virtualenv unless you pass `-R` (reuse and skip install); use it "
                "for quick local reruns only.",
            ),
            (
                "parametrize-sessions",
                "Parametrize nox sessions with `@nox.parametrize` rather than copy-pasting sessions per "
                "dependency version.",
            ),
        ],
    ),
    (
        "sphinx",
        ["docs", "sphinx"],
        [
            (
                "autodoc-import-side-effects",
                "Sphinx autodoc imports modules to document them, so import-time side effects run during the "
                "docs build; keep module top levels free of I/O.",
            ),
            (
                "nitpicky-fail-build",
                "Set `nitpicky = True` and build with `-W` so unresolved cross-references fail the docs job "
                "instead of rendering as plain text.",
            ),
            (
                "intersphinx-mapping",
                "Intersphinx needs the target project's objects.inv URL in `intersphinx_mapping`; without it "
                "links to stdlib types render unlinked.",
            ),
        ],
    ),
    (
        "mkdocs",
        ["docs", "mkdocs"],
        [
            (
                "strict-build-in-ci",
                "CI should run `mkdocs build --strict` so broken internal links and missing nav entries fail "
                "the build; `mkdocs serve` only warns.",
            ),
            (
                "nav-orphans",
                "Pages not listed under `nav:` are still built but unreachable from the menu; strict mode "
                "reports them.",
            ),
        ],
    ),
    (
        "celery",
        ["celery", "python"],
        [
            (
                "acks-late-idempotent",
                "With `acks_late=True` Celery re-delivers a task if its worker dies mid-run, so such tasks "
                "must be safe to run twice.",
            ),
            (
                "prefetch-multiplier",
                "Set `worker_prefetch_multiplier = 1` for long tasks; the default prefetch lets one worker "
                "reserve jobs that idle workers could have taken.",
            ),
            (
                "pass-ids-not-objects",
                "Pass primary keys, not ORM objects, as task arguments; a serialized object is stale by the "
                "time the task runs.",
            ),
            (
                "route-slow-tasks",
                "Route slow tasks to their own queue (`task_routes`) so a backlog of reports can't delay "
                "short interactive tasks.",
            ),
        ],
    ),
    (
        "airflow",
        ["airflow", "data"],
        [
            (
                "top-level-dag-code",
                "Airflow re-parses DAG files continuously, so top-level code in a DAG file (API calls, heavy "
                "imports) slows the scheduler; move it into tasks.",
            ),
            (
                "catchup-false",
                "Create new DAGs with `catchup=False` unless you want the scheduler to backfill every "
                "interval since `start_date`.",
            ),
            (
                "logical-date",
                "A DAG run's logical date is the start of its data interval, not the moment it runs; daily "
                "runs for Monday execute on Tuesday.",
            ),
            (
                "pools-for-fragile-upstreams",
                "Use pools to cap how many tasks hit a fragile upstream at once instead of lowering global "
                "parallelism.",
            ),
        ],
    ),
    (
        "dbt",
        ["dbt", "data"],
        [
            (
                "slim-ci-state-modified",
                "In CI, `dbt build --select state:modified+ --defer --state prod-artifacts/` builds only "
                "changed models and their children.",
            ),
            (
                "incremental-unique-key",
                "Incremental models need a `unique_key` to merge; without one dbt appends and reruns create "
                "duplicate rows.",
            ),
            (
                "grain-tests",
                "Put `not_null` and `unique` tests on every model's grain column; most silent data bugs are "
                "fan-out joins that these catch.",
            ),
        ],
    ),
    (
        "prometheus",
        ["prometheus", "observability"],
        [
            (
                "label-cardinality",
                "Never put user ids, emails or raw URL paths in label values; unbounded label cardinality "
                "blows up Prometheus memory.",
            ),
            (
                "rate-window",
                "Give `rate()` a range of at least four scrape intervals; `rate(x[1m])` with a 30 s scrape "
                "interval is mostly noise.",
            ),
            (
                "counter-resets",
                "Counters reset on process restart; always wrap them in `rate()` or `increase()` instead of "
                "graphing the raw value.",
            ),
            (
                "recording-rules",
                "Record expensive PromQL in recording rules so dashboards and alerts read one precomputed series.",
            ),
        ],
    ),
    (
        "grafana",
        ["grafana", "observability"],
        [
            (
                "datasource-uid-variable",
                "Dashboard JSON exported from the UI embeds datasource UIDs; replace them with a datasource "
                "variable before committing the file.",
            ),
            (
                "provisioned-dashboards",
                "Provisioned dashboards can't be saved from the UI; edit the JSON in the repo and let "
                "provisioning reload it.",
            ),
        ],
    ),
    (
        "alerting",
        ["observability", "on-call"],
        [
            (
                "alert-on-symptoms",
                "Alert on symptoms users feel (error ratio, latency against the SLO), not on causes like high "
                "CPU, which page people for nothing.",
            ),
            (
                "runbook-links",
                "Every paging alert needs a runbook link in its annotations; an alert nobody knows how to act "
                "on gets silenced and forgotten.",
            ),
        ],
    ),
    (
        "sentry",
        ["sentry", "observability"],
        [
            (
                "release-environment",
                "Set `release` and `environment` in the Sentry SDK init so a new error can be tied to the "
                "deploy that introduced it.",
            ),
            (
                "scrub-before-send",
                "Scrub tokens and emails in `before_send`; default PII scrubbing doesn't know about custom "
                "header names.",
            ),
            (
                "trace-sampling",
                "Use `traces_sample_rate` well below 1.0 on busy services; sending every transaction burns "
                "the quota within hours.",
            ),
            (
                "custom-fingerprints",
                "Group noisy third-party errors with a custom fingerprint instead of ignoring them entirely.",
            ),
        ],
    ),
    (
        "vault",
        ["vault", "security"],
        [
            (
                "k8s-auth-token-ttl",
                "Tokens from Vault's Kubernetes auth method have a TTL; long-running jobs must renew them or "
                "log in again.",
            ),
            (
                "kv2-data-path",
                "With KV v2 the HTTP API path includes `data/` (`secret/data/app`), while `vault kv get "
                "secret/app` adds it for you.",
            ),
        ],
    ),
    (
        "ansible",
        ["ansible", "ops"],
        [
            (
                "changed-when",
                "`command` and `shell` tasks always report changed; add `changed_when` or `creates:` so "
                "repeated runs stay idempotent.",
            ),
            (
                "check-diff-first",
                "Run playbooks with `--check --diff` against production inventories before the real run.",
            ),
            (
                "variable-precedence",
                "Host vars and extra vars override `group_vars/all`; check variable precedence before "
                "blaming a template.",
            ),
            (
                "serial-restarts",
                "Use `serial:` in plays that restart services so the whole fleet never restarts at once.",
            ),
        ],
    ),
    (
        "playwright",
        ["playwright", "e2e"],
        [
            (
                "auto-waiting-locators",
                "Use Playwright's auto-waiting locators such as `getByRole` instead of fixed `waitForTimeout` sleeps.",
            ),
            (
                "storage-state-login",
                "Store the logged-in state once with `storageState` in a setup project instead of logging in "
                "through the UI in every test.",
            ),
        ],
    ),
    (
        "cypress",
        ["cypress", "e2e"],
        [
            (
                "intercept-before-action",
                "Register `cy.intercept` stubs before the action that triggers the request; a stub added "
                "afterwards never matches.",
            ),
            (
                "commands-are-queued",
                "Cypress commands are queued, not executed immediately; read values inside `.then()` rather "
                "than assigning them to variables.",
            ),
        ],
    ),
    (
        "eslint",
        ["eslint", "javascript"],
        [
            (
                "prettier-config-last",
                "Add eslint-config-prettier last in the config so ESLint's stylistic rules stop fighting "
                "Prettier over the same lines.",
            ),
            (
                "flat-config",
                "ESLint 9 uses flat config (`eslint.config.js`) by default; a leftover `.eslintrc` is ignored "
                "without any warning.",
            ),
        ],
    ),
    (
        "typescript",
        ["typescript", "javascript"],
        [
            (
                "skiplibcheck",
                "`skipLibCheck: true` hides type errors inside .d.ts files from node_modules; fine for apps, "
                "risky for published libraries.",
            ),
            (
                "tsc-noemit-in-ci",
                "Bundlers such as esbuild strip types without checking them; run `tsc --noEmit` in CI to "
                "actually type-check.",
            ),
            (
                "paths-not-rewritten",
                "tsc doesn't rewrite `paths` aliases in emitted code; the runtime or bundler needs its own "
                "alias configuration.",
            ),
            ("unknown-over-any", "Prefer `unknown` over `any` for untrusted input; it forces a type check before use."),
        ],
    ),
    (
        "protobuf",
        ["protobuf", "api"],
        [
            (
                "reserve-field-numbers",
                "Never reuse a deleted protobuf field number; mark it `reserved` so old clients don't "
                "misread new data.",
            ),
            (
                "enum-unspecified",
                "Adding a value to a protobuf enum is safe for readers only if they handle unknown values; "
                "keep a zero `UNSPECIFIED` entry.",
            ),
        ],
    ),
    (
        "graphql",
        ["graphql", "api"],
        [
            (
                "dataloader-n-plus-one",
                "Batch per-item lookups with a DataLoader; resolving a list field with one query per item is "
                "the classic N+1.",
            ),
            (
                "deprecate-fields",
                "Deprecate GraphQL fields with `@deprecated(reason: ...)` and watch field usage before removing them.",
            ),
        ],
    ),
    (
        "openapi",
        ["openapi", "api"],
        [
            (
                "generated-client-drift",
                "Generate clients from the OpenAPI document in CI and fail on diff, so the spec can't drift "
                "from the server.",
            ),
            (
                "operation-ids",
                "Give every OpenAPI operation a stable `operationId`; generated client method names come from it.",
            ),
        ],
    ),
    (
        "systemd",
        ["systemd", "linux"],
        [
            (
                "drop-in-overrides",
                "Use `systemctl edit <unit>` for a drop-in override; edits to the packaged unit file are "
                "lost on the next package upgrade.",
            ),
            (
                "restart-on-failure",
                "`Restart=always` also restarts after a clean exit; use `Restart=on-failure` with "
                "`RestartSec=` for services that may stop on purpose.",
            ),
            (
                "journalctl-unit",
                "`journalctl -u <unit> --since '10 min ago'` beats grepping /var/log when a service logs to "
                "the journal.",
            ),
        ],
    ),
    (
        "rabbitmq",
        ["rabbitmq", "messaging"],
        [
            (
                "persistent-messages",
                "Durable queues alone don't survive a broker restart with your data; messages must also be "
                "published as persistent.",
            ),
            (
                "consumer-prefetch",
                "Set a per-consumer prefetch with `basic.qos` so one slow consumer can't sit on thousands of "
                "unacknowledged messages.",
            ),
        ],
    ),
    (
        "s3",
        ["aws", "s3"],
        [
            (
                "list-objects-pagination",
                "`ListObjectsV2` returns at most 1000 keys per call; follow the continuation token or use "
                "the SDK paginator.",
            ),
            (
                "presigned-url-expiry",
                "A presigned URL stops working when the credentials that signed it expire, even if its own "
                "expiry is later.",
            ),
            ("copy-object-limit", "`CopyObject` handles objects up to 5 GB; larger objects need a multipart copy."),
        ],
    ),
    (
        "bazel",
        ["bazel", "build"],
        [
            (
                "declared-inputs",
                "Bazel caches on declared inputs; a genrule that reads an undeclared file returns stale "
                "results until the file is listed in `srcs`.",
            ),
            (
                "rdeps-query",
                "Use `bazel query 'rdeps(//..., //lib:core)'` to see what a change to a library will rebuild.",
            ),
        ],
    ),
    (
        "logging",
        ["observability", "logging"],
        [
            (
                "json-request-id",
                "Log as JSON with a request id field; free-text logs can't be joined across services when "
                "tracing a single request.",
            ),
            (
                "log-the-decision",
                "Log the decision and its inputs, not just 'failed': a line that says which rule rejected the "
                "request saves a debugging session.",
            ),
        ],
    ),
    (
        "code-review",
        ["process", "review"],
        [
            (
                "split-refactors",
                "Split refactors from behaviour changes into separate PRs; reviewers can approve a pure "
                "rename in minutes.",
            ),
            (
                "verification-notes",
                "Link the ticket and state how the change was verified in the PR description; 'tested "
                "locally' is not enough for reviewers.",
            ),
        ],
    ),
]

# Made-up services. None collide with the real scopes or with words the queries use.
SERVICE_A = [
    "catalog",
    "geo",
    "media",
    "report",
    "quota",
    "audit",
    "export",
    "ingest",
    "search",
    "notify",
    "profile",
    "shipping",
    "loyalty",
    "review",
    "schedule",
    "tile",
    "thumbnail",
    "translation",
    "feed",
    "consent",
    "referral",
    "survey",
    "warehouse",
    "routing",
    "forecast",
    "badge",
]
SERVICE_B = [
    "api",
    "worker",
    "sync",
    "gateway",
    "indexer",
    "scheduler",
    "renderer",
    "exporter",
    "collector",
    "router",
    "builder",
    "service",
]
TEAMS = [
    "atlas",
    "borealis",
    "cobalt",
    "delta",
    "ember",
    "fjord",
    "granite",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lumen",
    "meridian",
    "nimbus",
    "onyx",
    "pioneer",
    "quartz",
    "sable",
]
ORGS = ["acme", "northwind", "globex", "initech"]
ENTITIES = [
    "listing",
    "shipment",
    "review",
    "badge",
    "survey",
    "route",
    "tile",
    "asset",
    "profile",
    "campaign",
    "warehouse",
    "forecast",
    "coupon",
    "translation",
]
VERBS_PAST = ["created", "updated", "archived", "published", "expired", "reassigned"]
PANELS = [
    "queue depth",
    "p95 latency",
    "error ratio",
    "lag by partition",
    "rejected jobs",
    "cache hit ratio",
    "throughput by tenant",
]
EVENTS = [
    "a regional failover",
    "the Monday import",
    "a marketing launch",
    "the quarterly reindex",
    "a partner outage",
    "month-end reporting",
]
DATA_KINDS = [
    "raw uploads",
    "rendered reports",
    "audit trails",
    "import manifests",
    "tile caches",
    "export archives",
    "survey responses",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday"]
TOPICS = [
    "the tenant routing rules",
    "the export file layout",
    "the event schema",
    "the search ranking weights",
    "the tile zoom levels",
    "the consent model",
    "the warehouse slotting logic",
]
VENDORS = ["Mapbox", "Twilio", "SendGrid", "Algolia", "Contentful", "DeepL", "Zendesk"]
THINGS = [
    ("feature flags", "src/{short}/flags/"),
    ("HTTP handlers", "src/{short}/handlers/"),
    ("background jobs", "src/{short}/jobs/"),
    ("schema fixtures", "tests/fixtures/{short}/"),
    ("ADR documents", "docs/adr/"),
    ("load-test scenarios", "perf/{short}/"),
]
# (service domains it fits, symptom, cause, fix): coherent notes about internal behaviour.
INCIDENTS: list[tuple[list[str], str, str, str]] = [
    (
        ["media", "thumbnail", "profile"],
        "rendered portrait thumbnails sideways",
        "it ignored the EXIF orientation tag",
        "images are normalised to upright orientation on upload",
    ),
    (
        ["export", "report", "warehouse"],
        "exported CSVs with shifted columns",
        "a free-text field contained the delimiter and wasn't quoted",
        "every row is written through csv.writer, which quotes such fields",
    ),
    (
        ["search", "translation", "catalog"],
        "showed results in the wrong language",
        "the Accept-Language fallback skipped regional variants",
        "the fallback chain is en-GB, then en, then the tenant default",
    ),
    (
        ["survey", "notify", "schedule"],
        "sent the same invitation twice",
        "two schedulers were active after a blue-green switch",
        "the scheduler takes a leader lease before sending anything",
    ),
    (
        ["badge", "loyalty", "referral"],
        "lost a day of awards",
        "the consumer recorded its position before processing the batch",
        "awards are written first and the position is stored afterwards",
    ),
    (
        ["tile", "geo", "routing"],
        "served tiles rendered with the previous style",
        "the CDN key didn't include the style version",
        "the style hash is part of every tile URL",
    ),
    (
        ["catalog", "search", "review"],
        "mis-sorted titles that start with accented letters",
        "sorting used byte order instead of a collation",
        "sorting uses ICU collation per locale",
    ),
    (
        ["shipping", "warehouse", "ingest"],
        "dropped status updates from one carrier",
        "the carrier added milliseconds to its date format",
        "the parser accepts both formats and alerts on any other",
    ),
    (
        ["routing", "schedule", "shipping"],
        "assigned routes to drivers who were off shift",
        "shift end times were compared in local time",
        "shift times are stored and compared in UTC",
    ),
    (
        ["forecast", "report", "ingest"],
        "published forecasts a day late",
        "the upstream file landed after the fixed 02:00 trigger",
        "the job waits for the upstream marker file instead of a clock time",
    ),
    (
        ["translation", "ingest", "catalog"],
        "duplicated translation memory entries",
        "the import keyed entries by their text instead of the segment id",
        "entries are keyed by segment id",
    ),
    (
        ["referral", "loyalty", "consent"],
        "accepted expired referral codes",
        "validation read a cached campaign that was never invalidated",
        "editing a campaign publishes an invalidation event",
    ),
    (
        ["consent", "profile", "audit"],
        "kept showing the consent banner to users who had answered",
        "the answer was stored per device instead of per account",
        "answers are stored per account and synced to devices on login",
    ),
    (
        ["audit", "export", "report"],
        "produced audit exports missing the last hour",
        "the export cut off at the start of the current hour in UTC while the request said local time",
        "export windows are explicit [start, end) timestamps in UTC",
    ),
]

PREFIXES: list[Callable[[str], str]] = [
    lambda svc: f"In {svc}: ",
    lambda svc: f"For {svc}, ",
    lambda svc: f"Reminder from the {svc} migration: ",
    lambda svc: f"Learned while working on {svc}: ",
]


# --------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------


def _stable_pick(options: list[str], name: str) -> str:
    """Pick deterministically from the name alone, so one service always has the same owner.

    Using the RNG here would let two distractors name different owning teams for the same
    service, which no real store would contain.
    """
    return options[sum(ord(c) * (i + 1) for i, c in enumerate(name)) % len(options)]


# Product names that open some facts and must keep their capital after a prefix.
PROPER_NOUNS = frozenset({"Airflow", "Bazel", "Cypress", "ESLint", "Intersphinx", "Sphinx"})


def _decapitalise(text: str) -> str:
    """Lower the first letter so a fact reads naturally after a prefix, unless it's a name or code."""
    first = text.split(" ", 1)[0]
    if first in PROPER_NOUNS or text[:1] in "`'\"" or text[:2].isupper():
        return text
    return text[:1].lower() + text[1:]


def _slug(text: str) -> str:
    """Kebab-case fragment for keys ('p95 latency' -> 'p95-latency')."""
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))


Record = dict[str, object]


class _Gen:
    """Holds the RNG and the uniqueness bookkeeping for one ``generate`` call."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.addresses: set[tuple[str, str]] = set()
        self.values: set[str] = set()

    def service(self, domains: list[str] | None = None) -> tuple[str, str]:
        """A made-up service name and its domain word, optionally from given domains."""
        a = self.rng.choice(domains or SERVICE_A)
        # Skip stutters like "export-exporter" or "schedule-scheduler".
        b = self.rng.choice([b for b in SERVICE_B if not b.startswith(a[:4])])
        return f"{a}-{b}", a

    def scope_for(self, svc: str) -> str:
        """Mix scopes like a real store: many global notes, the rest repo/project/branch.

        Too few globals would let a scope filter remove distractors wholesale.
        """
        roll = self.rng.random()
        if roll < 0.45:
            return "global"
        if roll < 0.70:
            return f"project::{svc}"
        if roll < 0.92:
            return f"repo::{_stable_pick(ORGS, svc)}/{svc}"
        return f"branch::{_stable_pick(ORGS, svc)}/{svc}::release-{self.rng.randint(1, 9)}.{self.rng.randint(0, 12)}"

    def tool_fact(self) -> Record:
        """A real tip about a tool no query is about, either plain or tied to a service."""
        tool, tags, facts = self.rng.choice(TOOL_FACTS)
        key, fact = self.rng.choice(facts)
        if self.rng.random() < 0.3:
            return {"scope": "global", "key": f"{tool}-{key}", "value": fact, "tags": list(tags)}
        svc, _ = self.service()
        value = self.rng.choice(PREFIXES)(svc) + _decapitalise(fact)
        return {"scope": self.scope_for(svc), "key": f"{tool}-{key}", "value": value, "tags": list(tags)}

    def convention(self) -> Record:
        """An internal convention about a made-up service: unanswerable by construction."""
        rng = self.rng
        svc, short = self.service()
        team = _stable_pick(TEAMS, svc)
        kind = rng.randrange(9)
        if kind == 0:
            value = (
                f"{svc} is owned by team {team.title()}; page #{team}-oncall for incidents and "
                f"request review from @{team}-reviewers on anything under src/{short}/."
            )
            key, tags = f"{svc}-owners", ["ownership"]
        elif kind == 1:
            panel, event = rng.choice(PANELS), rng.choice(EVENTS)
            value = (
                f"During {event}, check the '{panel}' panel on the {svc} dashboard first; it "
                f"is the earliest signal that {short} is falling behind."
            )
            key, tags = f"{svc}-dashboard-{_slug(panel)}", ["observability"]
        elif kind == 2:
            other, _ = self.service()
            entity = rng.choice(ENTITIES)
            value = (
                f"When the {entity} event schema gains a field, release {other} before {svc}: "
                f"{svc} rejects {entity} events that lack the new field once it is deployed."
            )
            key, tags = f"{svc}-release-order-{entity}", ["release", "conventions"]
        elif kind == 3:
            days, data = rng.choice([7, 14, 30, 90, 180, 400]), rng.choice(DATA_KINDS)
            value = (
                f"{svc} keeps {data} for {days} days in the hot bucket; older objects move to "
                f"archive storage and take several hours to restore, so ask early."
            )
            key, tags = f"{svc}-retention-{_slug(data)}", ["data", "retention"]
        elif kind == 4:
            entity, verb = rng.choice(ENTITIES), rng.choice(VERBS_PAST)
            value = (
                f"{svc} event names follow the `{short}.<entity>.<past-tense verb>` pattern, e.g. "
                f"`{short}.{entity}.{verb}`. Consumers subscribe by prefix, so never rename the "
                f"domain part."
            )
            key, tags = f"{svc}-event-naming", ["conventions", "events"]
        elif kind == 5:
            thing, path = rng.choice(THINGS)
            value = (
                f"In {svc}, {thing} live under `{path.format(short=short)}`; the layout check "
                f"in the lint job fails when they are added anywhere else."
            )
            key, tags = f"{svc}-{_slug(thing)}-location", ["conventions", "layout"]
        elif kind == 6:
            day = _stable_pick(WEEKDAYS, svc)
            value = (
                f"{svc} is released every {day} from a `release/<year>.<week>` branch; fixes "
                f"land on main first and are cherry-picked into the release branch."
            )
            key, tags = f"{svc}-release-train", ["release", "process"]
        elif kind == 7:
            vendor, hour = rng.choice(VENDORS), rng.randint(0, 5)
            value = (
                f"The {vendor} sandbox used by {svc} is wiped every night at 0{hour}:00 UTC; "
                f"integration tests must create the {vendor} objects they need instead of "
                f"relying on leftovers."
            )
            key, tags = f"{svc}-{vendor.lower()}-sandbox", ["testing", "vendors"]
        else:
            topic, adr = rng.choice(TOPICS), rng.randint(3, 48)
            value = (
                f"Read ADR-{adr:03d} in {svc}'s docs/adr before changing {topic}; it records "
                f"why the obvious alternative was rejected."
            )
            key, tags = f"{svc}-adr-{adr:03d}", ["docs", "architecture"]
        return {"scope": self.scope_for(svc), "key": key, "value": value, "tags": tags}

    def incident(self) -> Record:
        """A post-incident note about a bug in a made-up service of a fitting domain."""
        rng = self.rng
        domains, symptom, cause, fix = rng.choice(INCIDENTS)
        svc, _ = self.service(domains)
        month, day = rng.randint(1, 12), rng.randint(1, 28)
        value = (
            f"On 2024-{month:02d}-{day:02d} {svc} {symptom} because {cause}. Fix: {fix}; keep "
            f"the regression test when refactoring that code."
        )
        key = f"{svc}-incident-{month:02d}{day:02d}"
        return {"scope": self.scope_for(svc), "key": key, "value": value, "tags": ["incident", "postmortem"]}


def generate(n: int, seed: int = 0) -> list[Record]:
    """Return ``n`` distractor lessons, ids ``D00001``..., deterministic for a given seed.

    Scope+key pairs and values are unique, as in a real store (a repeated key in one scope
    is a supersede, not a second lesson), so a draw that collides is simply redrawn.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    gen = _Gen(seed)
    # Weights: internal conventions dominate real team memories; tool tips and incidents less so.
    families = [gen.tool_fact, gen.tool_fact, gen.convention, gen.convention, gen.convention, gen.incident]
    out: list[Record] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise RuntimeError(f"vocabulary exhausted after {len(out)} unique distractors")
        rec = gen.rng.choice(families)()
        address = (str(rec["scope"]), str(rec["key"]))
        if address in gen.addresses or rec["value"] in gen.values:
            continue
        gen.addresses.add(address)
        gen.values.add(str(rec["value"]))
        out.append(
            {
                "id": f"D{len(out) + 1:05d}",
                "scope": rec["scope"],
                "key": rec["key"],
                "value": rec["value"],
                "tags": rec["tags"],
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI: write ``n`` distractors as JSONL to stdout."""
    ap = argparse.ArgumentParser(description="Generate distractor lessons as JSONL on stdout.")
    ap.add_argument("n", type=int, help="how many distractors to generate")
    ap.add_argument("--seed", type=int, default=0, help="RNG seed (default 0)")
    args = ap.parse_args(argv)
    for rec in generate(args.n, seed=args.seed):
        sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
