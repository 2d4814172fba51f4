"""The lesson, defined once: its fields, the values its enums take, its limits and its defaults.

The schema's columns, a version's snapshot, the public view, export and import, the service's
checks and every surface's input schema (HTTP, MCP, CLI help) read these names. A surface that needs
an enum takes its ``Literal`` alias from here, so a value can never be accepted by one surface and
refused by another; a limit changes in one place. Pure: no I/O.

The lifecycle of a lesson (active, rejected, superseded, archived, expired) is ``core/lifecycle.py``.
"""

from __future__ import annotations

from typing import Literal, get_args

# -- enums: the alias types a surface's schema uses, and their values as tuples ----------------------
Kind = Literal["lesson", "fact", "preference", "reference"]
KINDS: tuple[str, ...] = get_args(Kind)
DEFAULT_KIND: Kind = "lesson"

# ``held``: a candidate whose text restates forgotten content (a paraphrase of a live tombstone's);
# it is out of every read until a person verifies it (it becomes verified) or rejects it (forget).
Trust = Literal["candidate", "verified", "rejected", "held"]
TRUSTS: tuple[str, ...] = get_args(Trust)
HELD: Literal["held"] = "held"
# The stable code a held write's result carries (``held.code``), on every surface.
HeldCode = Literal["TOMBSTONE_PARAPHRASE"]
HELD_CODE: HeldCode = "TOMBSTONE_PARAPHRASE"
# What a list filter may ask for: a rejected lesson is never listed, so asking for it is an error.
TrustFilter = Literal["candidate", "verified"]
TRUST_FILTERS: tuple[str, ...] = get_args(TrustFilter)

# Who or what wrote a lesson; an import or a webhook records itself, never the claim it carried.
Origin = Literal["agent", "human", "webhook", "import", "consolidation", "gateway"]
ORIGINS: tuple[str, ...] = get_args(Origin)

# The links a caller may make; ``supersedes`` is written only by supersede, with the lesson it replaces.
Rel = Literal["related", "contradicts", "derived_from"]
USER_RELS: tuple[str, ...] = get_args(Rel)
SUPERSEDES = "supersedes"
RELS: tuple[str, ...] = (*USER_RELS, SUPERSEDES)

Outcome = Literal["helped", "not-helped"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)
# The counter each outcome adds to.
OUTCOME_COUNTERS: dict[str, str] = dict(zip(OUTCOMES, ("helped_count", "not_helped_count"), strict=True))

Mode = Literal["hybrid", "fts", "vector"]  # how search matches: both arms fused, full text, or vectors
MODES: tuple[str, ...] = get_args(Mode)
DEFAULT_MODE: Mode = "hybrid"

Sweep = Literal["expired", "archived"]  # what purge erases
SWEEPS: tuple[str, ...] = get_args(Sweep)

# What forgetting a conversation does to the candidate lessons drawn from it.
CandidateFate = Literal["archive", "purge"]
CANDIDATE_FATES: tuple[str, ...] = get_args(CandidateFate)

# -- fields --------------------------------------------------------------------------------------
# The columns a mutation may change (everything but identity and bookkeeping).
STATE_FIELDS = (
    "scope", "key", "value", "tags", "kind", "source_agent", "trigger", "origin", "author", "url",
    "trust", "seen_count", "helped_count", "not_helped_count", "valid_from", "valid_to",
    "expires_at", "archived_at", "superseded_by", "content_hash", "claimed",
)  # fmt: skip
# What each version snapshots of the lesson's state (archived is kept as a flag beside it).
VERSION_STATE = (
    "scope", "key", "value", "content_hash", "tags", "kind", "source_agent", "trigger", "trust",
    "seen_count", "helped_count", "not_helped_count", "valid_from", "valid_to", "expires_at",
)  # fmt: skip
# A version as history and restore show it.
VERSION_FIELDS = (
    "version", "action", "value", "content_hash", "tags", "kind", "source_agent", "trigger", "trust",
    "archived", "seen_count", "helped_count", "not_helped_count", "valid_from", "valid_to", "expires_at",
    "recorded_at", "actor", "session",
)  # fmt: skip

# The lesson as every surface shows it, in this order ("status" is derived from the row and the time).
PUBLIC_FIELDS = (
    "scope", "key", "value", "tags", "kind", "trust", "status", "version", "seen_count", "helped_count",
    "not_helped_count", "source_agent", "trigger", "origin", "author", "url", "valid_from", "valid_to",
    "expires_at", "archived_at", "content_hash", "created_at", "updated_at", "created_by", "updated_by",
    "claimed",
)  # fmt: skip
# The fields of a lesson, a version or a tombstone that hold a time (shown in ISO 8601, or null).
TIME_FIELDS = frozenset(
    {"valid_from", "valid_to", "expires_at", "archived_at", "created_at", "updated_at", "recorded_at", "lifted_at"}
)

# -- limits --------------------------------------------------------------------------------------
MAX_VALUE_BYTES = 64 * 1024  # UTF-8 bytes of a value; a tenant's limit may only lower it
MAX_TAGS = 32
MAX_TAG_CHARS = 64
TAG_CHARS = "A-Za-z0-9._:/+#-"  # after the first character, which is a letter or digit
MAX_FIELD_CHARS = 500  # source_agent, trigger, author, url
# One page of any listing (lessons, candidates, audit entries, tombstones, tokens, members), on every
# surface: the service, the HTTP API, MCP and the remote client ask and answer the same page.
MAX_PAGE = 10_000
# Read-side bounds, one definition for the service's checks, the request models and the CLI's help.
MAX_QUERY_CHARS = 4000  # a search query or an error text given to recall
MAX_SEARCH_RESULTS = 100  # results of one search
MAX_TASK_CHARS = 2000  # the task hint of a context block


def choices(enum: object) -> str:
    """An enum's values as a command's help shows them: ``candidate | verified``."""
    return " | ".join(get_args(enum))
