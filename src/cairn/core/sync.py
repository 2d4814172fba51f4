"""Sync between two stores, the pure part: the event and batch models, and the conflict rule.

A store's change feed is its audit log (one row per mutation, a gap-free ``seq`` per tenant): each
row becomes zero or more events, and the ``seq`` of the last row read is the cursor. An event names
what changed by address and content, never by a row id, so it means the same in any store:

* ``version`` -- one version of a lesson, with its global ``uid`` and the uids it was written on
  top of (``parents``); applying it appends it to the lesson's history (versions are append-only
  on both sides, so sync merges histories instead of overwriting them);
* ``tombstone`` -- content (hash and wider identity) and an address were forgotten;
* ``unforget`` -- a person lifted that tombstone (the only way back);
* ``purge`` -- a lesson's content was erased;
* ``link`` -- a link between two lessons (by address).

The models are what the HTTP transport carries (``service/sync.py`` builds and applies them).
The rules that decide what a merged history holds (its tips, the conflict rule, who may grant
trust) are ``core/history.py``; service-level rules (permissions, tombstones) live in the service.
Pydantic loads with this module, so the write path (which needs only ``core/history.py``) never
imports it.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

EventKind = Literal["version", "tombstone", "unforget", "purge", "link"]
EVENT_KINDS: tuple[str, ...] = get_args(EventKind)
# What became of an event in the store that received it.
Outcome = Literal["applied", "conflict", "skipped", "refused"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)

STORE_ID_PATTERN = r"^[0-9a-f]{32}$"
# An event's uid: a version's uid (32 hex), or "<origin store>:<audit seq>" for the other kinds.
UID_PATTERN = r"^[0-9a-f]{32}(:[0-9]{1,19})?$"
MAX_BATCH = 2000  # events in one batch, both ways: one apply is one write transaction
DEFAULT_BATCH = 500


class ChainHead(BaseModel):
    """A store's audit chain head: the last row's ``seq`` and ``row_hash`` (``seq`` 0: empty chain)."""

    model_config = ConfigDict(extra="forbid")
    seq: int = Field(ge=0)
    hash: str = Field(pattern=r"^[0-9a-f]{64}$")


class SyncEvent(BaseModel):
    """One change, as every store reads it. ``body`` is the kind's payload (``docs/sync.md``)."""

    model_config = ConfigDict(extra="forbid")
    uid: str = Field(pattern=UID_PATTERN)
    kind: EventKind
    origin_store: str = Field(pattern=STORE_ID_PATTERN)
    body: dict[str, Any]


class SyncBatch(BaseModel):
    """A page of a store's feed: its events after the cursor asked for, in order.

    ``cursor``: the feed position after this page (ask for ``since=cursor`` next); ``more``: whether
    the feed held more rows when it was read; ``head``: the sending store's chain head then.
    """

    model_config = ConfigDict(extra="forbid")
    store_id: str = Field(pattern=STORE_ID_PATTERN)
    events: list[SyncEvent] = Field(max_length=MAX_BATCH)
    cursor: int = Field(ge=0)
    more: bool
    head: ChainHead


class Refusal(BaseModel):
    """An event the receiving store would not apply, and why (a stable error code)."""

    uid: str
    kind: str
    code: str
    message: str
    scope: str | None = None
    key: str | None = None


class ApplyResult(BaseModel):
    """What one apply did: counts by outcome, the refusals, and this store's chain head after it."""

    applied: int
    skipped: int
    conflicts: int
    refused: list[Refusal]
    head: ChainHead


class PeerState(BaseModel):
    """What this store knows of a peer: how far each direction got, the peer's last chain head, when."""

    peer_store_id: str
    pulled_cursor: int  # the peer's feed position up to which its events were applied here
    pushed_cursor: int  # this store's feed position up to which the peer accepted our events
    peer_head: ChainHead | None
    last_pulled_at: str | None
    last_pushed_at: str | None
    last_exchange_at: str | None
