"""Applying a peer's events to this store, inside the one write transaction of ``SyncService.apply``.

Each event is checked before anything is written for it (a refused event writes nothing but its
refusal), and each applied event writes through this store's own ledger: an audit row per change,
hash-chained here, naming the peer and the store the event came from. The rules (docs/sync.md):

* **Versions merge.** A remote version is appended to the lesson's history with its uid, actor and
  record and valid times (the remote's claims; the audit row says who applied it and when). The
  lesson's current state is the tip the conflict rule picks (``core/sync.py``); when histories
  diverged (two tips) the lesson is flagged for review.
* **Forgetting wins.** A version whose content or address a live tombstone holds is refused and
  never lands; a tombstone forgets every local lesson holding that content; a purge erases it;
  only an unforget by a principal who may unforget here lifts a tombstone.
* **Trust does not travel upward by itself.** "verified" lands as verified only when the applying
  principal may grant it here (``core/sync.may_grant_trust``), or the lesson already holds that
  content as verified; otherwise it lands as a candidate with the claim recorded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, or_, select, tuple_, update
from sqlalchemy.engine import Connection

from cairn.core import history as rules
from cairn.core.content import content_hash, content_identity, validate_value
from cairn.core.keys import normalize_key
from cairn.core.lesson import HELD, KINDS, ORIGINS, RELS, TRUSTS
from cairn.core.principal import ADMIN, READ, WRITE, Principal
from cairn.core.scope import validate_scope
from cairn.errors import CairnError
from cairn.service import audit, epoch, indexing, mutate, paraphrase, state_proof
from cairn.service.import_records import MAX_CLAIMED, _bool, _count, _is_hash, _pt, _str
from cairn.service.mutate import apply as mutate_apply
from cairn.service.mutate import tips_of
from cairn.service.purge import erase
from cairn.service.records import fetch, status
from cairn.service.tombstones import MAX_REASON, check_tombstones
from cairn.service.write_input import normalize_tags
from cairn.store.dialect import ONE_ROW
from cairn.store.schema import lesson_versions, lessons, links, sync_events, tombstones

if TYPE_CHECKING:
    from cairn.core.sync import Refusal, SyncEvent

_LESSON_COLUMNS = tuple(c.key for c in lessons.columns if c.key not in ("id", "tenant_id"))
_VERSION_COLUMNS = (
    "action", "scope", "key", "value", "content_hash", "tags", "kind", "source_agent", "trigger", "trust",
    "archived", "seen_count", "helped_count", "not_helped_count", "valid_from", "valid_to", "expires_at",
    "recorded_at", "actor", "session", "uid", "human",
)  # fmt: skip
# A refusal is per event: these are the codes an event's own content or permission can cause.
REFUSABLE = frozenset(
    {
        "TOMBSTONED", "FORBIDDEN", "INVALID_INPUT", "INVALID_SCOPE", "INVALID_KEY", "INVALID_VALUE",
        "VALUE_TOO_LARGE", "INVALID_TIME", "NOT_FOUND", "CONFLICT",
    }
)  # fmt: skip
_UID_CHARS = frozenset("0123456789abcdef")


def _uid(value: Any, what: str) -> str:
    if not isinstance(value, str) or len(value) != 32 or not set(value) <= _UID_CHARS:
        raise CairnError("INVALID_INPUT", f"{what} must be 32 lowercase hex characters")
    return value


def _hash(value: Any, what: str) -> str:
    if not _is_hash(value):
        raise CairnError("INVALID_INPUT", f"{what} must be 64 lowercase hex characters")
    return str(value)


def _address(body: dict[str, Any]) -> tuple[str, str]:
    scope, key = body.get("scope"), body.get("key")
    if not isinstance(scope, str) or not isinstance(key, str):
        raise CairnError("INVALID_INPUT", "an event names its lesson by scope and key (strings)")
    return validate_scope(scope), normalize_key(key)


@dataclass
class Applier:
    """One batch's application: the transaction, who applies, this store's and the peer's ids."""

    conn: Connection
    principal: Principal
    me: str
    peer: str
    now: datetime
    applied: int = 0
    skipped: int = 0
    conflicts: int = 0
    purged: int = 0
    refused: list[Refusal] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)
    _records: list[dict[str, Any]] = field(default_factory=list)
    _fresh: dict[int, dict[str, Any]] = field(default_factory=dict)
    # New lessons held back to be inserted together: address -> (lesson row, version row, ledger entry).
    _pending: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = field(default_factory=dict)
    _audit: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (event uid, entry), in order
    _seqs: dict[str, int] = field(default_factory=dict)  # event uid -> the audit row it wrote
    _lessons: dict[tuple[str, str], dict[str, Any] | None] = field(default_factory=dict)
    _live: tuple[set[str], set[str], set[tuple[str, str]]] = (set(), set(), set())
    _near: set[str] | None = None  # version uids whose text may restate a tombstone (None: ask each)

    # -- the batch --------------------------------------------------------------------------------
    def run(self, events: list[SyncEvent]) -> None:
        uids = [e.uid for e in events]
        self._seen = self._known(uids)
        self._load_tombstones()
        versions = [e for e in events if e.kind == "version" and e.uid not in self._seen]
        self._prefetch(versions)
        self._near = self._near_tombstones(versions)
        for ev in events:
            if ev.uid in self._seen or ev.origin_store == self.me:
                self.skipped += 1
                continue
            self._seen.add(ev.uid)
            try:
                outcome, seq = self._one(ev)
            except CairnError as exc:
                if exc.code not in REFUSABLE:
                    raise
                self._refuse(ev, exc)
                continue
            if outcome == "skipped":
                self.skipped += 1
            elif outcome == "conflict":
                self.conflicts += 1
                self.applied += 1
            else:
                self.applied += 1
            self._record(ev, outcome, seq)
        self._flush_all()
        for rec in self._records:
            rec["seq"] = self._seqs.get(rec["uid"], rec["seq"])
        if self._records:
            self.conn.execute(insert(sync_events), self._records)

    # -- what the batch reads once ------------------------------------------------------------------
    def _load_tombstones(self) -> None:
        """The tenant's live tombstones (hashes, identities, addresses): a version that matches none
        needs no query; one that matches any goes through the one check, which words the refusal."""
        live = self.conn.execute(
            select(tombstones.c.content_hash, tombstones.c.identity, tombstones.c.scope, tombstones.c.key).where(
                tombstones.c.tenant_id == self.principal.tenant_id, tombstones.c.lifted_at.is_(None)
            )
        ).all()
        self._live = ({t[0] for t in live}, {t[1] for t in live if t[1]}, {(t[2], t[3]) for t in live})

    def _prefetch(self, events: list[SyncEvent]) -> None:
        """The lessons at the batch's addresses, read in a few queries instead of one per event."""
        wanted: set[tuple[str, str]] = set()
        for ev in events:
            try:
                wanted.add(_address(ev.body))
            except CairnError:
                continue  # refused when its turn comes
        pairs = sorted(wanted)
        for start in range(0, len(pairs), 400):
            chunk = pairs[start : start + 400]
            q = select(lessons).where(
                lessons.c.tenant_id == self.principal.tenant_id, tuple_(lessons.c.scope, lessons.c.key).in_(chunk)
            )
            for r in self.conn.execute(q).mappings():
                self._lessons[(r["scope"], r["key"])] = dict(r)
            for pair in chunk:
                self._lessons.setdefault(pair, None)

    def _near_tombstones(self, events: list[SyncEvent]) -> set[str]:
        """The versions whose text may restate a live tombstone (``service/paraphrase.py``): one
        pre-filter for the batch, embedding nothing when the tenant has no tombstone vectors."""
        texts = [(e.uid, e.body.get("value")) for e in events if e.body.get("trust") != "rejected"]
        texts = [(uid, text) for uid, text in texts if isinstance(text, str)]
        near = paraphrase.near_any(self.conn, self.principal, [text for _, text in texts])
        return {uid for (uid, _), close in zip(texts, near, strict=True) if close}

    def _lesson(self, scope: str, key: str) -> dict[str, Any] | None:
        if (scope, key) in self._pending:
            self._flush_creates()
        if (scope, key) not in self._lessons:
            self._lessons[(scope, key)] = fetch(self.conn, self.principal, scope, key)
        return self._lessons[(scope, key)]

    def _flush_audit(self) -> None:
        """Write the held ledger rows, in order (before any other write to the chain)."""
        self._flush_creates()
        if self._audit:
            seqs = audit.record_many(self.conn, self.principal, [entry for _, entry in self._audit])
            self._seqs.update((uid, seq) for (uid, _), seq in zip(self._audit, seqs, strict=True))
            self._audit.clear()

    def _flush_creates(self) -> None:
        """Insert the held new lessons, their versions and tags, each statement once for all of them;
        their ledger entries (still held, in order) learn the lesson ids and state hashes here."""
        if not self._pending:
            return
        items = list(self._pending.values())
        self._pending.clear()
        result = self.conn.execute(mutate.INSERT_LESSON_RETURNING, [row for row, _, _ in items])
        ids = [r[0] for r in result]
        tenant = self.principal.tenant_id
        for (row, version, entry), lesson_id in zip(items, ids, strict=True):
            row["id"] = version["lesson_id"] = entry["lesson_id"] = lesson_id
            entry["state_hash"] = state_proof.lesson_hash(row)
            entry["versions_hash"] = state_proof.versions_hash([version])
            self._lessons[(row["scope"], row["key"])] = row
        self.conn.execute(mutate.INSERT_VERSION, [version for _, version, _ in items])
        tags = [
            {"tenant_id": tenant, "lesson_id": row["id"], "tag": t}
            for row, _, _ in items
            for t in json.loads(row["tags"])
        ]
        if tags:
            self.conn.execute(mutate.INSERT_TAGS, tags)
        for row, _, _ in items:
            if status(row, self.now) == "active":
                self._fresh[row["id"]] = row  # indexed with the batch's other new lessons, in one go
            else:
                indexing.sync_many(self.conn, [(row, False, True)])

    def _flush_all(self) -> None:
        """Everything held back, in dependency order: the rows, then their indexes, then the ledger."""
        self._flush_creates()
        self._flush_index()
        self._flush_audit()

    def _changed_elsewhere(self) -> None:
        """Another path changed lessons or tombstones: what the batch read once is read again."""
        self._lessons.clear()
        self._load_tombstones()
        self._near = None  # a new tombstone vector: the batch's pre-filter no longer holds

    def _known(self, uids: list[str]) -> set[str]:
        """The uids of this batch already held here: as an applied event, or as a version."""
        known: set[str] = set()
        tenant = self.principal.tenant_id
        for start in range(0, len(uids), 400):
            chunk = uids[start : start + 400]
            known.update(
                self.conn.execute(
                    select(sync_events.c.uid).where(sync_events.c.tenant_id == tenant, sync_events.c.uid.in_(chunk))
                ).scalars()
            )
            versions = [u for u in chunk if len(u) == 32]
            if versions:
                known.update(
                    self.conn.execute(
                        select(lesson_versions.c.uid).where(
                            lesson_versions.c.tenant_id == tenant, lesson_versions.c.uid.in_(versions)
                        )
                    ).scalars()
                )
        return known

    def _record(self, ev: SyncEvent, outcome: str, seq: int | None) -> None:
        self._records.append(
            {
                "tenant_id": self.principal.tenant_id,
                "uid": ev.uid,
                "kind": ev.kind,
                "origin_store": ev.origin_store,
                "peer_store": self.peer,
                "outcome": outcome,
                "seq": seq,
                "applied_at": self.now,
            }
        )

    def _refuse(self, ev: SyncEvent, exc: CairnError) -> None:
        scope = ev.body.get("scope") if isinstance(ev.body.get("scope"), str) else None
        key = ev.body.get("key") if isinstance(ev.body.get("key"), str) else None
        if ev.kind == "link" and isinstance(ev.body.get("src"), dict):
            scope, key = ev.body["src"].get("scope"), ev.body["src"].get("key")
        scope = scope if scope is None or len(scope) <= 300 else None
        key = key if key is None or len(key) <= 200 else None
        chash = ev.body.get("content_hash") if _is_hash(ev.body.get("content_hash")) else None
        # The refusal is in this store's ledger too (hashes only, never content): what was received, and why not.
        self._flush_audit()
        seq = audit.record(
            self.conn,
            self.principal,
            "sync-refused",
            scope=scope,
            key=key,
            hash_before=chash,
            detail={"sync": self._sync(ev), "kind": ev.kind, "code": exc.code},
            at=self.now,
        )
        from cairn.core.sync import Refusal  # pydantic: loaded when a sync runs, not with the service

        self.refused.append(Refusal(uid=ev.uid, kind=ev.kind, code=exc.code, message=exc.message, scope=scope, key=key))
        self._record(ev, "refused", seq)

    def _sync(self, ev: SyncEvent) -> dict[str, str]:
        return {"peer": self.peer, "origin": ev.origin_store, "uid": ev.uid}

    def _one(self, ev: SyncEvent) -> tuple[str, int | None]:
        handler = {
            "version": self._version,
            "tombstone": self._tombstone,
            "unforget": self._unforget,
            "purge": self._purge,
            "link": self._link,
        }[ev.kind]
        if not isinstance(ev.body, dict):
            raise CairnError("INVALID_INPUT", "an event's body is an object")
        if ev.kind == "version":
            return handler(ev)
        # The other kinds write the chain and the lessons through other paths: what the batch holds
        # back is written first, and what it read once is read again after.
        self._flush_all()
        try:
            return handler(ev)
        finally:
            if ev.kind != "link":
                self._changed_elsewhere()

    # -- versions ----------------------------------------------------------------------------------
    def _parse_version(self, body: dict[str, Any]) -> dict[str, Any]:
        """The version's fields, checked as the write path checks its own (a peer's data, not its word)."""
        scope, key = _address(body)
        value = validate_value(_str(body, "value", limit=1 << 20) or "")
        chash = content_hash(value)
        if body.get("content_hash") != chash:
            raise CairnError("INVALID_INPUT", "the version's content_hash does not match its value")
        kind, trust = body.get("kind"), body.get("trust")
        if kind not in KINDS or trust not in TRUSTS:
            raise CairnError("INVALID_INPUT", "the version's kind or trust is not one Cairn knows")
        parents = body.get("parents") or []
        if not isinstance(parents, list) or len(parents) > 64:
            raise CairnError("INVALID_INPUT", "parents is a list of at most 64 version uids")
        recorded = _pt(body.get("recorded_at"), "recorded_at")
        if recorded is None:
            raise CairnError("INVALID_INPUT", "recorded_at is required")
        return {
            "uid": _uid(body.get("uid"), "uid"),
            "parents": sorted({_uid(p, "a parent") for p in parents}),
            "human": _bool(body, "human"),
            "action": _str(body, "action", limit=24),
            "scope": scope,
            "key": key,
            "value": value,
            "content_hash": chash,
            "tags": json.dumps(normalize_tags(body.get("tags") or [])),
            "kind": kind,
            "source_agent": _str(body, "source_agent", required=False),
            "trigger": _str(body, "trigger", required=False),
            "trust": trust,
            "archived": _bool(body, "archived"),
            "seen_count": _count(body, "seen_count", 1, 1),
            "helped_count": _count(body, "helped_count", 0),
            "not_helped_count": _count(body, "not_helped_count", 0),
            "valid_from": _pt(body.get("valid_from"), "valid_from"),
            "valid_to": _pt(body.get("valid_to"), "valid_to"),
            "expires_at": _pt(body.get("expires_at"), "expires_at"),
            "recorded_at": recorded,
            "actor": _str(body, "actor", limit=500) or "unknown",
            "session": _str(body, "session", required=False, limit=200),
        }

    def _version(self, ev: SyncEvent) -> tuple[str, int | None]:
        v = self._parse_version(ev.body)
        if v["uid"] != ev.uid:
            raise CairnError("INVALID_INPUT", "a version event's uid is its version's uid")
        scope, key = v["scope"], v["key"]
        self.principal.require(WRITE, scope)
        if v["trust"] != "rejected" and self._may_match(v):  # forgetting wins: never lands active
            check_tombstones(self.conn, self.principal, v["value"], scope, key, chash=v["content_hash"])
        existing = self._lesson(scope, key)
        claims: dict[str, Any] = {}
        if v["trust"] == "verified" and not rules.may_grant_trust(self.principal, scope):
            held = existing is not None and existing["trust"] == "verified"
            if not (held and existing["content_hash"] == v["content_hash"]):
                v["trust"] = "candidate"
                claims["trust"] = "verified"
        hold = None
        new_text = existing is None or existing["content_hash"] != v["content_hash"]
        near = self._near is None or ev.uid in self._near
        if near and v["trust"] != "rejected" and new_text:
            # A restatement of forgotten content lands held, as a write here would.
            hold = paraphrase.hold_for(self.conn, self.principal, v["value"])
            if hold is not None:
                v["trust"] = HELD
        lesson_info = ev.body.get("lesson") if isinstance(ev.body.get("lesson"), dict) else {}
        superseded = ev.body.get("superseded_by") if isinstance(ev.body.get("superseded_by"), dict) else None
        rivals: list[dict[str, Any]] = []
        if existing is None:
            state = self._state(v, None, lesson_info, superseded)
            before_version = None
            current = True
            new_tips = [v["uid"]]
        else:
            old = tips_of(existing)
            new_tips = sorted({t for t in old if t not in v["parents"]} | {v["uid"]})
            # The lesson's state is its old tips' winner's; the new one is the winner among the tips
            # that remain and this version. Usually one of those two; when the old winner was just
            # continued by this version and loses to another tip, that tip's version becomes current.
            held = self._versions_by_uid(existing["id"], old)
            rivals = [r for r in held if r["uid"] in new_tips]
            winner = rules.head([*rivals, v])
            current = winner["uid"] == v["uid"]
            if current:
                state = self._state(v, existing, lesson_info, superseded)
            elif held and winner["uid"] == rules.head(held)["uid"]:
                state = dict(existing)
            else:
                state = self._state(winner, existing, {}, None)
            before_version = existing["version"]
        # Histories diverged (two tips); a conflict for a person is when they disagree on the text:
        # two stores counting a recurrence or feedback at once is merged by the rule without review.
        conflict = len(new_tips) > 1 and any(r["content_hash"] != v["content_hash"] for r in rivals)
        if claims and current:
            merged = json.loads(state.get("claimed") or "null") or {}
            merged.update(claims)
            state["claimed"] = json.dumps(merged, ensure_ascii=False)
        state["tips"] = json.dumps(new_tips)
        if conflict:
            state["conflicted_at"] = (existing or {}).get("conflicted_at") or self.now
        elif v["human"] and len(new_tips) == 1:
            state["conflicted_at"] = None  # a person's version that leaves one history resolves it
        else:
            state["conflicted_at"] = (existing or {}).get("conflicted_at")
        row, version = self._write_version(existing, state, v, current=current)
        detail: dict[str, Any] = {
            "sync": self._sync(ev),
            "action": v["action"],
            "uid": v["uid"],
            "current": current,
        }
        if len(new_tips) > 1:
            detail["diverged"] = new_tips
        if conflict:
            detail["conflict"] = True
        if claims:
            detail["claimed"] = claims
        if hold is not None:
            detail.update(hold.detail())
        entry = {
            "action": "sync",
            "lesson_id": row.get("id"),
            "scope": row["scope"],
            "key": row["key"],
            "version_before": before_version,
            "version_after": row["version"],
            "hash_before": existing["content_hash"] if existing else None,
            "hash_after": row["content_hash"],
            "detail": detail,
            "at": self.now,
        }
        if existing is None:  # held back, inserted with the batch's other new lessons
            self._pending[(row["scope"], row["key"])] = (row, version, entry)
        else:
            entry.update(state_hash=state_proof.lesson_hash(row), versions_hash=state_proof.versions_hash([version]))
            self._lessons[(row["scope"], row["key"])] = row
        self._audit.append((ev.uid, entry))  # written with the batch's other rows, in order
        if superseded is not None and current:
            self._supersession_link(row, superseded)
        return ("conflict" if conflict else "applied"), None

    def _may_match(self, v: dict[str, Any]) -> bool:
        """Whether a live tombstone could hold this version's content or address (then the check runs)."""
        hashes, identities, addresses = self._live
        if v["content_hash"] in hashes or (v["scope"], v["key"]) in addresses:
            return True
        return bool(identities) and content_identity(v["value"]) in identities

    def _versions_by_uid(self, lesson_id: int, uids: list[str]) -> list[dict[str, Any]]:
        """Versions of one lesson by uid, whole (one may become the lesson's current state)."""
        if not uids:
            return []
        q = select(lesson_versions).where(
            lesson_versions.c.tenant_id == self.principal.tenant_id,
            lesson_versions.c.lesson_id == lesson_id,
            lesson_versions.c.uid.in_(uids),
        )
        return [dict(r) for r in self.conn.execute(q).mappings()]

    def _state(
        self,
        v: dict[str, Any],
        existing: dict[str, Any] | None,
        lesson_info: dict[str, Any],
        superseded: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """The lesson row a version makes current (provenance: the local lesson's, else the event's)."""
        state = dict(existing) if existing else {}
        for k in ("scope", "key", "value", "content_hash", "tags", "kind", "source_agent", "trigger", "trust"):
            state[k] = v[k]
        for k in ("seen_count", "helped_count", "not_helped_count", "valid_from", "valid_to", "expires_at"):
            state[k] = v[k]
        if v["archived"]:
            state["archived_at"] = (existing or {}).get("archived_at") or v["recorded_at"]
        else:
            state["archived_at"] = None
        if superseded is not None:
            target = self._lesson(*_address(superseded))
            state["superseded_by"] = target["id"] if target is not None else None
        elif v["action"] in ("create", "update") or existing is None:
            state["superseded_by"] = None
        if existing is None:
            origin = lesson_info.get("origin")
            claimed = lesson_info.get("claimed")
            if isinstance(claimed, dict) and len(json.dumps(claimed, ensure_ascii=False)) > MAX_CLAIMED:
                raise CairnError("INVALID_INPUT", f"the lesson's claims are longer than {MAX_CLAIMED} characters")
            state.update(
                origin=origin if origin in ORIGINS else "import",
                author=_str(lesson_info, "author", required=False),
                url=_str(lesson_info, "url", required=False),
                claimed=json.dumps(claimed, ensure_ascii=False) if isinstance(claimed, dict) else None,
                created_at=_pt(lesson_info.get("created_at"), "created_at") or v["recorded_at"],
                created_by=_str(lesson_info, "created_by", required=False) or v["actor"],
            )
        return state

    def _write_version(
        self, existing: dict[str, Any] | None, state: dict[str, Any], v: dict[str, Any], *, current: bool
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Update the lesson row, append the version, keep tags and indexes in step; a new lesson is
        held back and inserted with the batch's others (``_flush_creates``).

        Returns the lesson row and the version row (what the ledger row hashes). The statements are
        the mutation path's own, built once (``service/mutate.py``).
        """
        tenant = self.principal.tenant_id
        values = {k: state.get(k) for k in _LESSON_COLUMNS}
        if existing is None or current:
            values.update(updated_at=v["recorded_at"], updated_by=v["actor"])
        number = 1 if existing is None else existing["version"] + 1
        values.update(version=number, tenant_id=tenant)
        version = {
            "tenant_id": tenant,
            "lesson_id": None if existing is None else existing["id"],
            "version": number,
            **{k: v[k] for k in _VERSION_COLUMNS},
            "parents": json.dumps(v["parents"]),
        }
        if existing is None:
            return values, version  # held back: the lesson id comes with the batch's inserts (_flush_creates)
        lesson_id = existing["id"]
        self._flush_index(lesson_id)
        self.conn.execute(mutate.UPDATE_LESSON, {**values, "b_tenant": tenant, "b_id": lesson_id})
        row = {"id": lesson_id, **values}
        self.conn.execute(mutate.INSERT_VERSION, version)
        if existing["tags"] != row["tags"]:
            self.conn.execute(mutate.DELETE_TAGS, {"b_tenant": tenant, "b_id": lesson_id})
            tags = json.loads(row["tags"])
            if tags:
                self.conn.execute(
                    mutate.INSERT_TAGS, [{"tenant_id": tenant, "lesson_id": lesson_id, "tag": t} for t in tags]
                )
        indexing.sync_many(self.conn, [(row, status(row, self.now) == "active", False)])
        return row, version

    def _flush_index(self, lesson_id: int | None = None) -> None:
        """Index the new lessons held back so far (all, or before ``lesson_id`` changes again)."""
        if self._fresh and (lesson_id is None or lesson_id in self._fresh):
            indexing.sync_many(self.conn, [(row, True, True) for row in self._fresh.values()])
            self._fresh.clear()

    def _supersession_link(self, row: dict[str, Any], superseded: dict[str, Any]) -> None:
        """A superseded version names its successor: the ``supersedes`` link, as supersede writes it."""
        self._flush_creates()  # the row's id
        successor = self._lesson(*_address(superseded))
        if successor is None:
            return
        exists = self.conn.execute(
            select(links.c.id).where(
                links.c.src_id == successor["id"], links.c.dst_id == row["id"], links.c.rel == "supersedes"
            )
        ).first()
        if not exists:
            self.conn.execute(
                insert(links).values(
                    tenant_id=self.principal.tenant_id,
                    src_id=successor["id"],
                    dst_id=row["id"],
                    rel="supersedes",
                    created_at=self.now,
                    created_by=self.principal.actor,
                )
            )

    # -- forgetting --------------------------------------------------------------------------------
    def _tombstone(self, ev: SyncEvent) -> tuple[str, int | None]:
        body = ev.body
        scope, key = _address(body)
        chash = _hash(body.get("content_hash"), "content_hash")
        identity = body.get("identity")
        if identity is not None:
            identity = _hash(identity, "identity")
        reason = _str(body, "reason", limit=MAX_REASON) or "forgotten on a peer"
        self.principal.require(WRITE, scope)
        tenant = self.principal.tenant_id
        held = self.conn.execute(
            select(tombstones.c.id).where(
                tombstones.c.tenant_id == tenant,
                tombstones.c.content_hash == chash,
                tombstones.c.scope == scope,
                tombstones.c.key == key,
                tombstones.c.lifted_at.is_(None),
            )
        ).first()
        seq = None
        if held is None:
            target = fetch(self.conn, self.principal, scope, key)
            epoch.bump(self.conn, tenant)  # work that read this content before now writes nothing
            tid = self.conn.execute(
                insert(tombstones).values(
                    tenant_id=tenant,
                    content_hash=chash,
                    identity=identity,
                    scope=scope,
                    key=key,
                    reason=reason,
                    lesson_id=target["id"] if target else None,
                    created_at=self.now,
                    created_by=self.principal.actor,
                )
            ).inserted_primary_key[0]
            claimed = {k: body.get(k) for k in ("created_at", "created_by") if isinstance(body.get(k), str)}
            seq = audit.record(
                self.conn,
                self.principal,
                "import-tombstone",
                lesson_id=target["id"] if target else None,
                scope=scope,
                key=key,
                hash_before=chash,
                detail={"tombstone_id": tid, "lifted": False, "claimed": claimed, "sync": self._sync(ev)},
                at=self.now,
                state_hash=state_proof.tombstone_read_back(self.conn, tenant, tid),
            )
        # Every local lesson holding the content (under any key), or at the address, is forgotten.
        rows = self.conn.execute(
            select(lessons).where(
                lessons.c.tenant_id == tenant,
                lessons.c.trust != "rejected",
                or_(lessons.c.content_hash == chash, (lessons.c.scope == scope) & (lessons.c.key == key)),
            )
        ).mappings()
        forgotten = 0
        self._flush_index()
        rows = [dict(r) for r in rows]
        text = next((r["value"] for r in rows if r["content_hash"] == chash), None)
        if held is None and text is not None:
            # This store held the forgotten text: keep its vector, so a paraphrase of it is held here too.
            paraphrase.put(self.conn, tenant, tid, text, self.now)
        for r in rows:
            mutate_apply(
                self.conn,
                self.principal,
                r,
                dict(r, trust="rejected"),
                "forget",
                self.now,
                detail={"reason": reason, "by_tombstone": {"scope": scope, "key": key}, "sync": self._sync(ev)},
            )
            forgotten += 1
        return ("applied" if held is None or forgotten else "skipped"), seq

    def _unforget(self, ev: SyncEvent) -> tuple[str, int | None]:
        body = ev.body
        scope, key = _address(body)
        chash = _hash(body.get("content_hash"), "content_hash")
        reason = _str(body, "reason", limit=MAX_REASON) or "lifted on a peer"
        self.principal.require(ADMIN, scope)  # the one way back is a person's, with the right to it here
        tenant = self.principal.tenant_id
        row = (
            self.conn.execute(
                select(tombstones).where(
                    tombstones.c.tenant_id == tenant,
                    tombstones.c.content_hash == chash,
                    tombstones.c.scope == scope,
                    tombstones.c.key == key,
                    tombstones.c.lifted_at.is_(None),
                )
            )
            .mappings()
            .first()
        )
        if row is None:
            return "skipped", None
        self.conn.execute(
            update(tombstones)
            .where(tombstones.c.tenant_id == tenant, tombstones.c.id == row["id"])
            .values(lifted_at=self.now, lifted_by=self.principal.actor, lift_reason=reason)
        )
        paraphrase.drop(self.conn, tenant, row["id"])  # a lifted tombstone holds nothing
        claimed = {k: body.get(k) for k in ("lifted_at", "lifted_by") if isinstance(body.get(k), str)}
        seq = audit.record(
            self.conn,
            self.principal,
            "unforget",
            lesson_id=row["lesson_id"],
            scope=scope,
            key=key,
            hash_before=chash,
            detail={"tombstone_id": row["id"], "reason": reason, "claimed": claimed, "sync": self._sync(ev)},
            at=self.now,
        )
        return "applied", seq

    def _purge(self, ev: SyncEvent) -> tuple[str, int | None]:
        body = ev.body
        scope, key = _address(body)
        chash = _hash(body.get("content_hash"), "content_hash")
        self.principal.require(ADMIN, scope)
        if self.principal.scope_limited:
            raise CairnError("FORBIDDEN", "purge acts on the whole store; a scope-limited token may not")
        tenant = self.principal.tenant_id
        # The erased content: every lesson holding it now, and the one at the address if it ever held it.
        q = select(lessons).where(lessons.c.tenant_id == tenant, lessons.c.content_hash == chash)
        targets = {r["id"]: dict(r) for r in self.conn.execute(q).mappings()}
        at_address = fetch(self.conn, self.principal, scope, key)
        if at_address is not None and at_address["id"] not in targets:
            held = self.conn.execute(
                select(lesson_versions.c.id)
                .where(
                    lesson_versions.c.tenant_id == tenant,
                    lesson_versions.c.lesson_id == at_address["id"],
                    lesson_versions.c.content_hash == chash,
                )
                .limit(ONE_ROW)
            ).first()
            if held:
                targets[at_address["id"]] = at_address
        seq = None
        self._flush_index()
        for row in targets.values():
            n = erase(self.conn, self.principal, row["id"])
            seq = audit.record_lesson(
                self.conn,
                self.principal,
                "purge",
                row,
                version_before=row["version"],
                hash_before=row["content_hash"],
                detail={"sweep": "sync", "versions_erased": n, "sync": self._sync(ev)},
                at=self.now,
            )
            self.purged += 1
        return ("applied" if targets else "skipped"), seq

    # -- links -------------------------------------------------------------------------------------
    def _link(self, ev: SyncEvent) -> tuple[str, int | None]:
        body = ev.body
        src_a = _address(body.get("src") if isinstance(body.get("src"), dict) else {})
        dst_a = _address(body.get("dst") if isinstance(body.get("dst"), dict) else {})
        rel = body.get("rel")
        if rel not in RELS:
            raise CairnError("INVALID_INPUT", f"rel must be one of {', '.join(RELS)}")
        self.principal.require(WRITE, src_a[0])
        self.principal.require(READ, dst_a[0])
        src, dst = fetch(self.conn, self.principal, *src_a), fetch(self.conn, self.principal, *dst_a)
        if src is None or dst is None:
            raise CairnError("NOT_FOUND", f"link endpoints not in this store: {src_a} -> {dst_a}")
        exists = self.conn.execute(
            select(links.c.id).where(links.c.src_id == src["id"], links.c.dst_id == dst["id"], links.c.rel == rel)
        ).first()
        if exists:
            return "skipped", None
        self.conn.execute(
            insert(links).values(
                tenant_id=self.principal.tenant_id,
                src_id=src["id"],
                dst_id=dst["id"],
                rel=rel,
                created_at=self.now,
                created_by=self.principal.actor,
            )
        )
        seq = audit.record_lesson(
            self.conn,
            self.principal,
            "link",
            src,
            detail={"rel": rel, "to": {"scope": dst_a[0], "key": dst_a[1]}, "sync": self._sync(ev)},
            at=self.now,
        )
        return "applied", seq
