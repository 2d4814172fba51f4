"""Seeded generator of distractor lessons for the second evaluation set (stdlib only).

``generate(n, seed)`` returns ``n`` plausible lessons in the same record format as
``lessons.jsonl`` (ids ``D00001``..) that answer none of the set's queries. They pad the store so
that retrieval is measured against a realistic amount of noise rather than 166 hand-written
lessons.

Two sources, interleaved:

* a fixed pool of real engineering facts on topics the set never asks about (Celery, Django,
  Elasticsearch, RabbitMQ, Helm, Ansible, Vault, Bazel, gRPC, GraphQL, Kotlin, ...);
* team conventions for fictional internal services, filled from slot lists (service, queue,
  table, dashboard, team, numbers). These read like the repo- and project-scoped notes agents
  record, and their combinations give far more than 5,000 distinct lessons.

Both were written to stay off the set's problems: no line endings, ports in use, certificates,
locales, lockfiles, time zones, memory limits, permissions or the other fixes the set's lessons
carry, so a distractor can crowd a ranking but never be a correct answer. ``check.py`` also
refuses any distractor whose words overlap a lesson's too much.
"""

# ruff: noqa: E501  (the fact pool and templates are data: one lesson per line reads best)

from __future__ import annotations

import random

# Real facts, each (key, value, tags). Global scope.
FACTS: list[tuple[str, str, list[str]]] = [
    (
        "celery-acks-late-idempotent",
        "With Celery `acks_late=True` a task is acknowledged only after it finishes, so a worker crash re-runs it; only enable it for idempotent tasks.",
        ["celery", "python", "queues"],
    ),
    (
        "celery-prefetch-multiplier-long-tasks",
        "For long Celery tasks set `worker_prefetch_multiplier = 1`, otherwise one worker reserves several tasks while others sit idle.",
        ["celery", "python"],
    ),
    (
        "celery-beat-single-instance",
        "Run exactly one celery beat process per schedule; two beat instances enqueue every periodic task twice.",
        ["celery", "scheduling"],
    ),
    (
        "django-select-related-n-plus-one",
        "In Django list views use `select_related` for foreign keys and `prefetch_related` for many-to-many, or every row triggers its own query.",
        ["django", "orm", "performance"],
    ),
    (
        "django-migrations-squash",
        "When a Django app has hundreds of migrations, `squashmigrations app 0001 0150` collapses them; keep the originals until every environment has applied the squash.",
        ["django", "migrations"],
    ),
    (
        "django-atomic-requests-cost",
        "ATOMIC_REQUESTS wraps every Django view in a transaction; views that call slow external APIs then hold a database transaction open the whole time.",
        ["django", "transactions"],
    ),
    (
        "rails-includes-eager-loading",
        "In Rails, `includes(:author)` eager-loads associations; the bullet gem flags N+1 queries in development.",
        ["rails", "ruby", "activerecord"],
    ),
    (
        "rails-strong-parameters",
        "Rails controllers must whitelist attributes with `params.require(:user).permit(:name, :email)`; unpermitted keys are dropped silently unless action_on_unpermitted_parameters is :raise.",
        ["rails", "security"],
    ),
    (
        "elasticsearch-mapping-explosion",
        "Indexing arbitrary JSON keys into Elasticsearch creates a field per key and hits `index.mapping.total_fields.limit`; map free-form metadata as `flattened`.",
        ["elasticsearch", "search"],
    ),
    (
        "elasticsearch-refresh-interval-bulk",
        "During a large Elasticsearch bulk load set `refresh_interval` to `-1` and replicas to 0, then restore both afterwards.",
        ["elasticsearch", "indexing"],
    ),
    (
        "elasticsearch-keyword-vs-text",
        "Use a `keyword` sub-field for exact filters and aggregations on strings; `text` fields are analysed and can't be aggregated efficiently.",
        ["elasticsearch", "mappings"],
    ),
    (
        "rabbitmq-prefetch-qos",
        "Set a RabbitMQ consumer prefetch (basic.qos) of 10-50; unlimited prefetch floods one consumer's memory with unacked messages.",
        ["rabbitmq", "queues"],
    ),
    (
        "rabbitmq-quorum-queues",
        "For durable RabbitMQ queues in a cluster prefer quorum queues over classic mirrored queues, which are deprecated.",
        ["rabbitmq", "ha"],
    ),
    (
        "rabbitmq-dead-letter-exchange",
        "Configure a dead-letter exchange on RabbitMQ queues so rejected or expired messages are kept for inspection instead of vanishing.",
        ["rabbitmq", "reliability"],
    ),
    (
        "helm-values-precedence",
        "Helm merges values in order: chart defaults, then each `-f` file left to right, then `--set`; the last one wins.",
        ["helm", "kubernetes"],
    ),
    (
        "helm-upgrade-install-atomic",
        "Use `helm upgrade --install --atomic --timeout 10m` in pipelines so a failed release rolls back instead of staying in `failed` state.",
        ["helm", "deploy"],
    ),
    (
        "helm-template-debug",
        "Render a chart locally with `helm template . -f values-prod.yaml` to review manifests before they reach the cluster.",
        ["helm", "debugging"],
    ),
    (
        "ansible-become-per-task",
        "Set `become: true` only on the Ansible tasks that need root instead of the whole play; it keeps file ownership right for user-level tasks.",
        ["ansible", "automation"],
    ),
    (
        "ansible-check-diff-mode",
        "Run Ansible playbooks with `--check --diff` first to see what would change on each host.",
        ["ansible", "automation"],
    ),
    (
        "ansible-vault-encrypt-string",
        "Keep single secrets inline in Ansible vars with `ansible-vault encrypt_string` rather than encrypting whole files.",
        ["ansible", "secrets"],
    ),
    (
        "vault-token-ttl-renew",
        "Vault tokens expire at their TTL; long-running services should use the agent's auto-auth with a renewable token instead of a static one.",
        ["vault", "secrets"],
    ),
    (
        "vault-kv-v2-paths",
        "For Vault KV version 2 the API path contains `data/` (`secret/data/app`) but the CLI `vault kv get secret/app` hides it.",
        ["vault", "secrets"],
    ),
    (
        "bazel-remote-cache",
        "Point Bazel at a shared remote cache (`--remote_cache=grpcs://...`) so CI and laptops reuse each other's build outputs.",
        ["bazel", "build"],
    ),
    (
        "bazel-visibility-rules",
        'Bazel targets are private to their package by default; expose them with `visibility = ["//services:__subpackages__"]`.',
        ["bazel", "monorepo"],
    ),
    (
        "grpc-deadlines-always",
        "Always set a deadline on gRPC calls; without one a call can wait forever and hold server resources.",
        ["grpc", "rpc"],
    ),
    (
        "grpc-status-codes-retry",
        "Only retry gRPC calls on UNAVAILABLE (and RESOURCE_EXHAUSTED with backoff); retrying INVALID_ARGUMENT just repeats the failure.",
        ["grpc", "retries"],
    ),
    (
        "protobuf-field-numbers-reserved",
        "Never reuse a protobuf field number; mark removed fields with `reserved 4;` so old clients don't misread new data.",
        ["protobuf", "api"],
    ),
    (
        "graphql-dataloader-batching",
        "Resolve GraphQL list children through a DataLoader so per-item lookups are batched into one query per tick.",
        ["graphql", "performance"],
    ),
    (
        "graphql-query-depth-limit",
        "Public GraphQL endpoints need a query depth or cost limit; nested queries can otherwise fan out into millions of resolver calls.",
        ["graphql", "security"],
    ),
    (
        "kotlin-coroutines-dispatchers-io",
        "Run blocking calls in Kotlin coroutines on `Dispatchers.IO`; doing them on `Dispatchers.Default` starves CPU-bound work.",
        ["kotlin", "coroutines"],
    ),
    (
        "kotlin-data-class-copy",
        "Kotlin data classes give `copy()`; prefer `val` properties with copy over mutable `var`s for state objects.",
        ["kotlin", "style"],
    ),
    (
        "scala-sbt-coursier-cache",
        "sbt resolves through Coursier since 1.3; clear a corrupt download under the Coursier cache directory rather than ~/.ivy2.",
        ["scala", "sbt"],
    ),
    (
        "jenkins-declarative-timeout",
        "Wrap Jenkins declarative stages in `timeout(time: 30, unit: 'MINUTES')` so a hung step frees the agent.",
        ["jenkins", "ci"],
    ),
    (
        "jenkins-credentials-binding",
        "Use `withCredentials` in Jenkinsfiles; Jenkins masks bound values in the console log, plain env vars are not masked.",
        ["jenkins", "secrets"],
    ),
    (
        "grafana-provisioning-dashboards",
        "Provision Grafana dashboards from JSON files in the provisioning directory so they are versioned; edits made in the UI are lost on restart.",
        ["grafana", "observability"],
    ),
    (
        "opentelemetry-sampling-parent",
        "Use a parent-based OpenTelemetry sampler so a trace is either fully kept or fully dropped across services.",
        ["opentelemetry", "tracing"],
    ),
    (
        "opentelemetry-resource-service-name",
        "Set `OTEL_SERVICE_NAME` for every service; without it traces show up as `unknown_service`.",
        ["opentelemetry", "tracing"],
    ),
    (
        "sqlite-wal-mode-readers",
        "Enable SQLite WAL mode (`PRAGMA journal_mode=WAL`) when readers and a writer run concurrently; readers then don't block the writer.",
        ["sqlite", "database"],
    ),
    (
        "sqlite-foreign-keys-pragma",
        "SQLite doesn't enforce foreign keys unless each connection runs `PRAGMA foreign_keys = ON`.",
        ["sqlite", "database"],
    ),
    (
        "mongodb-index-esr-rule",
        "Order MongoDB compound index fields equality first, then sort, then range (the ESR rule).",
        ["mongodb", "indexes"],
    ),
    (
        "mongodb-write-concern-majority",
        "Use write concern `majority` for MongoDB writes that must survive a primary failover.",
        ["mongodb", "durability"],
    ),
    (
        "cassandra-partition-size",
        "Keep Cassandra partitions under roughly 100 MB; time-bucket the partition key for append-only event tables.",
        ["cassandra", "data-modeling"],
    ),
    (
        "clickhouse-order-by-key",
        "In ClickHouse MergeTree tables the ORDER BY key decides what can be skipped; put the most selective filter columns first.",
        ["clickhouse", "analytics"],
    ),
    (
        "pandas-chained-assignment",
        "Avoid `df[df.x > 0]['y'] = 1` in pandas; it may modify a copy. Use `df.loc[df.x > 0, 'y'] = 1`.",
        ["pandas", "python"],
    ),
    (
        "pandas-read-csv-dtype",
        "Pass `dtype=` to pandas read_csv for id columns; otherwise zip codes and ids with leading zeros turn into integers.",
        ["pandas", "csv"],
    ),
    (
        "numpy-float-equality",
        "Compare floating-point arrays with `numpy.isclose`/`allclose`, not `==`.",
        ["numpy", "python"],
    ),
    (
        "pydantic-v2-model-dump",
        "Pydantic v2 renamed `.dict()` to `.model_dump()` and `parse_obj` to `model_validate`; the old names only warn for now.",
        ["pydantic", "python"],
    ),
    (
        "fastapi-depends-yield-cleanup",
        "FastAPI dependencies that `yield` run their cleanup after the response; use them for sessions rather than middleware.",
        ["fastapi", "python"],
    ),
    (
        "sqlalchemy-expire-on-commit",
        "SQLAlchemy expires loaded objects on commit by default; set `expire_on_commit=False` when you return ORM objects after committing in async code.",
        ["sqlalchemy", "python"],
    ),
    (
        "spring-transactional-self-invocation",
        "Spring's @Transactional doesn't apply when a method calls another method of the same bean; the call bypasses the proxy.",
        ["spring", "java"],
    ),
    (
        "spring-profiles-active",
        "Activate Spring profiles with `SPRING_PROFILES_ACTIVE=prod`; profile-specific files are `application-prod.yml`.",
        ["spring", "config"],
    ),
    (
        "hibernate-lazy-open-in-view",
        "Disable `spring.jpa.open-in-view`; it keeps a database session open during view rendering and hides lazy-loading bugs.",
        ["hibernate", "spring"],
    ),
    (
        "css-container-queries",
        "Use CSS container queries (`@container`) when a component's layout should depend on its parent's width rather than the viewport.",
        ["css", "frontend"],
    ),
    (
        "tailwind-content-globs",
        "Tailwind only generates classes it finds in the `content` globs; class names built by string concatenation get purged.",
        ["tailwind", "css"],
    ),
    (
        "svelte-reactive-assignments",
        "Svelte 4 reactivity is triggered by assignment; `arr.push(x)` needs `arr = arr` afterwards.",
        ["svelte", "frontend"],
    ),
    (
        "vue-reactivity-destructure",
        "Destructuring a Vue `reactive()` object loses reactivity; use `toRefs()` first.",
        ["vue", "frontend"],
    ),
    (
        "angular-onpush-change-detection",
        "With Angular OnPush change detection, mutate inputs immutably; in-place changes aren't picked up.",
        ["angular", "frontend"],
    ),
    (
        "playwright-auto-waiting",
        "Playwright locators auto-wait; remove explicit `waitForTimeout` sleeps and assert with `expect(locator).toHaveText()`.",
        ["playwright", "testing"],
    ),
    (
        "jest-fake-timers-modern",
        "Jest modern fake timers also fake Date; call `jest.setSystemTime()` to pin the clock in tests.",
        ["jest", "testing"],
    ),
    (
        "storybook-args-controls",
        "Define Storybook stories with `args` so controls are generated automatically instead of hard-coding props.",
        ["storybook", "frontend"],
    ),
    (
        "openapi-generate-clients",
        "Generate API clients from the OpenAPI spec in CI and fail the build when the generated code differs from what is committed.",
        ["openapi", "api"],
    ),
    (
        "http-idempotency-keys",
        "Accept an Idempotency-Key header on POST endpoints that create payments or orders, and store the first response per key.",
        ["http", "api-design"],
    ),
    (
        "http-etag-conditional-requests",
        "Return an ETag and honour If-None-Match so clients can revalidate cached responses with a 304.",
        ["http", "caching"],
    ),
    (
        "webhooks-verify-signatures",
        "Verify webhook HMAC signatures with a constant-time comparison and reject deliveries older than five minutes.",
        ["webhooks", "security"],
    ),
    (
        "prom-histogram-buckets",
        "Pick histogram buckets around your latency SLO; default buckets often put every request into one bucket.",
        ["metrics", "observability"],
    ),
    (
        "structured-logs-request-id",
        "Attach a request id to every log line of a request and return it in a response header so support can find the logs.",
        ["logging", "observability"],
    ),
    (
        "feature-branch-preview-envs",
        "Spin up a preview environment per pull request and tear it down when the PR closes, or idle environments pile up costs.",
        ["ci", "environments"],
    ),
    (
        "semver-major-for-removals",
        "Removing or renaming a public function is a major version bump under semver, even if nobody seems to use it.",
        ["versioning", "libraries"],
    ),
    (
        "unicode-normalize-user-input",
        "Normalise user-supplied identifiers to NFC (or NFKC for usernames) before comparing or storing them.",
        ["unicode", "security"],
    ),
    (
        "argon2-password-hashing",
        "Hash passwords with Argon2id (or bcrypt) with a per-user salt; never plain SHA-256.",
        ["security", "passwords"],
    ),
    (
        "jwt-short-lived-access",
        "Keep JWT access tokens short-lived (minutes) and rotate refresh tokens; a JWT can't be revoked before it expires.",
        ["jwt", "auth"],
    ),
    (
        "oauth-pkce-public-clients",
        "Mobile and single-page apps must use the OAuth authorization-code flow with PKCE; the implicit flow is deprecated.",
        ["oauth", "auth"],
    ),
    (
        "dns-ttl-before-migration",
        "Lower DNS TTLs a day before moving a service to new addresses, so the cutover propagates in minutes.",
        ["dns", "migrations"],
    ),
    (
        "cdn-cache-busting-hashes",
        "Serve static assets with content hashes in their file names and a long max-age; only the HTML needs a short cache.",
        ["cdn", "caching"],
    ),
    (
        "queue-outbox-pattern",
        "Publish domain events through a transactional outbox table so the database write and the message can't diverge.",
        ["architecture", "messaging"],
    ),
    (
        "backfill-in-batches",
        "Backfill large tables in batches of a few thousand rows with a pause between batches, and make the job resumable by key.",
        ["databases", "migrations"],
    ),
    (
        "load-test-realistic-data",
        "Load-test with production-like data volumes; an empty table makes every query look fast.",
        ["performance", "testing"],
    ),
    (
        "code-review-small-prs",
        "Keep pull requests under about 400 changed lines; reviewers skim anything bigger.",
        ["process", "code-review"],
    ),
    (
        "adr-record-decisions",
        "Record architecture decisions as short ADRs in docs/adr with context, decision and consequences.",
        ["process", "documentation"],
    ),
]

