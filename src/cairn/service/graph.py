"""Links between lessons and the neighborhood walk over them, inside a character budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, or_, select
from sqlalchemy.engine import Connection

from cairn.core.content import first_line
from cairn.core.keys import normalize_key
from cairn.core.lesson import USER_RELS
from cairn.core.principal import READ, WRITE, Principal
from cairn.core.scope import validate_scope
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.service import audit
from cairn.service.records import fetch, fetch_id, fetch_known, status
from cairn.service.tx import read_tx, write_tx
from cairn.store.engine import Store
from cairn.store.schema import links


@dataclass(eq=False, repr=False)
class Graph:
    """Links between lessons and the walk over them."""

    store: Store

    def link(self, principal: Principal, scope: str, key: str, scope2: str, key2: str, rel: str) -> dict[str, Any]:
        if rel not in USER_RELS:
            raise CairnError("INVALID_INPUT", f"rel must be one of {', '.join(USER_RELS)}; got {rel!r}")
        a = (validate_scope(scope), normalize_key(key))
        b = (validate_scope(scope2), normalize_key(key2))
        if a == b:
            raise CairnError("INVALID_INPUT", "a lesson cannot be linked to itself")
        principal.require(WRITE, a[0])
        principal.require(READ, b[0])

        def tx(conn: Connection, principal: Principal) -> dict[str, Any]:
            now = utcnow()
            src, dst = fetch_known(conn, principal, *a), fetch_known(conn, principal, *b)
            exists = conn.execute(
                select(links.c.id).where(links.c.src_id == src["id"], links.c.dst_id == dst["id"], links.c.rel == rel)
            ).first()
            if exists:
                return {"changed": False, "rel": rel}
            conn.execute(
                insert(links).values(
                    tenant_id=principal.tenant_id,
                    src_id=src["id"],
                    dst_id=dst["id"],
                    rel=rel,
                    created_at=now,
                    created_by=principal.actor,
                )
            )
            audit.record_lesson(
                conn, principal, "link", src, detail={"rel": rel, "to": {"scope": b[0], "key": b[1]}}, at=now
            )
            return {"changed": True, "rel": rel}

        return write_tx(self.store, principal, tx)

    def neighborhood(
        self, principal: Principal, scope: str, key: str, *, depth: int = 1, budget: int = 2000
    ) -> dict[str, Any]:
        """Breadth-first over links in both directions; nearest first until the budget is spent."""
        if not 1 <= depth <= 3:
            raise CairnError("INVALID_INPUT", f"depth must be 1, 2 or 3; got {depth}")
        if not 100 <= budget <= 20_000:
            raise CairnError("INVALID_INPUT", f"budget must be between 100 and 20000 characters; got {budget}")
        start = (validate_scope(scope), normalize_key(key))
        principal.require(READ, start[0])

        def tx(conn: Connection) -> dict[str, Any]:
            now = utcnow()
            seed = fetch(conn, principal, *start)
            if seed is None or status(seed, now) != "active":
                raise CairnError("NOT_FOUND", f"no active lesson at {start[0]} {start[1]}")
            seen = {seed["id"]}
            frontier = [seed["id"]]
            nodes: list[dict[str, Any]] = []
            spent = len(seed["value"])
            omitted = 0
            for level in range(1, depth + 1):
                if not frontier:
                    break
                edges = (
                    conn.execute(
                        select(links)
                        .where(
                            links.c.tenant_id == principal.tenant_id,
                            or_(links.c.src_id.in_(frontier), links.c.dst_id.in_(frontier)),
                        )
                        .order_by(links.c.id)
                    )
                    .mappings()
                    .all()
                )
                nxt: list[int] = []
                for e in edges:
                    here, other = (e["src_id"], e["dst_id"]) if e["src_id"] in frontier else (e["dst_id"], e["src_id"])
                    if other in seen:
                        continue
                    seen.add(other)
                    row = fetch_id(conn, principal, other)
                    if row is None or not principal.can_see(row["scope"]):
                        continue
                    state = status(row, now)
                    # Superseded lessons are shown (that is what the link explains); others only if active.
                    if state not in ("active", "superseded"):
                        continue
                    direction = "out" if e["src_id"] == here else "in"
                    cost = len(row["value"])
                    if spent + cost > budget:
                        omitted += 1
                        continue
                    spent += cost
                    nxt.append(other)
                    nodes.append(
                        {
                            "depth": level,
                            "rel": e["rel"],
                            "direction": direction,
                            "scope": row["scope"],
                            "key": row["key"],
                            "trust": row["trust"],
                            "status": state,
                            "value": row["value"],
                            "summary": first_line(row["value"]),
                        }
                    )
                frontier = nxt
            return {
                "seed": {"scope": seed["scope"], "key": seed["key"], "value": seed["value"], "trust": seed["trust"]},
                "nodes": nodes,
                "chars": spent,
                "budget": budget,
                "omitted": omitted,
            }

        return read_tx(self.store, principal, tx)
