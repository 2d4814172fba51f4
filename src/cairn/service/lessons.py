"""Writing and reading lessons: create, edit, recurrence, promotion, bi-temporal reads, history.

Rules that live here (and nowhere in a surface):
* a write is refused when its normalized content or its address matches a live tombstone,
  checked inside the write transaction; new content that restates a tombstone's forgotten text
  (``service/paraphrase.py``) is written *held*: out of every read until a person decides;
* the same normalized content at the same address, or anywhere in the same scope, is a
  recurrence: ``seen_count`` goes up and no copy is made;
* a candidate seen from ``promotion_threshold`` distinct sessions is promoted to verified, unless
  someone outside the repository wrote it (a webhook's third-party comment: a person verifies it);
* an agent's edit to a lesson makes it a candidate again (new content has not earned trust),
  a person's write makes it verified.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, insert, literal_column, select, union_all
from sqlalchemy.engine import Connection

from cairn.core.diffing import unified_diff
from cairn.core.history import shape as history_shape
from cairn.core.keys import normalize_key
from cairn.core.lesson import (
    HELD,
    MAX_PAGE,
    TRUST_FILTERS,
)
from cairn.core.principal import READ, WRITE, Principal
from cairn.core.scope import validate_scope
from cairn.core.timeparse import format_time, utcnow
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.service import limits, paraphrase, records, write_reads
from cairn.service.mutate import apply
from cairn.service.records import active_clause, fetch, fetch_id, paged, public, status
from cairn.service.tombstones import check_tombstones
from cairn.service.tx import read_tx, write_tx
from cairn.service.write_input import WriteInput, claims_json, make_write, merged_claims, normalize_tags
from cairn.store import predicates
from cairn.store.dialect import ONE_ROW
from cairn.store.engine import Store
from cairn.store.schema import lesson_tags, lesson_versions, lessons, sightings

# Built once: every write runs it (see records.BY_ADDRESS).
_TWIN = (
    select(lessons)
    .where(
        lessons.c.tenant_id == bindparam("tenant"),
        lessons.c.scope == bindparam("scope"),
        lessons.c.content_hash == bindparam("hash"),
        *predicates.current(),
    )
    .order_by(lessons.c.id)
    .limit(ONE_ROW)
)
# A write's two look-ups as one statement: the lesson at its address (``records.fetch``'s query) and
# the first current lesson of its scope with the same content (``_TWIN``), each marked by ``_twin``.
# One statement instead of two is one round through the SQL layer less on every write; the twin is
# used only when the address is free, as before.
_ADDRESS_OR_TWIN = union_all(
    select(literal_column("0").label("_twin"), records.BY_ADDRESS.subquery()),
    select(literal_column("1").label("_twin"), _TWIN.subquery()),
)


@dataclass(eq=False, repr=False)
class Lessons:
    """Writing and reading lessons; the write path (``write_in``) is shared with supersede and import."""

    store: Store
    settings: Settings

    # -- writing ----------------------------------------------------------------------------
    def write(
        self,
        principal: Principal,
        scope: str,
        key: str,
        value: str,
        *,
        claims: dict[str, Any] | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Create, edit or count a recurrence of a lesson, in one transaction.

        ``claims``: what the writer says about the lesson that Cairn does not check or use (another
        tool's provenance fields, e.g. LoreKit's host and origin_*), kept in ``claimed`` and shown as
        claims; an edit merges them into the ones the lesson holds.
        """
        principal.require(WRITE)
        inp = make_write(principal, scope, key, value, **options)
        if claims:
            inp = replace(inp, claimed=claims_json(claims), merge_claims=True)
        principal.require(WRITE, inp.scope)
        paraphrase.prepare(self.store, principal, inp.value)  # the model runs before the lock
        # A scope bound to an org is written there (write_tx adds "routed_to").
        return write_tx(self.store, principal, lambda conn, acting: self.write_in(conn, acting, inp), route=inp.scope)

    def write_many(self, principal: Principal, items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        """Many writes, each by ``write``'s rules with its own version and audit row, in one
        transaction per batch (``service/write_batch.py``): ``{"results": [...], "counts": {...}}``.

        Each item is a mapping with ``scope``, ``key``, ``value`` and any of ``write``'s options;
        a lesson refused by a tombstone or a limit is reported in its place and the others are written.
        """
        from cairn.service import write_batch

        return write_batch.write_many(self, principal, items)

    def write_in(
        self, conn: Connection, principal: Principal, inp: WriteInput, *, import_mode: bool = False
    ) -> dict[str, Any]:
        """The write itself, inside the caller's transaction (supersede, import and webhooks share it).

        ``import_mode``: a record of a file, not anyone's word — a new lesson or an edit lands as a
        candidate whoever imports it, and same content is "unchanged"."""
        now = utcnow()
        chash = inp.content_hash
        asked = write_reads.read(conn, principal, inp.scope, inp.key, chash, inp.identity)
        check_tombstones(
            conn,
            principal,
            inp.value,
            inp.scope,
            inp.key,
            chash=chash,
            identity=inp.identity,
            matched=asked["tombstone"] is not None,
        )
        existing, twin = self.address_or_twin(conn, principal, inp.scope, inp.key, chash)
        if import_mode:
            limits.check_value(conn, self.settings, principal, inp.value, asked)
        else:  # a recurrence (same content, here or at a new key) adds no lesson
            limits.check_write(
                conn, self.settings, principal, inp.value, creating=existing is None and twin is None, overrides=asked
            )
        if existing is None:
            if twin is not None:
                if import_mode:
                    return self._result("unchanged", twin, now, note="same content already stored")
                return self._recur(conn, principal, twin, inp, now, note="same content already stored here")
            state = self.new_state(principal, inp, chash, now, candidate=import_mode)
            detail = None
            # With a threshold of 1 the first sighting already suffices; decided before the row is
            # written so one write stays one version and one audit row.
            promote_now = (
                principal.session and self.settings.promotion_threshold <= 1 and not import_mode and not inp.outside
            )
            hold = paraphrase.hold_for(conn, principal, inp.value, stamp=write_reads.stamp(asked))
            if hold is not None:  # whoever writes it: only a review releases it
                state["trust"] = HELD
                detail = hold.detail()
            elif state["trust"] == "candidate" and promote_now:
                state["trust"] = "verified"
                detail = {"promoted_by": "1 session"}
            row = apply(
                conn, principal, None, state, "create", now, detail=detail, audit_head=write_reads.audit_head(asked)
            )
            self._sight(conn, principal, row, now)
            return self._result("created", row, now, hold=hold, principal=principal)
        if existing["content_hash"] == chash and existing["trust"] != "rejected":
            if import_mode:
                return self._result("unchanged", existing, now)
            return self._recur(conn, principal, existing, inp, now)
        return self._edit(conn, principal, existing, inp, chash, now, candidate=import_mode, asked=asked)

    def new_state(
        self, principal: Principal, inp: WriteInput, chash: str, now: datetime, *, candidate: bool = False
    ) -> dict[str, Any]:
        return {
            "scope": inp.scope,
            "key": inp.key,
            "value": inp.value,
            "tags": json.dumps(inp.tags),
            "kind": inp.kind,
            "source_agent": inp.source_agent,
            "trigger": inp.trigger,
            "origin": inp.origin,
            "author": inp.author or principal.actor,
            "url": inp.url,
            "trust": "verified" if principal.human and not candidate else "candidate",
            "seen_count": 1,
            "helped_count": 0,
            "not_helped_count": 0,
            "valid_from": inp.valid_from,
            "valid_to": inp.valid_to,
            "expires_at": now + inp.ttl if inp.ttl else None,
            "archived_at": None,
            "superseded_by": None,
            "content_hash": chash,
            "claimed": inp.claimed,
        }

    def _edit(
        self,
        conn: Connection,
        principal: Principal,
        before: dict[str, Any],
        inp: WriteInput,
        chash: str,
        now: datetime,
        *,
        candidate: bool = False,
        asked: Any = None,
    ) -> dict[str, Any]:
        """``asked``: the ``write_reads`` row read at the start of this write, if any."""
        state = dict(before)
        # A bound the caller did not give is inherited, unless the given one makes the inherited one
        # meaningless: a new fact valid from after the old end is open-ended, not an empty interval.
        valid_from = inp.valid_from or before["valid_from"]
        valid_to = inp.valid_to or before["valid_to"]
        if valid_from is not None and valid_to is not None and valid_to <= valid_from:
            if inp.valid_from is not None:
                valid_to = inp.valid_to
            else:
                valid_from = inp.valid_from
        stamp = write_reads.stamp(asked) if asked is not None else None
        hold = paraphrase.hold_for(conn, principal, inp.value, stamp=stamp)
        state.update(
            value=inp.value,
            content_hash=chash,
            tags=json.dumps(inp.tags) if inp.tags else before["tags"],
            kind=inp.kind,
            source_agent=inp.source_agent or before["source_agent"],
            trigger=inp.trigger or before["trigger"],
            # New content has not earned the old content's trust; a person's word has; content that
            # restates forgotten content waits for a person whoever wrote it.
            trust=HELD if hold else "verified" if principal.human and not candidate else "candidate",
            valid_from=valid_from,
            valid_to=valid_to,
            # A value-only edit never clears an existing TTL (LoreKit got this right).
            expires_at=now + inp.ttl if inp.ttl else before["expires_at"],
            # A new assertion at a retired address brings the address back into use.
            superseded_by=None,
            claimed=merged_claims(before.get("claimed"), inp) if inp.claimed is not None else before.get("claimed"),
        )
        head = write_reads.audit_head(asked) if asked is not None else None
        row = apply(
            conn, principal, before, state, "update", now, detail=hold.detail() if hold else None, audit_head=head
        )
        self._sight(conn, principal, row, now)
        return self._result("updated", row, now, hold=hold, principal=principal)

    def _recur(
        self,
        conn: Connection,
        principal: Principal,
        before: dict[str, Any],
        inp: WriteInput,
        now: datetime,
        note: str | None = None,
    ) -> dict[str, Any]:
        state = dict(before)
        state["seen_count"] = before["seen_count"] + 1
        if inp.ttl:
            state["expires_at"] = now + inp.ttl
        promoted_by = None
        if principal.human and before["trust"] == "candidate":
            state["trust"] = "verified"
            promoted_by = "human"
        added = self._sight(conn, principal, before, now)
        # Text from outside the repository is promoted by a person only, never by being seen again.
        outside = inp.outside or (
            before["origin"] == "webhook" and _webhooks().outside(conn, principal.tenant_id, before["id"])
        )
        if promoted_by is None and before["trust"] == "candidate" and not outside:
            sessions = self._session_count(conn, principal, before["id"])
            if sessions >= self.settings.promotion_threshold:
                state["trust"] = "verified"
                promoted_by = f"{sessions} sessions"
        detail: dict[str, Any] = {"new_session": added}
        if promoted_by:
            detail["promoted_by"] = promoted_by
        row = apply(conn, principal, before, state, "promote" if promoted_by else "recur", now, detail=detail)
        return self._result("promoted" if promoted_by else "recurred", row, now, note=note)

    def address_or_twin(
        self, conn: Connection, principal: Principal, scope: str, key: str, chash: str
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The lesson at the address (``records.fetch``) and, only when there is none, the scope's
        current lesson with the same content (``same_content_in_scope``), read in one statement."""
        params = {"tenant": principal.tenant_id, "scope": scope, "key": key, "hash": chash}
        found: dict[int, dict[str, Any]] = {}
        for row in conn.execute(_ADDRESS_OR_TWIN, params).mappings():
            out = dict(row)
            found[out.pop("_twin")] = out
        existing = found.get(0)
        return existing, (found.get(1) if existing is None else None)

    def same_content_in_scope(
        self, conn: Connection, principal: Principal, scope: str, chash: str
    ) -> dict[str, Any] | None:
        params = {"tenant": principal.tenant_id, "scope": scope, "hash": chash}
        row = conn.execute(_TWIN, params).mappings().first()
        return dict(row) if row else None

    def _sight(self, conn: Connection, principal: Principal, row: dict[str, Any], now: datetime) -> bool:
        """Record that this session saw the lesson; True when the session is new for it."""
        if not principal.session:
            return False
        exists = conn.execute(
            select(sightings.c.session).where(
                sightings.c.lesson_id == row["id"], sightings.c.session == principal.session
            )
        ).first()
        if exists:
            return False
        conn.execute(
            insert(sightings).values(
                tenant_id=principal.tenant_id, lesson_id=row["id"], session=principal.session, seen_at=now
            )
        )
        return True

    def _session_count(self, conn: Connection, principal: Principal, lesson_id: int) -> int:
        return conn.execute(
            select(func.count()).where(sightings.c.tenant_id == principal.tenant_id, sightings.c.lesson_id == lesson_id)
        ).scalar_one()

    def created(self, row: dict[str, Any], now: datetime) -> dict[str, Any]:
        """What ``write`` answers for a lesson it created (the bulk lane's lessons answer the same)."""
        return self._result("created", row, now)

    @staticmethod
    def _result(
        action: str,
        row: dict[str, Any],
        now: datetime,
        note: str | None = None,
        *,
        hold: paraphrase.Hold | None = None,
        principal: Principal | None = None,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"action": action, "lesson": public(row, now)}
        if note:
            out["note"] = note
        if hold is not None and principal is not None:
            out["held"] = hold.public(principal)
            out["note"] = (
                "held for review: this restates forgotten content; no read returns it until a person "
                "verifies it (cairn review verify) or rejects it (cairn review reject)"
            )
        return out

    # -- reading ----------------------------------------------------------------------------
    def _visible(self, conn: Connection, principal: Principal, scope: str, key: str) -> dict[str, Any]:
        principal.require(READ, scope)
        row = fetch(conn, principal, scope, key)
        if row is None:
            raise CairnError("NOT_FOUND", f"no lesson at {scope} {key}", {"scope": scope, "key": key})
        return row

    def _readable(self, conn: Connection, principal: Principal, scope: str, key: str) -> dict[str, Any]:
        """A lesson whose content a reader may see: a rejection is permanent for every read,
        including the historical ones (history, diff, as-of)."""
        row = self._visible(conn, principal, scope, key)
        if row["trust"] == "rejected":
            raise CairnError("NOT_FOUND", f"no lesson at {scope} {key} (it was rejected)")
        return row

    def read(
        self,
        principal: Principal,
        scope: str,
        key: str,
        *,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> dict[str, Any]:
        """The active lesson; or what Cairn held at record time ``as_of``; or what was valid then."""
        scope, key = validate_scope(scope), normalize_key(key)

        def tx(conn: Connection) -> dict[str, Any]:
            now = utcnow()
            row = self._visible(conn, principal, scope, key)
            state = status(row, now)
            # A rejection is permanent for readers: not even a historical read returns it.
            if state == "rejected":
                raise CairnError("NOT_FOUND", f"no lesson at {scope} {key} (it was rejected)")
            if as_of is None and valid_at is None:
                if state != "active":
                    data: dict[str, Any] = {"scope": scope, "key": key, "status": state}
                    message = f"the lesson at {scope} {key} is {state}"
                    successor = fetch_id(conn, principal, row["superseded_by"]) if row["superseded_by"] else None
                    if successor is not None:
                        data["superseded_by"] = {"scope": successor["scope"], "key": successor["key"]}
                        message += f" by {successor['scope']} {successor['key']}"
                    raise CairnError("NOT_FOUND", message, data)
                lesson = public(row, now)
                if row["origin"] == "webhook":  # who wrote the comment, on which PR, file and line
                    lesson["provenance"] = _webhooks().provenance(conn, principal.tenant_id, row["id"])
                return {"lesson": lesson}
            versions = self._versions(conn, principal, row["id"])
            chosen = None
            if as_of is not None:
                held = [v for v in versions if v["recorded_at"] <= as_of]
                if not held:
                    raise CairnError("NOT_FOUND", f"Cairn held no lesson at {scope} {key} at {format_time(as_of)}")
                chosen = held[-1]
                if chosen["trust"] == "rejected" or chosen["archived"]:
                    raise CairnError("NOT_FOUND", f"at {format_time(as_of)} the lesson at {scope} {key} was not active")
            if valid_at is not None:
                pool = [v for v in versions if as_of is None or v["recorded_at"] <= as_of]
                matching = [
                    v
                    for v in pool
                    if (v["valid_from"] is None or v["valid_from"] <= valid_at)
                    and (v["valid_to"] is None or valid_at < v["valid_to"])
                ]
                if not matching:
                    raise CairnError("NOT_FOUND", f"no version of {scope} {key} was valid at {format_time(valid_at)}")
                chosen = matching[-1]
            assert chosen is not None
            return {"lesson": _version_public(chosen, row, now), "version": chosen["version"]}

        return read_tx(self.store, principal, tx)

    def list(
        self,
        principal: Principal,
        scope: str | None = None,
        *,
        tag: str | None = None,
        trust: str | None = None,
        archived: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """Active lessons of one scope (or all visible scopes), newest first; archived ones on request.

        ``next_cursor`` continues the list (None on the last page); ``truncated`` says the same.
        """
        principal.require(READ)
        if scope is not None:
            scope = validate_scope(scope)
            principal.require(READ, scope)
        if trust is not None and trust not in TRUST_FILTERS:
            raise CairnError("INVALID_INPUT", "trust filter must be candidate or verified (rejected is never listed)")
        if not 1 <= limit <= MAX_PAGE:
            raise CairnError("INVALID_INPUT", f"limit must be between 1 and {MAX_PAGE}")
        tag_norm = normalize_tags([tag])[0] if tag else None

        def tx(conn: Connection) -> dict[str, Any]:
            now = utcnow()
            q = select(lessons).where(lessons.c.tenant_id == principal.tenant_id)
            q = q.where(predicates.archived() if archived else active_clause(now))
            if scope is not None:
                q = q.where(lessons.c.scope == scope)
            if trust:
                q = q.where(lessons.c.trust == trust)
            if tag_norm:
                q = q.where(
                    lessons.c.id.in_(
                        select(lesson_tags.c.lesson_id).where(
                            lesson_tags.c.tenant_id == principal.tenant_id, lesson_tags.c.tag == tag_norm
                        )
                    )
                )
            kind = "archived" if archived else "lessons"
            order = ((lessons.c.updated_at, True), (lessons.c.id, True))
            rows, after = paged(conn, principal, q, order, limit, kind=kind, cursor=cursor)
            return {"lessons": [public(r, now) for r in rows], "truncated": after is not None, "next_cursor": after}

        return read_tx(self.store, principal, tx)

    def history(self, principal: Principal, scope: str, key: str) -> dict[str, Any]:
        scope, key = validate_scope(scope), normalize_key(key)

        def tx(conn: Connection) -> dict[str, Any]:
            now = utcnow()
            row = self._readable(conn, principal, scope, key)
            versions = self._versions(conn, principal, row["id"])
            graph = history_shape([dict(v, parents=json.loads(v["parents"] or "[]")) for v in versions])
            number = {v["uid"]: v["version"] for v in versions}
            out = []
            for i, v in enumerate(versions):
                until = versions[i + 1]["recorded_at"] if i + 1 < len(versions) else None
                node = graph[v["uid"]] if graph is not None else None
                if node is not None:  # versions written beside each other (sync) are siblings
                    until = node["superseded_at"]
                out.append(
                    {
                        "version": v["version"],
                        "action": v["action"],
                        "actor": v["actor"],
                        "session": v["session"],
                        "recorded_at": format_time(v["recorded_at"]),
                        "recorded_until": format_time(until) if until else None,
                        "valid_from": format_time(v["valid_from"]) if v["valid_from"] else None,
                        "valid_to": format_time(v["valid_to"]) if v["valid_to"] else None,
                        "trust": v["trust"],
                        "archived": bool(v["archived"]),
                        "seen_count": v["seen_count"],
                        "content_hash": v["content_hash"],
                        "value": v["value"],
                        **(
                            {
                                "parents": sorted(number[p] for p in node["parents"]),
                                "tip": node["tip"],
                                "current": node["current"],
                            }
                            if node is not None
                            else {}
                        ),
                    }
                )
            return {"scope": scope, "key": key, "status": status(row, now), "versions": out}

        return read_tx(self.store, principal, tx)

    def diff(self, principal: Principal, scope: str, key: str, v1: int, v2: int) -> dict[str, Any]:
        scope, key = validate_scope(scope), normalize_key(key)

        def tx(conn: Connection) -> dict[str, Any]:
            row = self._readable(conn, principal, scope, key)
            versions = {v["version"]: v for v in self._versions(conn, principal, row["id"])}
            for n in (v1, v2):
                if n not in versions:
                    raise CairnError(
                        "NOT_FOUND",
                        f"{scope} {key} has no version {n}; it has versions 1..{max(versions)}",
                    )
            a, b = versions[v1], versions[v2]
            fields = {}
            for name in ("trust", "archived", "kind", "tags", "seen_count", "valid_from", "valid_to", "expires_at"):
                if a[name] != b[name]:
                    fields[name] = {"from": _plain(a[name]), "to": _plain(b[name])}
            return {
                "scope": scope,
                "key": key,
                "from": v1,
                "to": v2,
                "value_diff": unified_diff(a["value"], b["value"], f"v{v1}", f"v{v2}"),
                "fields": fields,
            }

        return read_tx(self.store, principal, tx)

    def _versions(self, conn: Connection, principal: Principal, lesson_id: int) -> list[dict[str, Any]]:
        rows = (
            conn.execute(
                select(lesson_versions)
                .where(lesson_versions.c.tenant_id == principal.tenant_id, lesson_versions.c.lesson_id == lesson_id)
                .order_by(lesson_versions.c.version)
            )
            .mappings()
            .all()
        )
        return [dict(r) for r in rows]


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, str) and value.startswith("["):
        return json.loads(value)
    return value


def _version_public(v: dict[str, Any], row: dict[str, Any], now: datetime) -> dict[str, Any]:
    out = public(row, now)
    out.update(
        value=v["value"],
        tags=json.loads(v["tags"]),
        kind=v["kind"],
        trust=v["trust"],
        version=v["version"],
        seen_count=v["seen_count"],
        content_hash=v["content_hash"],
        valid_from=format_time(v["valid_from"]) if v["valid_from"] else None,
        valid_to=format_time(v["valid_to"]) if v["valid_to"] else None,
        recorded_at=format_time(v["recorded_at"]),
    )
    return out


def _webhooks() -> Any:
    """The webhook service's module, for a lesson a webhook wrote only: it parses GitHub's payloads
    (a dozen compiled patterns), which no other write or read needs."""
    from cairn.service import webhooks

    return webhooks
