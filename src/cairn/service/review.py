"""Review: the candidates awaiting a person's judgement, and the two verdicts (verify, reject).

A candidate is an agent's lesson that has not earned trust yet; a person's verify makes it verified
(after the same tombstone check a write makes), and a reject is a forget: a tombstone, not a flag.
A *held* lesson (its text restates forgotten content, ``service/paraphrase.py``) waits here too,
marked with the tombstone it resembles; it leaves the queue the same two ways.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.engine import Connection

from cairn.core.keys import normalize_key
from cairn.core.lesson import HELD
from cairn.core.principal import READ, WRITE, Principal
from cairn.core.scope import validate_scope
from cairn.core.timeparse import utcnow
from cairn.service import paraphrase
from cairn.service.consolidation_effects import CONTRADICTS
from cairn.service.mutate import apply
from cairn.service.records import active_clause, fetch_known, paged, public
from cairn.service.tombstones import Tombstones, check_limit, check_tombstones
from cairn.service.tx import read_tx, write_tx
from cairn.store import predicates
from cairn.store.engine import Store
from cairn.store.schema import lessons, links


def _contradicting(
    conn: Connection, principal: Principal, ids: list[int], now: datetime
) -> dict[int, list[dict[str, str]]]:
    """For lessons of a review page, the active lessons they are linked ``contradicts`` with (either
    direction), by address: a reviewer decides such a pair together (verify one, reject the other),
    so the queue names the other side. Lessons in scopes the caller cannot see are left out."""
    if not ids:
        return {}
    other = lessons.alias("other")
    out: dict[int, list[dict[str, str]]] = {}
    for side, far in ((links.c.src_id, links.c.dst_id), (links.c.dst_id, links.c.src_id)):
        q = (
            select(side.label("lesson_id"), other.c.scope, other.c.key)
            .join(other, other.c.id == far)
            .where(
                links.c.tenant_id == principal.tenant_id,
                links.c.rel == CONTRADICTS,
                side.in_(ids),
                other.c.tenant_id == principal.tenant_id,
                predicates.active(now, other),
            )
        )
        for lesson_id, scope, key in conn.execute(q):
            if principal.can_see(scope):
                found = out.setdefault(int(lesson_id), [])
                if {"scope": scope, "key": key} not in found:
                    found.append({"scope": scope, "key": key})
    return out


@dataclass(eq=False, repr=False)
class Review:
    """The review queue and its verdicts; rejecting goes through the tombstones."""

    store: Store
    tombstones: Tombstones

    def review_queue(
        self, principal: Principal, *, scope: str | None = None, limit: int = 100, cursor: str | None = None
    ) -> dict[str, Any]:
        """Candidates and held lessons awaiting review, oldest first, a page at a time (``next_cursor``
        continues). A held one carries ``held``: the tombstone it resembles and how close it is."""
        principal.require(READ)
        if scope:
            scope = validate_scope(scope)
        check_limit(limit)

        def tx(conn: Connection) -> dict[str, Any]:
            now = utcnow()
            # A lesson whose histories diverged on two synced stores waits here too, whatever its
            # trust, marked ``conflict`` (docs/sync.md).
            reviewable = or_(lessons.c.trust == "candidate", lessons.c.conflicted_at.is_not(None))
            waiting = or_(and_(active_clause(now), reviewable), predicates.held(now))
            q = select(lessons).where(lessons.c.tenant_id == principal.tenant_id, waiting)
            if scope:
                q = q.where(lessons.c.scope == scope)
            order = ((lessons.c.created_at, False), (lessons.c.id, False))
            rows, after = paged(conn, principal, q, order, limit, kind="review", cursor=cursor)
            held = paraphrase.marks(conn, principal, [r["id"] for r in rows if r["trust"] == HELD])
            against = _contradicting(conn, principal, [r["id"] for r in rows], now)
            out = []
            for r in rows:
                entry = public(r, now)
                if r["trust"] == HELD:
                    entry["held"] = held.get(r["id"], {"code": paraphrase.HELD_CODE})
                if r["conflicted_at"] is not None:
                    entry["conflict"] = True
                if r["id"] in against:
                    entry["contradicts"] = against[r["id"]]
                out.append(entry)
            return {"candidates": out, "next_cursor": after}

        return read_tx(self.store, principal, tx)

    def verify(self, principal: Principal, scope: str, key: str) -> dict[str, Any]:
        """A person vouches for a candidate, or releases a held lesson (it becomes verified)."""
        scope, key = validate_scope(scope), normalize_key(key)
        principal.require(WRITE, scope)

        def tx(conn: Connection, principal: Principal) -> dict[str, Any]:
            now = utcnow()
            before = fetch_known(conn, principal, scope, key, f"no reviewable lesson at {scope} {key}")
            # A verified lesson whose synced histories diverged is still the person's to settle: the
            # verify writes a version that joins them (mutate.apply) and takes it out of the queue.
            if before["trust"] == "verified" and before["conflicted_at"] is None:
                return {"changed": False, "lesson": public(before, now)}
            # Vouching for content that was forgotten elsewhere would give it back its authority. A
            # held lesson passed this check when written (it resembles, it does not repeat): this
            # person's verify is the decision it was waiting for.
            check_tombstones(conn, principal, before["value"], scope, key, chash=before["content_hash"])
            detail = {"released": True} if before["trust"] == HELD else None
            row = apply(conn, principal, before, dict(before, trust="verified"), "verify", now, detail=detail)
            return {"changed": True, "lesson": public(row, now)}

        return write_tx(self.store, principal, tx)

    def reject(self, principal: Principal, scope: str, key: str, reason: str) -> dict[str, Any]:
        """Reject is forget: the review decision is a tombstone, not a flag."""
        return self.tombstones.forget(principal, scope, key, reason)