SERVICES = [
    "ledger-sync",
    "quota-api",
    "geo-indexer",
    "invoice-renderer",
    "pricing-engine",
    "notify-hub",
    "search-gateway",
    "catalog-writer",
    "media-transcoder",
    "fraud-scorer",
    "session-broker",
    "report-builder",
    "audit-trail",
    "inventory-core",
    "shipping-quotes",
    "loyalty-points",
    "tax-calculator",
    "recommendation-feed",
    "consent-store",
    "user-directory",
    "content-moderator",
    "payout-scheduler",
    "warehouse-sync",
    "partner-portal",
    "order-router",
    "price-alerts",
    "doc-converter",
    "address-validator",
    "subscription-billing",
    "usage-meter",
    "kyc-checker",
    "returns-desk",
    "chat-relay",
    "image-resizer",
    "survey-collector",
    "contract-signer",
    "fleet-tracker",
    "booking-calendar",
    "coupon-service",
    "risk-dashboard",
    "ticket-triage",
    "menu-sync",
    "ad-bidder",
    "metrics-rollup",
    "identity-proxy",
    "gift-cards",
    "delivery-eta",
    "affiliate-tracker",
    "label-printer",
    "receipt-parser",
    "store-locator",
    "voucher-ledger",
    "claims-intake",
    "lead-scoring",
    "translation-memory",
    "playlist-curator",
    "sensor-ingest",
    "route-planner",
    "exam-grader",
    "donation-ledger",
]
PROJECTS = [
    "nimbus",
    "beacon",
    "cobalt",
    "dune",
    "ember",
    "fjord",
    "granite",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lumen",
]
TEAMS = [
    "platform",
    "data",
    "payments",
    "growth",
    "trust-and-safety",
    "mobile",
    "search",
    "logistics",
    "identity",
    "finance-eng",
]
QUEUES = [
    "orders.created",
    "invoice.requested",
    "user.deleted",
    "price.changed",
    "shipment.updated",
    "report.scheduled",
    "media.uploaded",
    "payout.approved",
    "consent.revoked",
    "stock.adjusted",
    "claim.filed",
    "lead.qualified",
]
TABLES = [
    "accounts",
    "orders",
    "payouts",
    "events",
    "line_items",
    "shipments",
    "vouchers",
    "documents",
    "audit_log",
    "subscriptions",
    "claims",
    "devices",
    "bookings",
    "leads",
    "routes",
    "readings",
]
FIELDS = ["event_id", "request_id", "external_ref", "message_id", "idempotency_key", "correlation_id"]
DASHBOARDS = ["Service Overview", "Golden Signals", "Queue Health", "Business KPIs", "Dependency Map", "Error Budget"]
METRICS = ["p99 latency", "consumer lag", "error ratio", "saturation", "retry rate", "dropped events"]
VENDORS = [
    "the geocoding vendor",
    "the SMS provider",
    "the tax API",
    "the card processor",
    "the address service",
    "the e-signature vendor",
    "the translation API",
    "the shipping carrier API",
]
CLIENT_PKGS = ["internal/clients", "pkg/rpc", "lib/remote", "src/integrations", "app/gateways"]
QUARTERS = ["Q1", "Q2", "Q3", "Q4"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday"]

# Convention templates: (key suffix, value template, tags). Slots are filled per lesson.
TEMPLATES: list[tuple[str, str, list[str]]] = [
    (
        "consumer-idempotent-{qslug}",
        "{svc}'s consumer for `{queue}` must stay idempotent: messages are redelivered if not acknowledged within {ack_s} s. Deduplicate on the `{field}` field before doing any work.",
        ["messaging", "convention"],
    ),
    (
        "canary-{pct}-{mins}",
        "Releases of {svc} go out as a canary first ({pct}% of traffic for {mins} minutes); promote only if the {metric} panel on the {dash} dashboard stays flat.",
        ["deploy", "convention"],
    ),
    (
        "schema-review-{table}",
        "Changes to the `{table}` table owned by {svc} need a review from the {team} team; add the migration under `db/{table}/` and mention the expected row count in the PR.",
        ["schema", "review"],
    ),
    (
        "rate-limit-{rate}-{unit}",
        "{svc}'s public API allows {rate} requests per {unit} per API key; raising a partner's limit needs a ticket to the {team} team, never a config edit in prod.",
        ["api", "limits"],
    ),
    (
        "client-{pslug}",
        "{svc} calls {vendor} only through the wrapper in `{pkg}`; it adds retries, metrics and a circuit breaker. Don't instantiate the vendor SDK directly.",
        ["integrations", "convention"],
    ),
    (
        "export-retention-{days}d",
        "The nightly export of {svc} lands in `exports/{svc}/{table}/` and is kept for {days} days; production jobs must not read from it, use the replica instead.",
        ["data", "retention"],
    ),
    (
        "oncall-first-look-{dslug}",
        "On-call for {svc}: start at the {dash} dashboard; the {metric} panel is the first thing to degrade when {vendor} slows down.",
        ["oncall", "runbook"],
    ),
    (
        "retry-budget-{attempts}",
        "{svc} retries outbound calls with exponential backoff capped at {attempts} attempts; wrapping those calls in another retry loop multiplies load on {vendor}.",
        ["retries", "convention"],
    ),
    (
        "owner-{team}",
        "{svc} is owned by the {team} team; questions go to their channel, and changes to its public contract need their approval in the PR.",
        ["ownership", "process"],
    ),
    (
        "batch-size-{batch}",
        "Backfills in {svc} process `{table}` in batches of {batch} rows with a short sleep between batches; larger batches have starved the {queue} consumer before.",
        ["backfill", "convention"],
    ),
    (
        "release-day-{day}",
        "{svc} releases on {day}s only, after the {team} team's sync; hotfixes outside that window need a second approver.",
        ["release", "process"],
    ),
    (
        "deprecation-{quarter}",
        "The v1 REST endpoints of {svc} are deprecated and will be removed in {quarter}; new callers must use the v2 API described in `docs/api/v2.md`.",
        ["api", "deprecation"],
    ),
    (
        "sla-{latency}ms",
        "{svc} has an internal latency target of {latency} ms at p99 for reads; anything slower that you add must go behind the async path through `{queue}`.",
        ["performance", "slo"],
    ),
    (
        "pii-{table}",
        "The `{table}` table in {svc} holds personal data: access it only through the repository layer, which logs an audit record with the `{field}`.",
        ["privacy", "convention"],
    ),
    (
        "fixtures-{table}",
        "Test data for {svc} comes from the factories in `tests/factories/{table}.py`; don't add rows to the shared seed file, other teams depend on it.",
        ["testing", "convention"],
    ),
    (
        "event-version-{version}",
        "Events that {svc} publishes on `{queue}` carry a `schema_version` (currently {version}); add fields only, and bump the version for anything a consumer could misread.",
        ["events", "compatibility"],
    ),
    (
        "admin-actions-{team}",
        "Admin actions in {svc} (refunds, manual overrides) need two-person approval through the {team} tool; never run them from a shell.",
        ["operations", "process"],
    ),
    (
        "dashboards-as-code-{dslug}",
        "The {dash} dashboard for {svc} is generated from `observability/{svc}.jsonnet`; edit the source, not the dashboard in the UI.",
        ["observability", "convention"],
    ),
    (
        "vendor-sandbox-{pslug}",
        "{svc} talks to the sandbox of {vendor} in every environment except production; the switch is the `{svc_upper}_VENDOR_MODE` setting, not a code change.",
        ["integrations", "environments"],
    ),
    (
        "archive-{table}-{days}d",
        "Rows in `{table}` older than {days} days are moved by {svc}'s archiver to cold storage every {day}; queries that need older data go through the archive API.",
        ["data", "archiving"],
    ),
]


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-").replace("--", "-")


def _convention(rng: random.Random) -> dict:
    suffix, template, tags = rng.choice(TEMPLATES)
    svc = rng.choice(SERVICES)
    slots = {
        "svc": svc,
        "svc_upper": svc.upper().replace("-", "_"),
        "queue": rng.choice(QUEUES),
        "table": rng.choice(TABLES),
        "field": rng.choice(FIELDS),
        "dash": rng.choice(DASHBOARDS),
        "metric": rng.choice(METRICS),
        "vendor": rng.choice(VENDORS),
        "pkg": rng.choice(CLIENT_PKGS),
        "team": rng.choice(TEAMS),
        "quarter": rng.choice(QUARTERS),
        "day": rng.choice(WEEKDAYS),
        "ack_s": rng.choice([30, 60, 120, 300, 600]),
        "rate": rng.choice([10, 20, 50, 100, 200, 500, 1000, 5000]),
        "attempts": rng.choice([3, 4, 5, 6, 8]),
        "batch": rng.choice([500, 1000, 2000, 5000, 10000]),
        "latency": rng.choice([50, 80, 100, 150, 200, 250, 300, 500, 800]),
        "version": rng.choice([2, 3, 4, 5, 6, 7]),
        "pct": rng.choice([1, 2, 5, 10, 25]),
        "mins": rng.choice([10, 15, 20, 30, 45, 60]),
        "unit": rng.choice(["second", "minute", "hour"]),
        "days": rng.choice([7, 14, 30, 60, 90, 180, 365]),
    }
    slots["qslug"] = _slug(slots["queue"])
    slots["pslug"] = _slug(slots["vendor"].replace("the ", ""))
    slots["dslug"] = _slug(slots["dash"])
    value = template.format(**slots)
    # Service names are identifiers: quote them rather than capitalising a sentence-initial one.
    value = value.replace(f"{svc}'s ", f"`{svc}`'s ").replace(f" {svc} ", f" `{svc}` ")
    if value.startswith(svc):
        value = f"`{svc}`" + value[len(svc) :]
    value = value[0].upper() + value[1:]
    key = f"{svc}-{suffix.format(**slots)}"
    scope = f"repo::acme/{svc}" if rng.random() < 0.7 else f"project::{rng.choice(PROJECTS)}"
    return {"scope": scope, "key": _slug(key), "value": value, "tags": [svc, *tags]}


def generate(n: int, seed: int = 0) -> list[dict]:
    """Return ``n`` distinct distractor lessons, the same list for the same (n, seed)."""
    if n < 0:
        raise ValueError("n must be >= 0")
    rng = random.Random(seed)
    facts = list(FACTS)
    rng.shuffle(facts)
    out: list[dict] = []
    seen_keys: set[str] = set()
    seen_values: set[str] = set()
    attempts = 0
    # About one in eight distractors is a real fact while the pool lasts; the rest are conventions.
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 10_000:
            raise RuntimeError(f"could only build {len(out)} distinct distractors")
        if facts and rng.random() < 0.125:
            key, value, tags = facts.pop()
            rec = {"scope": "global", "key": key, "value": value, "tags": list(tags)}
        else:
            rec = _convention(rng)
        if rec["key"] in seen_keys or rec["value"] in seen_values:
            continue
        seen_keys.add(rec["key"])
        seen_values.add(rec["value"])
        out.append({"id": f"D{len(out) + 1:05d}", **rec})
    return out


if __name__ == "__main__":
    import json
    import sys

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    for row in generate(count, seed=int(sys.argv[2]) if len(sys.argv) > 2 else 0):
        print(json.dumps(row, ensure_ascii=False))
