"""Archive, restore, outcome feedback and supersession: state changes that keep every version."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from cairn.core.keys import normalize_key
from cairn.core.lesson import HELD, OUTCOME_COUNTERS
from cairn.core.principal import WRITE, Principal
from cairn.core.scope import validate_scope
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.service import paraphrase
from cairn.service.lessons import Lessons
from cairn.service.mutate import apply
from cairn.service.records import active_clause, fetch, fetch_id, fetch_known, public, status
from cairn.service.tombstones import check_tombstones
from cairn.service.tx import write_tx
from cairn.service.write_input import make_write
from cairn.store.engine import Store
from cairn.store.schema import lessons, links

OUTCOMES = OUTCOME_COUNTERS


Change = Callable[[Connection, Principal, dict[str, Any], datetime], dict[str, Any]]


@dataclass(eq=False, repr=False)
class Lifecycle:
    """State changes of one lesson; supersede writes through the lessons' own write path."""

    store: Store
    lessons: Lessons

    def _change(self, principal: Principal, scope: str, key: str, fn: Change) -> dict[str, Any]:
        scope, key = validate_scope(scope), normalize_key(key)
        principal.require(WRITE, scope)

        def tx(conn: Connection, principal: Principal) -> dict[str, Any]:
            now = utcnow()
            before = fetch_known(conn, principal, scope, key, with_address=True)
            return fn(conn, principal, before, now)

        return write_tx(self.store, principal, tx)

    def archive(self, principal: Principal, scope: str, key: str) -> dict[str, Any]:
        """Soft removal: hidden from reads, address kept, reversible with restore."""

        def fn(conn: Connection, principal: Principal, before: dict[str, Any], now: datetime) -> dict[str, Any]:
            if before["archived_at"] is not None:
                return {"changed": False, "lesson": public(before, now)}
            row = apply(conn, principal, before, dict(before, archived_at=now), "archive", now)
            return {"changed": True, "lesson": public(row, now)}

        return self._change(principal, scope, key, fn)

    def restore(self, principal: Principal, scope: str, key: str) -> dict[str, Any]:
        """Unarchive: refused (TOMBSTONED) when the content or address was forgotten meanwhile, held when
        it restates content forgotten meanwhile. A superseded lesson comes back too once its successor
        no longer stands (rejected, archived, held, erased): otherwise forgetting a replacement would
        leave the lesson it replaced out of every read with no way back. While the successor is active
        it is refused (CONFLICT) naming the successor."""

        def fn(conn: Connection, principal: Principal, before: dict[str, Any], now: datetime) -> dict[str, Any]:
            if before["superseded_by"] is not None:
                successor = fetch_id(conn, principal, before["superseded_by"])
                if successor is not None and status(successor, now) == "active":
                    by = {"scope": successor["scope"], "key": successor["key"]}
                    raise CairnError(
                        "CONFLICT",
                        f"{before['scope']} {before['key']} is superseded by {by['scope']} {by['key']}, which is "
                        "active: archive or forget that one first (a consolidation merge: cairn consolidate undo RUN)",
                        {"superseded_by": by},
                    )
            elif before["archived_at"] is None:
                return {"changed": False, "lesson": public(before, now)}
            # An archived twin of content forgotten since must stay out, exactly as a write would.
            check_tombstones(
                conn, principal, before["value"], before["scope"], before["key"], chash=before["content_hash"]
            )
            # And one that restates content forgotten since comes back held, as a write of it would.
            hold = paraphrase.hold_for(conn, principal, before["value"]) if before["trust"] != HELD else None
            state = dict(before, archived_at=None, superseded_by=None, **({"trust": HELD} if hold else {}))
            row = apply(conn, principal, before, state, "restore", now, detail=hold.detail() if hold else None)
            out: dict[str, Any] = {"changed": True, "lesson": public(row, now)}
            if hold:
                out["held"] = hold.public(principal)
            return out

        return self._change(principal, scope, key, fn)

    def feedback(self, principal: Principal, scope: str, key: str, outcome: str) -> dict[str, Any]:
        """Outcome counts feed the context ranking (helped ratio with a 0.5 prior)."""
        if outcome not in OUTCOMES:
            raise CairnError("INVALID_INPUT", f"outcome must be helped or not-helped; got {outcome!r}")
        column = OUTCOMES[outcome]

        def fn(conn: Connection, principal: Principal, before: dict[str, Any], now: datetime) -> dict[str, Any]:
            state = dict(before, **{column: before[column] + 1})
            row = apply(conn, principal, before, state, "feedback", now, detail={"outcome": outcome})
            return {"outcome": outcome, "lesson": public(row, now)}

        return self._change(principal, scope, key, fn)

    def supersede(
        self,
        principal: Principal,
        scope: str,
        key: str,
        value: str,
        *,
        supersedes: tuple[str, str] | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Write the new lesson and retire the one it replaces, linked, in one transaction.

        Without an explicit target the old lesson is found by identity (the normalized key) among
        the active lessons the caller can see: none is a plain create, one is replaced, several
        are refused with the candidates named. It never guesses.
        """
        principal.require(WRITE)
        inp = make_write(principal, scope, key, value, **options)
        principal.require(WRITE, inp.scope)
        caller = principal
        target_addr = None
        if supersedes is not None:
            target_addr = (validate_scope(supersedes[0]), normalize_key(supersedes[1]))
            principal.require(WRITE, target_addr[0])

        def tx(conn: Connection, principal: Principal) -> dict[str, Any]:  # in the org, if the scope is bound
            now = utcnow()
            if target_addr is not None:
                refusal = f"no lesson at {target_addr[0]} {target_addr[1]} to supersede"
                target = fetch_known(conn, principal, *target_addr, refusal)
                if target["superseded_by"] is not None:
                    raise CairnError("CONFLICT", f"{target_addr[0]} {target_addr[1]} was already superseded")
            else:
                rows = (
                    conn.execute(
                        select(lessons).where(
                            lessons.c.tenant_id == principal.tenant_id,
                            lessons.c.key == inp.key,
                            active_clause(now),
                        )
                    )
                    .mappings()
                    .all()
                )
                found = [dict(r) for r in rows if principal.can_see(r["scope"])]
                exact = [r for r in found if r["scope"] == inp.scope]
                if exact:
                    found = exact
                if not found:
                    result = self.lessons.write_in(conn, principal, inp)
                    result["superseded"] = None
                    return result
                if len(found) > 1:
                    names = [{"scope": r["scope"], "key": r["key"]} for r in found]
                    listing = ", ".join(f"{n['scope']} {n['key']}" for n in names)
                    raise CairnError(
                        "SUPERSEDE_AMBIGUOUS",
                        f"{len(found)} lessons match key {inp.key!r}: {listing}. "
                        "Name the one to replace with --supersedes SCOPE KEY",
                        {"candidates": names},
                    )
                target = found[0]
            old = {"scope": target["scope"], "key": target["key"], "version": target["version"]}
            result = self.lessons.write_in(conn, principal, inp)
            if (target["scope"], target["key"]) == (inp.scope, inp.key):
                # Same address: the new version *is* the replacement; history keeps the old one.
                result["superseded"] = old
                return result
            new_row = fetch(conn, principal, inp.scope, inp.key)
            if new_row is None:
                # The write counted a recurrence of a lesson already holding this content, so there
                # is no new lesson to link; raising rolls the recurrence back with everything else.
                held = result["lesson"]
                raise CairnError(
                    "CONFLICT",
                    f"this content is already stored at {held['scope']} {held['key']}; "
                    "supersede with different content, or name that lesson",
                    {"existing": {"scope": held["scope"], "key": held["key"]}},
                )
            target = fetch(conn, principal, target["scope"], target["key"])
            assert target is not None
            apply(
                conn,
                principal,
                target,
                dict(target, superseded_by=new_row["id"]),
                "superseded",
                now,
                detail={"by": {"scope": inp.scope, "key": inp.key}},
            )
            exists = conn.execute(
                select(links.c.id).where(
                    links.c.src_id == new_row["id"], links.c.dst_id == target["id"], links.c.rel == "supersedes"
                )
            ).first()
            if not exists:
                conn.execute(
                    insert(links).values(
                        tenant_id=principal.tenant_id,
                        src_id=new_row["id"],
                        dst_id=target["id"],
                        rel="supersedes",
                        created_at=now,
                        created_by=principal.actor,
                    )
                )
            result["superseded"] = old
            result["superseded_status"] = status(dict(target, superseded_by=new_row["id"]), now)
            return result

        return write_tx(self.store, caller, tx, route=inp.scope)
