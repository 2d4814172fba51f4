"""The audit ledger: one hash-chained row per mutation, per tenant.

Rows name the actor, the action, the lesson's address and the versions and content hashes before
and after, so "what did this update replace" is answered by ``history`` at ``version_before``.
Content itself never enters the audit: purge erases it from lessons and versions while every
row here, and so the chain, stays intact.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from cairn.core.principal import Principal
from cairn.core.timeparse import format_time, utcnow
from cairn.store.dialect import ONE_ROW
from cairn.store.schema import audit_log

GENESIS = "0" * 64
_CHAINED = (
    "seq", "at", "actor", "session", "action", "lesson_id", "scope", "key",
    "version_before", "version_after", "hash_before", "hash_after", "detail", "prev_hash",
)  # fmt: skip


_LAST = (
    select(audit_log.c.seq, audit_log.c.row_hash)
    .where(audit_log.c.tenant_id == bindparam("tenant"))
    .order_by(audit_log.c.seq.desc())
    .limit(ONE_ROW)
)
# The chain head as columns of their own (NULL for an empty chain), so a lesson write reads it with
# its other look-ups (``service/write_reads.py``); parameter ``tenant``.
HEAD_COLUMNS = (
    _LAST.with_only_columns(audit_log.c.seq).scalar_subquery().label("audit_seq"),
    _LAST.with_only_columns(audit_log.c.row_hash).scalar_subquery().label("audit_hash"),
)
_INSERT = audit_log.insert()


# Chained only when present, so rows written before they existed (migration 0006) hash as they did.
_CHAINED_IF_SET = ("state_hash", "versions_hash")


def row_hash(tenant_id: str, row: dict[str, Any]) -> str:
    payload = {k: row[k] for k in _CHAINED}
    payload.update({k: row[k] for k in _CHAINED_IF_SET if row.get(k) is not None})
    payload["tenant_id"] = tenant_id
    payload["at"] = format_time(row["at"]) if isinstance(row["at"], datetime) else row["at"]
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def record(
    conn: Connection,
    principal: Principal,
    action: str,
    *,
    lesson_id: int | None = None,
    scope: str | None = None,
    key: str | None = None,
    version_before: int | None = None,
    version_after: int | None = None,
    hash_before: str | None = None,
    hash_after: str | None = None,
    detail: dict[str, Any] | None = None,
    at: datetime | None = None,
    state_hash: str | None = None,
    versions_hash: str | None = None,
) -> int:
    """Append one row to the tenant's chain; runs inside the caller's transaction.

    ``state_hash``/``versions_hash``: what the row proves about the rows it wrote
    (``service/state_proof.py``).
    """
    entry = {
        "state_hash": state_hash,
        "versions_hash": versions_hash,
        "action": action,
        "lesson_id": lesson_id,
        "scope": scope,
        "key": key,
        "version_before": version_before,
        "version_after": version_after,
        "hash_before": hash_before,
        "hash_after": hash_after,
        "detail": detail,
        "at": at,
    }
    return record_many(conn, principal, [entry])[-1]


def record_lesson(conn: Connection, principal: Principal, action: str, row: Mapping[str, Any], **fields: Any) -> int:
    """``record`` for an action on one stored lesson, addressed by its row (id, scope, key)."""
    return record(conn, principal, action, lesson_id=row["id"], scope=row["scope"], key=row["key"], **fields)


def record_many(
    conn: Connection, principal: Principal, entries: list[dict[str, Any]], head: tuple[Any, Any] | None = None
) -> list[int]:
    """Append rows to the tenant's chain in order, with one read of the chain head.

    ``head``: the ``HEAD_COLUMNS`` (seq, row hash) read earlier in this transaction, after its write
    lock and with no audit row appended since; then the chain head is not read again."""
    last = head if head is not None else conn.execute(_LAST, {"tenant": principal.tenant_id}).first()
    seq, prev = (last[0], last[1]) if last is not None and last[0] is not None else (0, GENESIS)
    rows = []
    for e in entries:
        seq += 1
        row: dict[str, Any] = {
            "seq": seq,
            "at": e.get("at") or utcnow(),
            "actor": principal.actor,
            "session": principal.session,
            "action": e["action"],
            "lesson_id": e.get("lesson_id"),
            "scope": e.get("scope"),
            "key": e.get("key"),
            "version_before": e.get("version_before"),
            "version_after": e.get("version_after"),
            "hash_before": e.get("hash_before"),
            "hash_after": e.get("hash_after"),
            "detail": json.dumps(e.get("detail") or {}, sort_keys=True, ensure_ascii=False),
            "prev_hash": prev,
            "state_hash": e.get("state_hash"),
            "versions_hash": e.get("versions_hash"),
        }
        # The stored ``at`` loses nothing (microseconds), so hashing the datetime is stable.
        row["row_hash"] = prev = row_hash(principal.tenant_id, row)
        rows.append({"tenant_id": principal.tenant_id, **row})
    if rows:
        conn.execute(_INSERT, rows)
    return [r["seq"] for r in rows]


def verify(conn: Connection, tenant_id: str) -> dict[str, Any]:
    """Walk the chain in order; report the first row whose link or content does not hold."""
    prev = GENESIS
    expected_seq = 1
    checked = 0
    result = conn.execute(select(audit_log).where(audit_log.c.tenant_id == tenant_id).order_by(audit_log.c.seq))
    for r in result.mappings():
        row = dict(r)
        problem = None
        if row["seq"] != expected_seq:
            problem = f"sequence gap: expected row {expected_seq}, found {row['seq']} (a row was removed)"
        elif row["prev_hash"] != prev:
            problem = "prev_hash does not match the previous row's hash (rows removed or reordered)"
        elif row_hash(tenant_id, row) != row["row_hash"]:
            problem = "row content does not match its hash (the row was edited)"
        if problem:
            return {
                "ok": False,
                "checked": checked,
                "broken_at": {"seq": row["seq"], "id": row["id"], "action": row["action"]},
                "problem": problem,
            }
        prev = row["row_hash"]
        expected_seq += 1
        checked += 1
    return {"ok": True, "checked": checked, "broken_at": None, "problem": None, "head": prev}


def public(row: dict[str, Any]) -> dict[str, Any]:
    """The audit row as surfaces show it."""
    return {
        "seq": row["seq"],
        "at": format_time(row["at"]),
        "actor": row["actor"],
        "session": row["session"],
        "action": row["action"],
        "scope": row["scope"],
        "key": row["key"],
        "version_before": row["version_before"],
        "version_after": row["version_after"],
        "hash_before": row["hash_before"],
        "hash_after": row["hash_after"],
        "detail": json.loads(row["detail"]) if row["detail"] else {},
    }
