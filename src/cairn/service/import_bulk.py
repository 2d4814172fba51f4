"""The import's fast lanes: records that are plainly new are written together, a batch at a time.

A plain record (or, on a restore, an exported lesson) whose address is free, whose content has no
twin in its scope and matches no live tombstone would be created by the general path anyway; these
lanes create them with one statement per table per batch. Every other record takes the general
path (``transfer.py``), after the pending creates are flushed so it sees them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import or_, select, tuple_
from sqlalchemy.engine import Connection

from cairn.core.content import content_identity
from cairn.core.principal import ADMIN, WRITE, Principal
from cairn.core.timeparse import utcnow
from cairn.service import paraphrase
from cairn.service.lessons import Lessons
from cairn.service.mutate import Change, apply_many, replay_many
from cairn.service.write_input import WriteInput
from cairn.store.schema import lessons, tombstones

BATCH = 500
MAX_REPORTED_ERRORS = 20

Progress = Callable[[int, int], None]


class PlainBulk:
    """The fast lane for plain records that are plainly new: no lesson at their address, no
    same content in their scope, no tombstone, no session to count.

    Those are exactly the records for which the general write path would create a lesson, so
    they are created together with ``apply_many`` (same rows, one statement per table per batch);
    every other record takes the general path, after the pending creates are flushed so it sees
    them. What is "plainly new" is decided from three queries per batch, and, when the tenant has
    tombstone vectors, one embedding of the batch (a record close to one takes the general path,
    which may hold it: ``service/paraphrase.py``).
    """

    def __init__(
        self,
        writer: Lessons,
        conn: Connection,
        principal: Principal,
        recs: list[WriteInput],
        restore: bool,
        *,
        candidate: bool = True,
    ) -> None:
        """``candidate``: an import's records land as candidates whoever imports them (``write_in``'s
        ``import_mode``); a bulk write's lessons get the trust ``write`` gives its caller."""
        self.writer, self.conn, self.principal, self.candidate = writer, conn, principal, candidate
        self.level = ADMIN if restore else WRITE
        self.now = utcnow()
        self.pending: list[Change] = []
        self.enabled = bool(recs) and not principal.session
        self.addresses: set[tuple[str, str]] = set()
        self.twins: set[tuple[str, str]] = set()
        self.dead = LiveTombstones.none()
        self.near: set[str] = set()  # content hashes that may restate a tombstone: the general path decides
        if not self.enabled:
            return
        tenant = principal.tenant_id
        near = paraphrase.near_any(conn, principal, [r.value for r in recs])
        self.near = {r.content_hash for r, close in zip(recs, near, strict=True) if close}
        addrs = list({(r.scope, r.key) for r in recs})
        hashes = list({r.content_hash for r in recs})
        identities = list({r.identity for r in recs})
        for row in conn.execute(
            select(lessons.c.scope, lessons.c.key).where(
                lessons.c.tenant_id == tenant, tuple_(lessons.c.scope, lessons.c.key).in_(addrs)
            )
        ):
            self.addresses.add((row.scope, row.key))
        for row in conn.execute(
            select(lessons.c.scope, lessons.c.content_hash).where(
                lessons.c.tenant_id == tenant, lessons.c.content_hash.in_(hashes)
            )
        ):
            self.twins.add((row.scope, row.content_hash))
        self.dead = LiveTombstones(conn, tenant, hashes, identities, addrs)

    def can_create(self, rec: WriteInput) -> bool:
        if not self.enabled:
            return False
        self.principal.require(self.level, rec.scope)
        h = rec.content_hash
        return (
            (rec.scope, rec.key) not in self.addresses
            and (rec.scope, h) not in self.twins
            and h not in self.near
            and not self.dead.match(h, rec.identity, rec.scope, rec.key)
        )

    def add(self, rec: WriteInput) -> None:
        h = rec.content_hash
        state = self.writer.new_state(self.principal, rec, h, self.now, candidate=self.candidate)
        self.pending.append(Change(None, state, "create"))
        self.touched(rec)

    def touched(self, rec: WriteInput) -> None:
        """A record of this batch now occupies its address and content: later ones must look."""
        self.addresses.add((rec.scope, rec.key))
        self.twins.add((rec.scope, rec.content_hash))

    def flush(self) -> list[dict[str, Any]]:
        """Write the pending creates; the new lesson rows, in the order they were added."""
        rows: list[dict[str, Any]] = []
        if self.pending:
            rows = apply_many(self.conn, self.principal, self.pending, self.now)
            self.pending = []
        return rows


