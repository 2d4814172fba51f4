"""Reads a person reviewing the store needs that agents do not: expired lessons and one lesson's page.

Agents read *active* lessons only (``read``, ``list``, ``search`` compile ``active_clause``), which is
right for them. A person repairing the memory also has to see what fell out of the active set: a
lesson that expired (to judge whether its TTL was wrong), and an archived, expired or superseded
lesson's page with its links (to decide whether to restore it). Nothing here exposes more than
``history`` already does: a rejected lesson is NOT_FOUND on every path, scope-limited principals see
only their scopes, and every query is the principal's tenant's (row security on Postgres as well).

Each method is one read transaction, like every other service operation: a page never mixes two states of the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.engine import Connection

from cairn.core.keys import normalize_key
from cairn.core.lesson import MAX_PAGE
from cairn.core.principal import READ, Principal
from cairn.core.scope import validate_scope
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.service.records import fetch_id, fetch_known, lesson_page, public, status
from cairn.service.tx import read_tx
from cairn.store import predicates
from cairn.store.engine import Store
from cairn.store.schema import lessons, links

MAX_LINKS = 200  # a lesson page lists at most this many links; the count says when there are more


@dataclass(eq=False, repr=False)
class Browse:
    """The reviewer's reads: expired lessons and one lesson's page."""

    store: Store

    def expired(
        self, principal: Principal, scope: str | None = None, *, limit: int = 100, cursor: str | None = None
    ) -> dict[str, Any]:
        """Lessons whose TTL ran out (and nothing else retired them), most recently expired first.

        Archived, superseded and rejected lessons are not "expired": they have their own views
        (archive, history, tombstones), and a rejected lesson's content is never shown again.
        ``next_cursor`` continues the list (None on the last page).
        """
        principal.require(READ)
        if scope is not None:
            scope = validate_scope(scope)
            principal.require(READ, scope)
        if not 1 <= limit <= MAX_PAGE:
            raise CairnError("INVALID_INPUT", f"limit must be between 1 and {MAX_PAGE}, got {limit}")

        def tx(conn: Connection) -> dict[str, Any]:
            now = utcnow()
            order = ((lessons.c.expires_at, True), (lessons.c.id, True))
            return lesson_page(
                conn, principal, now, predicates.expired(now), scope, order, limit, kind="expired", cursor=cursor
            )

        return read_tx(self.store, principal, tx)

    def lesson_detail(self, principal: Principal, scope: str, key: str) -> dict[str, Any]:
        """One lesson in any state but rejected, with its links in both directions.

        ``read`` refuses a lesson that is not active (an agent must not act on it); a reviewer needs
        to see it to restore or judge it. Links name the other lesson's address, relation, direction
        and status; a linked lesson that was rejected or lies outside the caller's scopes is left
        out (counted in ``hidden_links``), so a link never leaks what its target was.
        """
        scope, key = validate_scope(scope), normalize_key(key)
        principal.require(READ, scope)

        def tx(conn: Connection) -> dict[str, Any]:
            now = utcnow()
            row = fetch_known(conn, principal, scope, key, with_address=True)
            edges = (
                conn.execute(
                    select(links)
                    .where(
                        links.c.tenant_id == principal.tenant_id,
                        or_(links.c.src_id == row["id"], links.c.dst_id == row["id"]),
                    )
                    .order_by(links.c.id)
                    .limit(MAX_LINKS + 1)
                )
                .mappings()
                .all()
            )
            out: list[dict[str, Any]] = []
            hidden = 0
            for e in edges[:MAX_LINKS]:
                outgoing = e["src_id"] == row["id"]
                other = fetch_id(conn, principal, e["dst_id"] if outgoing else e["src_id"])
                if other is None or other["trust"] == "rejected" or not principal.can_see(other["scope"]):
                    hidden += 1
                    continue
                out.append(
                    {
                        "rel": e["rel"],
                        "direction": "out" if outgoing else "in",
                        "scope": other["scope"],
                        "key": other["key"],
                        "trust": other["trust"],
                        "status": status(other, now),
                    }
                )
            successor = None
            if row["superseded_by"] is not None:
                nxt = fetch_id(conn, principal, row["superseded_by"])
                if nxt is not None and nxt["trust"] != "rejected" and principal.can_see(nxt["scope"]):
                    successor = {"scope": nxt["scope"], "key": nxt["key"]}
            return {
                "lesson": public(row, now),
                "superseded_by": successor,
                "links": out,
                "hidden_links": hidden,
                "more_links": len(edges) > MAX_LINKS,
            }

        return read_tx(self.store, principal, tx)
