"""The success bodies of the API's endpoints, as the OpenAPI document shows them.

The service builds these dictionaries; the models name their fields and types so a generated client
gets typed results. They are open (``extra="allow"``): a field the service adds later reaches callers
before the model lists it, and the schema says so (``additionalProperties``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cairn.core.lesson import HeldCode
from cairn.core.sync import ApplyResult, PeerState, SyncBatch

__all__ = ["ApplyResult", "PeerState", "SyncBatch"]  # the sync routes' answers are the sync service's models


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Lesson(Open):
    scope: str
    key: str
    value: str
    tags: list[str]
    kind: str
    trust: str
    status: str
    version: int
    seen_count: int
    helped_count: int
    not_helped_count: int
    source_agent: str | None = None
    trigger: str | None = None
    origin: str | None = None
    author: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    expires_at: str | None = None
    archived_at: str | None = None
    content_hash: str
    created_at: str
    updated_at: str
    url: str | None = None
    created_by: str | None = None
    updated_by: str | None = None
    claimed: dict[str, Any] | None = None  # what an import claimed and was not granted


class Health(Open):
    status: str


class Held(Open):
    """Why a write (or a review entry) is held out of every read: it restates forgotten content.
    The tombstone is named only to a caller who may see its scope."""

    code: HeldCode
    similarity: float | None = None  # the cosine of the two texts embedded (unknown: a restored held lesson)
    tombstone_id: int | None = None
    scope: str | None = None
    key: str | None = None
    reason: str | None = None
    tombstone_lifted: bool | None = None  # in the review queue: the tombstone was lifted since


class Written(Open):
    action: str  # created | updated | recurrence | ...
    lesson: Lesson
    note: str | None = None
    held: Held | None = None  # present when the lesson was written held (lesson.trust == "held")


class OneLesson(Open):
    lesson: Lesson


class Changed(Open):
    changed: bool
    lesson: Lesson
    held: Held | None = None  # a restore of text that restates content forgotten meanwhile


class FeedbackGiven(Open):
    outcome: str
    lesson: Lesson


class LessonPage(Open):
    lessons: list[Lesson]
    next_cursor: str | None = None


class Version(Open):
    version: int
    action: str
    recorded_at: str
    recorded_until: str | None = None
    trust: str
    archived: bool
    content_hash: str
    # The version graph (sync): the versions this one was written on top of, whether no version is
    # written on top of it, and whether it is the one the conflict rule makes current.
    parents: list[int] | None = None
    tip: bool | None = None
    current: bool | None = None


class History(Open):
    scope: str
    key: str
    status: str
    versions: list[Version]


class Hit(Open):
    scope: str
    key: str
    trust: str
    score: float
    lesson: Lesson


class SearchResults(Open):
    query: str
    mode: str
    results: list[Hit]
    pending_embeddings: int = 0  # lessons in reach still queued for their embedding: found by words only


class Recalled(Open):
    text: str
    lessons: list[dict[str, Any]]
    pending_embeddings: int = 0


class Context(Open):
    text: str
    loaded: int
    eligible: int
    ladder: list[str]
    lessons: list[dict[str, Any]]


class Forgotten(Open):
    tombstone_id: int
    already: bool
    scope: str
    key: str
    reason: str | None = None  # absent when the content was already forgotten


class Tombstone(Open):
    id: int
    scope: str
    key: str
    content_hash: str
    reason: str
    created_at: str
    lifted_at: str | None = None
    created_by: str | None = None
    lifted_by: str | None = None
    lift_reason: str | None = None


class TombstonePage(Open):
    tombstones: list[Tombstone]
    next_cursor: str | None = None


class Scopes(Open):
    scopes: list[dict[str, Any]]
    total_active: int


class WhoAmI(Open):
    user: str | None = None
    tenant: str
    permission: str
    scope_patterns: list[str]


# -- audit, purge ---------------------------------------------------------------------------------
class AuditEntry(Open):
    seq: int
    at: str
    actor: str
    session: str | None = None
    action: str
    scope: str | None = None
    key: str | None = None
    version_before: int | None = None
    version_after: int | None = None
    hash_before: str | None = None
    hash_after: str | None = None
    detail: dict[str, Any]


class AuditPage(Open):
    entries: list[AuditEntry]
    next_cursor: str | None = None


class StateCounts(Open):
    lessons: int
    versions: int
    tombstones: int


class AuditVerified(Open):
    """Only a verification that holds is a 200; a broken one is 409 ``AUDIT_BROKEN`` with this in its data."""

    ok: bool
    checked: int
    head: str | None = None
    full: bool
    state: StateCounts | None = None  # the row counts checked against the ledger (``full`` only)
    broken_at: dict[str, Any] | None = None
    problem: str | None = None


class Address(Open):
    scope: str
    key: str


class Purged(Open):
    sweep: str  # expired | archived
    purged: int
    lessons: list[Address]


# -- more lesson operations ------------------------------------------------------------------------
class OldVersion(Address):
    version: int


class Superseded(Written):
    superseded: OldVersion | None = None  # None: nothing matched the key, so this was a plain write
    superseded_status: str | None = None  # the old lesson's status, when it sits at another address


class FieldChange(Open):
    from_: Any = Field(None, alias="from")
    to: Any = None


class Diff(Open):
    scope: str
    key: str
    from_: int = Field(alias="from")
    to: int
    value_diff: str
    fields: dict[str, FieldChange]


class Linked(Open):
    changed: bool
    rel: str


class Seed(Address):
    value: str
    trust: str


class Neighbor(Address):
    depth: int
    rel: str
    direction: str  # out | in
    trust: str
    status: str
    value: str
    summary: str


class Neighborhood(Open):
    seed: Seed
    nodes: list[Neighbor]
    chars: int
    budget: int
    omitted: int


class Lifted(Open):
    tombstone_id: int
    lifted: bool
    reason: str


class ReviewEntry(Lesson):
    held: Held | None = None  # a held lesson: the tombstone it resembles


class ReviewQueue(Open):
    candidates: list[ReviewEntry]
    next_cursor: str | None = None


# -- transfer --------------------------------------------------------------------------------------
class Exported(Open):
    lines: list[str]


class ImportRefusal(Open):
    line: int
    code: str
    message: str


class Imported(Open):
    created: int
    updated: int
    unchanged: int
    tombstones: int
    links: int
    refused: list[ImportRefusal]
    records: int
    restore: bool


# -- gateway conversations --------------------------------------------------------------------------
class Conversation(Open):
    id: int
    protocol: str
    model: str | None = None
    repo: str | None = None
    branch: str | None = None
    project: str | None = None
    turns: int
    messages: int
    revision: int
    created_at: str
    updated_at: str
    created_by: str


class ConversationList(Open):
    conversations: list[Conversation]


class ConversationShown(Conversation):
    transcript: list[dict[str, Any]]  # the kept messages: id, turn, position, role, content
    lessons: list[dict[str, Any]]


class ConversationsForgotten(Open):
    conversations: list[dict[str, Any]]
    tombstones: int
    archived: list[dict[str, str]]
    purged: list[dict[str, str]]


# -- webhooks --------------------------------------------------------------------------------------
class Webhook(Open):
    repo: str
    scope: str
    path: str = Field(description="append to the server's public address: the payload URL for GitHub")
    created_at: str
    created_by: str
    rotated_at: str | None = None
    previous_secret_valid_until: str | None = None
    last_delivery_at: str | None = None
    counts: dict[str, int] = Field(description="deliveries by outcome: created, recurred, ignored, dropped.REASON, …")


class WebhookSecret(Webhook):
    secret: str  # shown in this answer only
    tenant: str


class Webhooks(Open):
    tenant: str
    webhooks: list[Webhook]


class WebhookRemoved(Open):
    repo: str
    removed: bool
    tenant: str


# -- consolidation --------------------------------------------------------------------------------
class ConsolidationRun(Open):
    id: int
    started_at: str
    finished_at: str | None = None
    parameters: dict[str, Any]
    mode: str  # plan | apply
    status: str  # planned | applying | finished | undone
    deletion_epoch: int
    actor: str
    actions: dict[str, int]  # how many actions are in each status


class ActionLesson(Open):
    id: int
    scope: str | None = None  # None once the lesson was purged
    key: str | None = None
    version_read: int | None = None
    version_written: int | None = None


class ConsolidationAction(Open):
    position: int
    kind: str  # merge | promote | flag-contradiction | archive-stale
    status: str  # planned | applied | discarded | skipped | dropped
    status_reason: str | None = None
    recomputed: bool
    reason: str
    lessons: list[ActionLesson]
    keep: ActionLesson | None = None
    target_scope: str | None = None
    created: ActionLesson | None = None


class ConsolidationPlan(Open):
    run: ConsolidationRun | None = None  # None for a dry run (nothing stored)
    actions: list[ConsolidationAction]
    dry_run: bool | None = None
    note: str | None = None


class ConsolidationUndone(ConsolidationPlan):
    reversed: int
    left: list[dict[str, Any]]


class ConsolidationRuns(Open):
    runs: list[ConsolidationRun]


# -- sync: the feed's page, an apply's result and a peer's state are the sync service's own models --
class SyncStore(Open):
    store_id: str = Field(description="this store's id in every sync: events name it as their origin")
