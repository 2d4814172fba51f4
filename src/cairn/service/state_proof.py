"""What the ledger records about the rows a mutation wrote, and checking today's rows against it.

The audit chain proves that no ledger row was edited, removed or reordered. This module makes it
prove the state too: each row that writes a lesson records ``state_hash`` (the lesson row as the
mutation left it) and ``versions_hash`` (the version rows it wrote); an imported tombstone records
the tombstone row. ``verify_state`` replays the ledger's expectations and compares every lesson,
version and tombstone row with them, so a direct edit of the database (a value, trust, archive,
expiry, tags, scope or key changed; a version, lesson or tombstone deleted; a row inserted with no
ledger row) is reported with its address.

What is checked for rows written before migration 0006 (no state hashes): what they recorded —
the lesson's version and content hash, a tombstone's forget or unforget (address, content hash,
reason, times, actor). Nothing is backfilled: hashing today's rows would certify today's edits.

Erasure is expected: ``purge`` and ``org.delete`` rows say which lessons must be absent. A
tombstone's ``identity`` column is derived from content (and recomputed by migrations when the
identity rules change), so it is not part of the proof; the tombstone's ``content_hash`` is.

The field lists are frozen: a hash already recorded must be recomputable from the same columns.
A column added later is proved only by a new list used for rows written after it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.engine import Connection

from cairn.core.timeparse import format_time
from cairn.store.schema import audit_log, lesson_versions, lessons, tombstones

LESSON_FIELDS = (
    "id", "scope", "key", "value", "tags", "kind", "source_agent", "trigger", "origin", "author", "url",
    "trust", "seen_count", "helped_count", "not_helped_count", "valid_from", "valid_to", "expires_at",
    "archived_at", "superseded_by", "version", "content_hash", "created_at", "updated_at", "created_by",
    "updated_by", "claimed",
)  # fmt: skip
VERSION_FIELDS = (
    "lesson_id", "version", "action", "scope", "key", "value", "content_hash", "tags", "kind", "source_agent",
    "trigger", "trust", "archived", "seen_count", "helped_count", "not_helped_count", "valid_from", "valid_to",
    "expires_at", "recorded_at", "actor", "session",
)  # fmt: skip
TOMBSTONE_FIELDS = (
    "id", "content_hash", "scope", "key", "reason", "lesson_id", "created_at", "created_by",
    "lifted_at", "lifted_by", "lift_reason",
)  # fmt: skip
_LIFT = ("lifted_at", "lifted_by", "lift_reason")
# Rows that erase: one lesson (purge), or every lesson of the tenant (an org deleted).
ERASING = frozenset({"purge"})
ERASES_ALL = "org.delete"
TOMBSTONE_ACTIONS = ("forget", "import-tombstone", "unforget")


def _digest(row: dict[str, Any], fields: tuple[str, ...]) -> str:
    """One row's listed columns as a hash: ``repr`` of a list of str/int/bool/None (times as ISO text).

    ``repr`` of those types is unambiguous and a C-level call; verify hashes every row of a tenant.
    A missing key is NULL: a create's row dict holds only the columns it set, the rest default to NULL.
    """
    payload = [format_time(v) if v.__class__ is datetime else v for v in map(row.get, fields)]
    return hashlib.sha256(repr(payload).encode("utf-8", "surrogatepass")).hexdigest()


def lesson_hash(row: dict[str, Any]) -> str:
    """The lesson row (current state) as one hash."""
    return _digest(row, LESSON_FIELDS)


def version_hash(row: dict[str, Any]) -> str:
    """One version row as one hash."""
    return _digest(row, VERSION_FIELDS)


def versions_hash(rows: Iterable[dict[str, Any]]) -> str:
    """The version rows one ledger row wrote, in version order."""
    return hashlib.sha256("".join(version_hash(r) for r in rows).encode()).hexdigest()


def tombstone_hash(row: dict[str, Any]) -> str:
    return _digest(row, TOMBSTONE_FIELDS)


def read_back(conn: Connection, tenant_id: str, lesson_id: int) -> dict[str, str]:
    """``state_hash`` and ``versions_hash`` of a lesson as the database now holds it.

    For writers whose values arrive from outside (a lossless import): hashing what was stored,
    rather than what was passed, leaves no room for a type the database coerced.
    """
    row = conn.execute(select(lessons).where(lessons.c.tenant_id == tenant_id, lessons.c.id == lesson_id)).mappings()
    versions = conn.execute(
        select(lesson_versions)
        .where(lesson_versions.c.tenant_id == tenant_id, lesson_versions.c.lesson_id == lesson_id)
        .order_by(lesson_versions.c.version)
    ).mappings()
    return {"state_hash": lesson_hash(dict(row.one())), "versions_hash": versions_hash(dict(v) for v in versions)}


def read_back_many(conn: Connection, tenant_id: str, lesson_ids: list[int]) -> dict[int, dict[str, str]]:
    """``read_back`` of several lessons with two queries (a batched restore import)."""
    found = conn.execute(
        select(lessons).where(lessons.c.tenant_id == tenant_id, lessons.c.id.in_(lesson_ids))
    ).mappings()
    states = {r["id"]: lesson_hash(dict(r)) for r in found}
    versions: dict[int, list[dict[str, Any]]] = {lesson_id: [] for lesson_id in lesson_ids}
    for v in conn.execute(
        select(lesson_versions)
        .where(lesson_versions.c.tenant_id == tenant_id, lesson_versions.c.lesson_id.in_(lesson_ids))
        .order_by(lesson_versions.c.lesson_id, lesson_versions.c.version)
    ).mappings():
        versions[v["lesson_id"]].append(dict(v))
    return {
        lesson_id: {"state_hash": states[lesson_id], "versions_hash": versions_hash(versions[lesson_id])}
        for lesson_id in lesson_ids
    }


def tombstone_read_back(conn: Connection, tenant_id: str, tombstone_id: int) -> str:
    """``state_hash`` of a tombstone as stored (an imported one: its fields come from a file)."""
    q = select(tombstones).where(tombstones.c.tenant_id == tenant_id, tombstones.c.id == tombstone_id)
    return tombstone_hash(dict(conn.execute(q).mappings().one()))


# -- verification ----------------------------------------------------------------------------------


@dataclass(slots=True)  # one per lesson of the tenant: keep them small
class _Span:
    """Versions ``lo..hi`` of a lesson, written by ledger row ``seq``."""

    lo: int
    hi: int
    seq: int
    action: str
    versions_hash: str | None
    content_hash: str | None
    count: int | None  # legacy lossless import: how many versions it recorded


@dataclass(slots=True)  # one per lesson of the tenant: keep them small
class _Life:
    """What the ledger says one lesson id holds now."""

    scope: str
    key: str
    seq: int = 0
    version: int | None = None
    content_hash: str | None = None
    state_hash: str | None = None
    state_seq: int = 0
    erased_at: int | None = None
    spans: list[_Span] = field(default_factory=list)


@dataclass
class _Ledger:
    lives: dict[int, _Life] = field(default_factory=dict)
    created: dict[int, dict[str, Any]] = field(default_factory=dict)  # tombstone id -> the row that made it
    lifted: dict[int, dict[str, Any]] = field(default_factory=dict)  # tombstone id -> the unforget


_LEDGER_COLUMNS = (
    audit_log.c.seq, audit_log.c.at, audit_log.c.actor, audit_log.c.action, audit_log.c.lesson_id,
    audit_log.c.scope, audit_log.c.key, audit_log.c.version_after, audit_log.c.hash_before,
    audit_log.c.hash_after, audit_log.c.detail, audit_log.c.state_hash, audit_log.c.versions_hash,
)  # fmt: skip


def _read_ledger(conn: Connection, tenant_id: str) -> _Ledger:
    ledger = _Ledger()
    q = (
        select(*_LEDGER_COLUMNS)
        .where(
            audit_log.c.tenant_id == tenant_id,
            # A tombstone's rows may name no lesson (imported without it, or the lesson purged).
            or_(audit_log.c.lesson_id.is_not(None), audit_log.c.action.in_((ERASES_ALL, *TOMBSTONE_ACTIONS))),
        )
        .order_by(audit_log.c.seq)
    )
    for r in conn.execute(q).mappings():
        action, lid = r["action"], r["lesson_id"]
        if action == ERASES_ALL:
            for life in ledger.lives.values():
                if life.erased_at is None:
                    life.erased_at, life.spans = r["seq"], []
            continue
        life = ledger.lives.get(lid)
        if action in ERASING:
            if life is not None:
                life.erased_at, life.spans = r["seq"], []
            continue
        if r["version_after"] is not None:
            if life is None or life.erased_at is not None:  # a new lesson (SQLite may reuse a purged id)
                life = ledger.lives[lid] = _Life(r["scope"], r["key"])
            lo = life.spans[-1].hi + 1 if life.spans else 1
            count = None
            if action == "import" and r["versions_hash"] is None:
                count = json.loads(r["detail"] or "{}").get("versions")
            life.spans.append(
                _Span(lo, r["version_after"], r["seq"], action, r["versions_hash"], r["hash_after"], count)
            )
            life.scope, life.key, life.seq = r["scope"], r["key"], r["seq"]
            life.version, life.content_hash = r["version_after"], r["hash_after"]
            life.state_hash, life.state_seq = r["state_hash"], r["seq"]
        elif r["state_hash"] is not None and life is not None and action != "import-tombstone":
            life.state_hash, life.state_seq = r["state_hash"], r["seq"]  # e.g. an imported supersession
        if action in TOMBSTONE_ACTIONS:
            detail = json.loads(r["detail"] or "{}")
            tid = detail.get("tombstone_id")
            if tid is not None:
                (ledger.lifted if action == "unforget" else ledger.created)[tid] = {**r, "detail": detail}
    return ledger


def _merge(rows: Iterator[dict[str, Any]], expected: Iterable[int], key: str) -> Iterator[tuple[int, Any]]:
    """Walk rows (ordered by ``key``) and expected ids together, ascending: (id, row or None)."""
    want = sorted(set(expected))
    i = 0
    for row in rows:
        rid = row[key]
        while i < len(want) and want[i] < rid:
            yield want[i], None
            i += 1
        if i < len(want) and want[i] == rid:
            i += 1
        yield rid, row
    for rid in want[i:]:
        yield rid, None


def _where(table: str, row_id: int, scope: str | None, key: str | None, **more: Any) -> dict[str, Any]:
    return {"table": table, "id": row_id, "scope": scope, "key": key, **more}


def verify_state(conn: Connection, tenant_id: str) -> dict[str, Any]:
    """Compare every lesson, version and tombstone row of the tenant with the ledger.

    Returns counts and, on the first mismatch (lessons by id, then their versions, then tombstones),
    ``problem`` and ``broken_at`` (table, row id, address, the ledger row that says otherwise).
    """
    ledger = _read_ledger(conn, tenant_id)
    counts = {"lessons": 0, "versions": 0, "tombstones": 0}
    found = _check_lessons(conn, tenant_id, ledger, counts) or _check_versions(conn, tenant_id, ledger, counts)
    found = found or _check_tombstones(conn, tenant_id, ledger, counts)
    if found:
        where, problem = found
        return {"ok": False, "state": counts, "broken_at": where, "problem": problem}
    return {"ok": True, "state": counts, "broken_at": None, "problem": None}


Found = tuple[dict[str, Any], str] | None


def _check_lessons(conn: Connection, tenant_id: str, ledger: _Ledger, counts: dict[str, int]) -> Found:
    rows = conn.execute(select(lessons).where(lessons.c.tenant_id == tenant_id).order_by(lessons.c.id)).mappings()
    live = (lid for lid, life in ledger.lives.items() if life.erased_at is None)
    for lid, row in _merge(iter(rows), live, "id"):
        life = ledger.lives.get(lid)
        if row is None:
            assert life is not None
            return (
                _where("lessons", lid, life.scope, life.key, seq=life.seq),
                f"lesson {life.scope} {life.key} is missing: ledger row {life.seq} says it holds version "
                f"{life.version} (deleted outside Cairn)",
            )
        counts["lessons"] += 1
        where = _where("lessons", lid, row["scope"], row["key"], version=row["version"])
        if life is None or life.erased_at is not None:
            why = f"was erased at ledger row {life.erased_at}" if life else "has no ledger row"
            return where, f"lesson {row['scope']} {row['key']} {why} (inserted outside Cairn)"
        where["seq"] = life.state_seq
        if life.state_hash is not None:
            if lesson_hash(dict(row)) != life.state_hash:
                return where, (
                    f"lesson {row['scope']} {row['key']} differs from the state ledger row {life.state_seq} "
                    "recorded (edited outside Cairn)"
                )
            continue
        if (row["scope"], row["key"], row["version"], row["content_hash"]) != (
            life.scope,
            life.key,
            life.version,
            life.content_hash,
        ):
            return where, (
                f"lesson {row['scope']} {row['key']} v{row['version']} does not match ledger row {life.seq} "
                f"({life.scope} {life.key} v{life.version}, content hash {str(life.content_hash)[:12]})"
            )
    return None


def _check_versions(conn: Connection, tenant_id: str, ledger: _Ledger, counts: dict[str, int]) -> Found:
    q = (
        select(lesson_versions)
        .where(lesson_versions.c.tenant_id == tenant_id)
        .order_by(lesson_versions.c.lesson_id, lesson_versions.c.version)
    )
    grouped = _group(conn.execute(q).mappings())
    live = (lid for lid, life in ledger.lives.items() if life.erased_at is None)
    for lid, group in _merge(grouped, live, "lesson_id"):
        versions = group["rows"] if group else []
        counts["versions"] += len(versions)
        life = ledger.lives.get(lid)
        if life is None or life.erased_at is not None:
            v = versions[0]
            why = f"was erased at ledger row {life.erased_at}" if life else "has no ledger row"
            return (
                _where("lesson_versions", v["id"], v["scope"], v["key"], lesson_id=lid, version=v["version"]),
                f"version {v['version']} of {v['scope']} {v['key']} {why} (inserted outside Cairn)",
            )
        found = _check_spans(lid, life, versions)
        if found:
            return found
    return None


def _group(rows: Iterable[Any]) -> Iterator[dict[str, Any]]:
    current: dict[str, Any] | None = None
    for r in rows:
        if current is None or current["lesson_id"] != r["lesson_id"]:
            if current is not None:
                yield current
            current = {"lesson_id": r["lesson_id"], "rows": []}
        current["rows"].append(dict(r))
    if current is not None:
        yield current


def _check_spans(lid: int, life: _Life, versions: list[dict[str, Any]]) -> Found:
    by_version = {v["version"]: v for v in versions}
    for span in life.spans:
        covered = [by_version[n] for n in range(span.lo, span.hi + 1) if n in by_version]
        base = {"lesson_id": lid, "seq": span.seq}
        if span.versions_hash is not None:
            if versions_hash(covered) == span.versions_hash:
                continue
            missing = [n for n in range(span.lo, span.hi + 1) if n not in by_version]
            n = missing[0] if missing else span.hi
            what = "is missing" if missing else "differs from what the ledger recorded"
            if not missing and span.lo != span.hi:
                n = next(v["version"] for v in covered if v["version"] >= span.lo)
                what = f"(one of {span.lo}..{span.hi}, written by one {span.action}) differs from the ledger"
            row_id = by_version[n]["id"] if n in by_version else None
            return (
                _where("lesson_versions", row_id, life.scope, life.key, version=n, **base),
                f"version {n} of {life.scope} {life.key} {what}: ledger row {span.seq} (edited outside Cairn)",
            )
        # Before migration 0006: the ledger recorded the version number and its content hash.
        last = by_version.get(span.hi)
        expected = span.count if span.count is not None else 1
        if last is None or last["content_hash"] != span.content_hash or len(covered) != expected:
            what = "is missing" if last is None else "does not match the ledger"
            return (
                _where("lesson_versions", last["id"] if last else None, life.scope, life.key, version=span.hi, **base),
                f"version {span.hi} of {life.scope} {life.key} {what}: ledger row {span.seq}",
            )
    top = life.spans[-1].hi if life.spans else 0
    extra = [v for v in versions if v["version"] > top or v["version"] < 1]
    if extra:
        v = extra[0]
        return (
            _where("lesson_versions", v["id"], life.scope, life.key, version=v["version"], lesson_id=lid),
            f"version {v['version']} of {life.scope} {life.key} has no ledger row (inserted outside Cairn)",
        )
    return None


def _check_tombstones(conn: Connection, tenant_id: str, ledger: _Ledger, counts: dict[str, int]) -> Found:
    q = select(tombstones).where(tombstones.c.tenant_id == tenant_id).order_by(tombstones.c.id)
    for tid, row in _merge(iter(conn.execute(q).mappings()), ledger.created, "id"):
        made = ledger.created.get(tid)
        if row is None:
            assert made is not None
            return (
                _where("tombstones", tid, made["scope"], made["key"], seq=made["seq"]),
                f"tombstone {tid} ({made['scope']} {made['key']}) is missing: ledger row {made['seq']} created it "
                "(deleted outside Cairn)",
            )
        counts["tombstones"] += 1
        where = _where("tombstones", tid, row["scope"], row["key"])
        if made is None:
            return where, f"tombstone {tid} ({row['scope']} {row['key']}) has no ledger row (inserted outside Cairn)"
        where["seq"] = made["seq"]
        problem = _tombstone_problem(dict(row), made, ledger.lifted.get(tid))
        if problem:
            return where, f"tombstone {tid} ({row['scope']} {row['key']}) {problem} (edited outside Cairn)"
    return None


def _tombstone_problem(row: dict[str, Any], made: dict[str, Any], lift: dict[str, Any] | None) -> str | None:
    created = {k: row[k] for k in TOMBSTONE_FIELDS}
    if lift is not None:
        got = (row["lifted_at"], row["lifted_by"], row["lift_reason"])
        if got != (lift["at"], lift["actor"], lift["detail"].get("reason")):
            return f"does not match its unforget, ledger row {lift['seq']}"
        created.update(dict.fromkeys(_LIFT))  # an unforget lifts only an unlifted tombstone
    if made["action"] == "import-tombstone" and made["state_hash"] is not None:  # a forget's is the lesson's
        return None if tombstone_hash(created) == made["state_hash"] else f"differs from ledger row {made['seq']}"
    expected = {
        "scope": made["scope"],
        "key": made["key"],
        "content_hash": made["hash_before"] if made["action"] == "import-tombstone" else made["hash_after"],
        "lesson_id": made["lesson_id"],
    }
    if made["action"] == "forget":
        expected.update(
            reason=made["detail"].get("reason"),
            created_at=made["at"],
            created_by=made["actor"],
            **dict.fromkeys(_LIFT),
        )
    for k, v in expected.items():
        if created[k] != v:
            return f"{k} does not match ledger row {made['seq']}"
    imported_lifted = made["action"] == "import-tombstone" and lift is None
    if imported_lifted and (row["lifted_at"] is not None) != bool(made["detail"].get("lifted")):
        return f"lifted state does not match ledger row {made['seq']}"
    return None
