"""The success bodies of the lesson and retrieval endpoints, as the OpenAPI document shows them.

The service builds these dictionaries; the models name their fields and types so a generated client
gets typed results. They are open (``extra="allow"``): a field the service adds later reaches callers
before the model lists it, and the schema says so (``additionalProperties``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


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


class Health(Open):
    status: str


class Written(Open):
    action: str  # created | updated | recurrence | ...
    lesson: Lesson


class OneLesson(Open):
    lesson: Lesson


class Changed(Open):
    changed: bool
    lesson: Lesson


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


class Recalled(Open):
    text: str
    lessons: list[dict[str, Any]]


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


class Tombstone(Open):
    id: int
    scope: str
    key: str
    content_hash: str
    reason: str
    created_at: str
    lifted_at: str | None = None


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
