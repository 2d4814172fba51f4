"""Sync between two stores, the part that is the same on both ends: the feed, the apply, the peer state.

Two stores of one tenant (a laptop's SQLite file, the team's server) exchange what each has that
the other lacks. Each side serves ``feed`` (its events after a cursor, ``core/sync.py``) and takes
``apply`` (a peer's batch, in one write transaction). The transport (HTTP, the ``cairn sync``
client, the daemon's background sync) moves batches between them and holds no rule.

Resumable and exactly-once: ``apply`` records the batch's cursor and the peer's chain head in the
same transaction as the events, and skips every event whose uid it already holds, so a sync cut at
any point continues where it stopped and applies nothing twice. ``record_pushed`` records, on the
sending side, how far the peer accepted our feed; if the sender dies before recording it, the next
push sends the same events and the peer skips them.

docs/sync.md has the model: merged histories and the conflict rule, forgetting wins, trust does not
travel upward by itself, tenancy and scopes.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from cairn.core.principal import READ, WRITE, Principal
from cairn.core.timeparse import format_time, utcnow
from cairn.errors import CairnError, invalid_input
from cairn.service import audit, rank_cache
from cairn.service.sync_apply import Applier
from cairn.service.sync_feed import build_events
from cairn.service.tx import read_tx, write_tx
from cairn.store.dialect import ONE_ROW
from cairn.store.engine import Store
from cairn.store.schema import audit_log, sync_peers, sync_stores

if TYPE_CHECKING:
    from cairn.core.sync import ApplyResult, ChainHead, PeerState, SyncBatch

M = TypeVar("M")

# The models are pydantic, which the facade must not load for every command (the hot path imports
# the service): they are imported where a sync runs.


def chain_head(conn: Connection, tenant_id: str) -> ChainHead:
    """The tenant's audit chain head: the last row's seq and hash (0 and the genesis hash when empty)."""
    row = conn.execute(
        select(audit_log.c.seq, audit_log.c.row_hash)
        .where(audit_log.c.tenant_id == tenant_id)
        .order_by(audit_log.c.seq.desc())
        .limit(ONE_ROW)
    ).first()
    from cairn.core import sync as m

    return m.ChainHead(seq=row.seq, hash=row.row_hash) if row else m.ChainHead(seq=0, hash=audit.GENESIS)


def _check_store_id(value: str, what: str) -> str:
    from cairn.core.sync import STORE_ID_PATTERN

    if not isinstance(value, str) or not re.fullmatch(STORE_ID_PATTERN, value):
        raise CairnError(
            "INVALID_INPUT", f"{what} is a store id: 32 lowercase hex characters (cairn sync status shows it)"
        )
    return value


def _model(model: type[M], value: Any) -> M:
    """``value`` as ``model`` (a surface may pass the parsed JSON): a bad one is INVALID_INPUT."""
    if isinstance(value, model):
        return value
    from pydantic import ValidationError

    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise invalid_input(exc.errors(include_input=False)) from None


def _peer_row(conn: Connection, principal: Principal, peer: str) -> dict[str, Any] | None:
    row = (
        conn.execute(
            select(sync_peers).where(sync_peers.c.tenant_id == principal.tenant_id, sync_peers.c.peer_store_id == peer)
        )
        .mappings()
        .first()
    )
    return dict(row) if row else None


def _save_peer(conn: Connection, principal: Principal, peer: str, **values: Any) -> None:
    """Create or update this store's record of ``peer`` (inside the caller's write transaction)."""
    if _peer_row(conn, principal, peer) is None:
        conn.execute(
            insert(sync_peers).values(tenant_id=principal.tenant_id, peer_store_id=peer, created_at=utcnow(), **values)
        )
    else:
        conn.execute(
            update(sync_peers)
            .where(sync_peers.c.tenant_id == principal.tenant_id, sync_peers.c.peer_store_id == peer)
            .values(**values)
        )


@dataclass(eq=False, repr=False)
class SyncService:
    """The feed and the apply of one store, and what it knows of its peers."""

    store: Store

    def store_id(self, principal: Principal) -> str:
        """This store's id in the principal's tenant: made once, on first use, and never changed."""
        principal.require(READ)

        def read(conn: Connection) -> str | None:
            return conn.execute(
                select(sync_stores.c.store_id).where(sync_stores.c.tenant_id == principal.tenant_id)
            ).scalar()

        found = read_tx(self.store, principal, read)
        if found:
            return str(found)

        def create(conn: Connection, acting: Principal) -> str:
            held = read(conn)  # under the write lock: a concurrent first use made it already
            if held:
                return str(held)
            new = uuid.uuid4().hex
            conn.execute(insert(sync_stores).values(tenant_id=acting.tenant_id, store_id=new, created_at=utcnow()))
            return new

        return write_tx(self.store, principal, create)

    def feed(
        self, principal: Principal, *, since: int = 0, limit: int | None = None, exclude_origin: str | None = None
    ) -> SyncBatch:
        """This store's events after cursor ``since``, in order, that the principal may read.

        ``limit`` (default ``core/sync.py: DEFAULT_BATCH``) bounds the audit rows read (so a page's
        cost is bounded whatever they hold); ``cursor`` is where the next page starts, ``more``
        whether rows remained. Events that came from ``exclude_origin`` (or through it) are left
        out: the peer asking has them.
        """
        from cairn.core import sync as m

        principal.require(READ)
        if not isinstance(since, int) or since < 0:
            raise CairnError("INVALID_INPUT", f"since is a feed cursor (an integer from 0), got {since!r}")
        limit = m.DEFAULT_BATCH if limit is None else limit
        if not isinstance(limit, int) or not 1 <= limit <= m.MAX_BATCH:
            raise CairnError("INVALID_INPUT", f"limit must be between 1 and {m.MAX_BATCH}, got {limit}")
        if exclude_origin is not None:
            _check_store_id(exclude_origin, "exclude_origin")
        me = self.store_id(principal)

        def tx(conn: Connection) -> SyncBatch:
            rows = (
                conn.execute(
                    select(audit_log)
                    .where(audit_log.c.tenant_id == principal.tenant_id, audit_log.c.seq > since)
                    .order_by(audit_log.c.seq)
                    .limit(limit)
                )
                .mappings()
                .all()
            )
            head = chain_head(conn, principal.tenant_id)
            events = build_events(conn, principal, me, list(rows), exclude_origin)
            cursor = rows[-1]["seq"] if rows else max(since, 0)
            return m.SyncBatch(store_id=me, events=events, cursor=cursor, more=cursor < head.seq, head=head)

        return read_tx(self.store, principal, tx)

    def apply(self, principal: Principal, batch: SyncBatch) -> ApplyResult:
        """Apply a peer's batch in one write transaction; idempotent by event uid.

        Records the peer's cursor and chain head in the same transaction, so a cut sync never
        applies anything twice. A read-only principal may pull (``feed``) but never apply; a
        scope-limited one has each event outside its scopes refused (``refused``), not applied.
        """
        from cairn.core import sync as m

        principal.require(WRITE)
        batch = _model(m.SyncBatch, batch)
        me = self.store_id(principal)
        if batch.store_id == me:
            raise CairnError("INVALID_INPUT", "this batch came from this store: a store does not sync with itself")

        def tx(conn: Connection, acting: Principal) -> tuple[ApplyResult, int]:
            now = utcnow()
            applier = Applier(conn, acting, me, batch.store_id, now)
            applier.run(batch.events)
            before = _peer_row(conn, acting, batch.store_id)
            cursor = max(batch.cursor, before["pulled_cursor"] if before else 0)
            _save_peer(
                conn,
                acting,
                batch.store_id,
                pulled_cursor=cursor,
                peer_head_seq=batch.head.seq,
                peer_head_hash=batch.head.hash,
                last_pulled_at=now,
            )
            if applier.applied or applier.refused:
                # The peer's chain head at this exchange, in this store's own chain.
                audit.record(
                    conn,
                    acting,
                    "sync-exchange",
                    detail={
                        "peer": batch.store_id,
                        "cursor": batch.cursor,
                        "peer_head": {"seq": batch.head.seq, "hash": batch.head.hash},
                        "applied": applier.applied,
                        "skipped": applier.skipped,
                        "conflicts": applier.conflicts,
                        "refused": len(applier.refused),
                    },
                    at=now,
                )
            result = m.ApplyResult(
                applied=applier.applied,
                skipped=applier.skipped,
                conflicts=applier.conflicts,
                refused=applier.refused,
                head=chain_head(conn, acting.tenant_id),
            )
            return result, applier.purged

        result, purged = write_tx(self.store, principal, tx)
        if purged:
            rank_cache.discard(self.store.url)
        return result

    def peer_state(self, principal: Principal, peer_store_id: str) -> PeerState:
        """What this store knows of a peer: both cursors, its last chain head, when we last exchanged."""
        from cairn.core import sync as m

        principal.require(READ)
        peer = _check_store_id(peer_store_id, "peer_store_id")
        row = read_tx(self.store, principal, lambda conn: _peer_row(conn, principal, peer))
        if row is None:
            return m.PeerState(
                peer_store_id=peer,
                pulled_cursor=0,
                pushed_cursor=0,
                peer_head=None,
                last_pulled_at=None,
                last_pushed_at=None,
                last_exchange_at=None,
            )
        times = [t for t in (row["last_pulled_at"], row["last_pushed_at"]) if t is not None]
        return m.PeerState(
            peer_store_id=peer,
            pulled_cursor=row["pulled_cursor"],
            pushed_cursor=row["pushed_cursor"],
            peer_head=m.ChainHead(seq=row["peer_head_seq"], hash=row["peer_head_hash"])
            if row["peer_head_hash"]
            else None,
            last_pulled_at=format_time(row["last_pulled_at"]) if row["last_pulled_at"] else None,
            last_pushed_at=format_time(row["last_pushed_at"]) if row["last_pushed_at"] else None,
            last_exchange_at=format_time(max(times)) if times else None,
        )

    def record_pushed(self, principal: Principal, peer_store_id: str, cursor: int, peer_head: ChainHead) -> None:
        """After a peer accepted our feed up to ``cursor``: remember it, with the head it answered."""
        from cairn.core import sync as m

        principal.require(WRITE)
        peer = _check_store_id(peer_store_id, "peer_store_id")
        if not isinstance(cursor, int) or cursor < 0:
            raise CairnError("INVALID_INPUT", f"cursor is a feed cursor (an integer from 0), got {cursor!r}")
        peer_head = _model(m.ChainHead, peer_head)

        def tx(conn: Connection, acting: Principal) -> None:
            before = _peer_row(conn, acting, peer)
            _save_peer(
                conn,
                acting,
                peer,
                pushed_cursor=max(cursor, before["pushed_cursor"] if before else 0),
                peer_head_seq=peer_head.seq,
                peer_head_hash=peer_head.hash,
                last_pushed_at=utcnow(),
            )

        write_tx(self.store, principal, tx)