class LiveTombstones:
    """The batch's live tombstones that could refuse one of its records: by hash, identity, address.

    One query per batch answers what ``check_tombstones`` would ask per record; a match sends the
    record down the general path, which refuses it with the tombstone named.
    """

    def __init__(
        self,
        conn: Connection | None,
        tenant: str,
        hashes: list[str],
        identities: list[str],
        addrs: list[tuple[str, str]],
    ) -> None:
        self.hashes: set[str] = set()
        self.identities: set[str] = set()
        self.addresses: set[tuple[str, str]] = set()
        if conn is None or not (hashes or identities or addrs):
            return
        for row in conn.execute(
            select(tombstones.c.content_hash, tombstones.c.identity, tombstones.c.scope, tombstones.c.key).where(
                tombstones.c.tenant_id == tenant,
                tombstones.c.lifted_at.is_(None),
                or_(
                    tombstones.c.content_hash.in_(hashes),
                    tombstones.c.identity.in_(identities),
                    tuple_(tombstones.c.scope, tombstones.c.key).in_(addrs),
                ),
            )
        ):
            self.hashes.add(row.content_hash)
            if row.identity is not None:
                self.identities.add(row.identity)
            self.addresses.add((row.scope, row.key))

    @classmethod
    def none(cls) -> LiveTombstones:
        return cls(None, "", [], [], [])

    def match(self, chash: str, identity: str, scope: str, key: str) -> bool:
        return chash in self.hashes or identity in self.identities or (scope, key) in self.addresses


class RestoreBulk:
    """The fast lane for an admin's restore of lesson records that are plainly new: no lesson at
    their address, no live tombstone of their content or address, not rejected.

    For those the general path (``_import_one``) would check, then ``replay`` one lesson; here
    they are replayed together with ``replay_many`` (the same rows, audit rows and state proofs,
    one statement per table per batch). Anything else — an address already held (unchanged or a
    conflict), a tombstone (refused with its name), a rejected lesson — takes the general path,
    after the pending ones are written so it sees them. Without ``restore`` the lane stays off
    (a claimed import has its own twin rules).
    """

    def __init__(
        self,
        conn: Connection,
        principal: Principal,
        recs: list[tuple[dict[str, Any], list[dict[str, Any]]]],
        restore: bool,
        supersessions: list[tuple[tuple[str, str], tuple[str, str]]],
    ) -> None:
        self.conn, self.principal, self.supersessions = conn, principal, supersessions
        self.now = utcnow()
        self.pending: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        self.enabled = bool(recs) and restore
        self.addresses: set[tuple[str, str]] = set()
        self.dead = LiveTombstones.none()
        if not self.enabled:
            return
        tenant = principal.tenant_id
        addrs = list({(lesson["scope"], lesson["key"]) for lesson, _ in recs})
        for row in conn.execute(
            select(lessons.c.scope, lessons.c.key).where(
                lessons.c.tenant_id == tenant, tuple_(lessons.c.scope, lessons.c.key).in_(addrs)
            )
        ):
            self.addresses.add((row.scope, row.key))
        lasts = [versions[-1] for _, versions in recs]
        hashes = list({v["content_hash"] for v in lasts})
        identities = list({content_identity(v["value"]) for v in lasts})
        self.dead = LiveTombstones(conn, tenant, hashes, identities, addrs)

    def can_create(self, rec: tuple[dict[str, Any], list[dict[str, Any]]]) -> bool:
        if not self.enabled:
            return False
        lesson, versions = rec
        self.principal.require(ADMIN, lesson["scope"])
        last = versions[-1]
        address = (lesson["scope"], lesson["key"])
        return (
            address not in self.addresses
            and last["trust"] != "rejected"
            and not self.dead.match(last["content_hash"], content_identity(last["value"]), *address)
        )

    def add(self, rec: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
        lesson, _ = rec
        self.pending.append(rec)
        self.touched(rec)
        if lesson.get("superseded_by"):  # linked once both ends exist, as the general path does
            sb = lesson["superseded_by"]
            self.supersessions.append(((lesson["scope"], lesson["key"]), (sb["scope"], sb["key"])))

    def touched(self, rec: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
        """A record of this batch now occupies its address: a later one there must look."""
        self.addresses.add((rec[0]["scope"], rec[0]["key"]))

    def flush(self) -> None:
        if self.pending:
            replay_many(self.conn, self.principal, self.pending, self.now)
            self.pending = []
