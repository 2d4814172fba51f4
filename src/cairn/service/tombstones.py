"""Forgetting: rejection with a permanent tombstone, the check every write makes, and the one
audited way back.

A tombstone is keyed on the normalized content hash, the wider content identity *and* the
address, so a rejected lesson cannot return under another key, in another scope, re-cased,
re-punctuated, with invisible characters, look-alike letters or its accents stripped
(``core.content``). It holds no content: purging the lesson leaves the tombstone (and so the
refusal) in force. Beside it, while the forgotten text is stored, is that text's embedding
(``service/paraphrase.py``): a later write that restates it is held for a person, not refused.

``check_tombstones`` is the one check. Every transition that makes content active runs it: a
write (and so supersede and a plain import record), restore of an archived lesson, review verify,
and the import of an exported lesson.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, insert, or_, select, update
from sqlalchemy.engine import Connection

from cairn.core.content import content_hash, content_identity
from cairn.core.keys import normalize_key
from cairn.core.lesson import MAX_PAGE
from cairn.core.principal import ADMIN, READ, WRITE, Principal
from cairn.core.scope import validate_scope
from cairn.core.timeparse import format_time, utcnow
from cairn.errors import CairnError
from cairn.service import audit, epoch, paraphrase
from cairn.service.mutate import apply
from cairn.service.records import fetch, paged
from cairn.service.rows import tenant_row
from cairn.service.tx import read_tx, write_tx
from cairn.store.dialect import ONE_ROW
from cairn.store.engine import Store
from cairn.store.schema import lesson_versions, tombstones

MAX_REASON = 2000


def _reason(reason: str | None) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise CairnError("INVALID_INPUT", 'a reason is required (--reason "why this lesson is wrong")')
    if len(reason) > MAX_REASON:
        raise CairnError("INVALID_INPUT", f"reason is longer than {MAX_REASON} characters")
    if "\x00" in reason:  # Postgres text cannot hold U+0000; one rule on both databases
        raise CairnError("INVALID_INPUT", "reason contains a NUL character")
    return reason


# Built once: every write runs it (see records.BY_ADDRESS).
_LIVE_MATCH = (
    select(tombstones)
    .where(
        tombstones.c.tenant_id == bindparam("tenant"),
        tombstones.c.lifted_at.is_(None),
        or_(
            tombstones.c.content_hash == bindparam("hash"),
            tombstones.c.identity == bindparam("identity"),
            and_(tombstones.c.scope == bindparam("scope"), tombstones.c.key == bindparam("key")),
        ),
    )
    .order_by(tombstones.c.id)
    .limit(ONE_ROW)
)
# Whether any live tombstone matches, as a column a write reads with its other look-ups
# (``service/write_reads.py``): the id of ``_LIVE_MATCH``'s row, NULL when there is none.
LIVE_MATCH_ID = _LIVE_MATCH.with_only_columns(tombstones.c.id).scalar_subquery().label("tombstone")


def check_tombstones(
    conn: Connection,
    principal: Principal,
    value: str,
    scope: str,
    key: str,
    *,
    chash: str | None = None,
    identity: str | None = None,
    matched: bool = True,
) -> None:
    """Refuse content (or an address) that matches a live tombstone of the tenant.

    Content matches by either hash: ``content_hash`` (what every tombstone records) or
    ``content_identity`` (look-alikes folded; NULL on tombstones whose text was gone when it was
    computed). ``chash`` and ``identity`` save recomputing hashes the caller already holds;
    ``matched=False`` says ``LIVE_MATCH_ID`` read in this transaction with the same parameters found
    no match, so there is nothing to refuse and nothing to read.
    """
    if not matched:
        return
    chash = chash or content_hash(value)
    identity = identity or content_identity(value)
    params = {"tenant": principal.tenant_id, "hash": chash, "identity": identity, "scope": scope, "key": key}
    hit = conn.execute(_LIVE_MATCH, params).mappings().first()
    if hit is None:
        return
    same = hit["content_hash"] == chash or hit["identity"] == identity
    matched = "content" if same else "address"
    if not principal.can_see(hit["scope"]):
        # The same content was forgotten in a scope this (scope-limited) caller may not see: refuse
        # without naming that scope, its key or the reason, which are that scope's business.
        raise CairnError(
            "TOMBSTONED",
            "refused: this content was forgotten in a scope outside this token's scopes; "
            "ask someone who can see it to review the tombstone",
            {"matched": matched},
        )
    raise CairnError(
        "TOMBSTONED",
        f"refused: this {'content' if matched == 'content' else 'address'} was forgotten "
        f"(tombstone {hit['id']}, {hit['scope']} {hit['key']}): {hit['reason']}. "
        f'A person can lift it with: cairn unforget {hit["id"]} --reason "..."',
        {"tombstone_id": hit["id"], "reason": hit["reason"], "matched": matched},
    )


def forgotten_identity(conn: Connection, principal: Principal, lesson_id: int, chash: str) -> str | None:
    """The identity of a lesson's text that had ``chash``, if a version row still holds it."""
    value = conn.execute(
        select(lesson_versions.c.value)
        .where(
            lesson_versions.c.tenant_id == principal.tenant_id,
            lesson_versions.c.lesson_id == lesson_id,
            lesson_versions.c.content_hash == chash,
        )
        .limit(ONE_ROW)
    ).scalar()
    return content_identity(value) if value is not None else None


def tombstone_public(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "scope": row["scope"],
        "key": row["key"],
        "content_hash": row["content_hash"],
        "reason": row["reason"],
        "created_at": format_time(row["created_at"]),
        "created_by": row["created_by"],
        "lifted_at": format_time(row["lifted_at"]) if row["lifted_at"] else None,
        "lifted_by": row["lifted_by"],
        "lift_reason": row["lift_reason"],
    }


@dataclass(eq=False, repr=False)
class Tombstones:
    """Forgetting and the audited way back."""

    store: Store

    def forget(self, principal: Principal, scope: str, key: str, reason: str) -> dict[str, Any]:
        """Reject the lesson and tombstone its content and address, in one transaction."""
        scope, key, reason = validate_scope(scope), normalize_key(key), _reason(reason)
        principal.require(WRITE, scope)

        def text(conn: Connection) -> str | None:
            row = fetch(conn, principal, scope, key)
            return row["value"] if row is not None and row["trust"] != "rejected" else None

        # The forgotten text's embedding is made before the write lock is taken (the transaction
        # embeds it itself if the text changed meanwhile); a missing model is reported by ``put``.
        value = read_tx(self.store, principal, text)
        if value is not None:
            with contextlib.suppress(CairnError):
                paraphrase.prepare(self.store, principal, value, always=True)

        def tx(conn: Connection, principal: Principal) -> dict[str, Any]:
            now = utcnow()
            before = fetch(conn, principal, scope, key)
            if before is None:
                raise CairnError("NOT_FOUND", f"no lesson at {scope} {key}")
            if before["trust"] == "rejected":
                live = conn.execute(
                    select(tombstones.c.id).where(
                        tombstones.c.tenant_id == principal.tenant_id,
                        tombstones.c.lesson_id == before["id"],
                        tombstones.c.lifted_at.is_(None),
                    )
                ).scalar()
                if live is not None:
                    return {"tombstone_id": live, "already": True, "scope": scope, "key": key}
            identity = content_identity(before["value"])
            epoch.bump(conn, principal.tenant_id)  # jobs that read this text before now write nothing
            tomb_id = conn.execute(
                insert(tombstones).values(
                    tenant_id=principal.tenant_id,
                    content_hash=before["content_hash"],
                    identity=identity,
                    scope=scope,
                    key=key,
                    reason=reason,
                    lesson_id=before["id"],
                    created_at=now,
                    created_by=principal.actor,
                )
            ).inserted_primary_key[0]
            # The text's embedding, so a restatement of it is held (the epoch bump above keys the
            # cache of the tenant's vectors). Made here, not deferred: a write right after this
            # commit must already meet it.
            unchecked = paraphrase.put(conn, principal.tenant_id, tomb_id, before["value"], now)
            apply(
                conn,
                principal,
                before,
                dict(before, trust="rejected"),
                "forget",
                now,
                # The identity too, so the ledger can vouch for the tombstone's wider match.
                detail={"tombstone_id": tomb_id, "reason": reason, "identity": identity},
            )
            out = {"tombstone_id": tomb_id, "already": False, "scope": scope, "key": key, "reason": reason}
            if unchecked:
                out["paraphrases_unchecked"] = unchecked
            return out

        return write_tx(self.store, principal, tx)

    def unforget(self, principal: Principal, tombstone_id: int, reason: str) -> dict[str, Any]:
        """Lift a tombstone: the one path back, audited with its reason. The lesson stays rejected."""
        reason = _reason(reason)
        principal.require(ADMIN)

        def tx(conn: Connection, principal: Principal) -> dict[str, Any]:
            now = utcnow()
            row = tenant_row(conn, principal, tombstones, id=tombstone_id)
            if row is None:
                raise CairnError("NOT_FOUND", f"no tombstone {tombstone_id}")
            principal.require(ADMIN, row["scope"])
            if row["lifted_at"] is not None:
                raise CairnError(
                    "CONFLICT", f"tombstone {tombstone_id} was already lifted at {format_time(row['lifted_at'])}"
                )
            conn.execute(
                update(tombstones)
                .where(tombstones.c.tenant_id == principal.tenant_id, tombstones.c.id == tombstone_id)
                .values(lifted_at=now, lifted_by=principal.actor, lift_reason=reason)
            )
            paraphrase.drop(conn, principal.tenant_id, tombstone_id)  # a lifted tombstone holds nothing
            audit.record(
                conn,
                principal,
                "unforget",
                lesson_id=row["lesson_id"],
                scope=row["scope"],
                key=row["key"],
                hash_before=row["content_hash"],
                detail={"tombstone_id": tombstone_id, "reason": reason},
                at=now,
            )
            return {"tombstone_id": tombstone_id, "lifted": True, "reason": reason}

        return write_tx(self.store, principal, tx)

    def tombstones(
        self, principal: Principal, *, include_lifted: bool = False, limit: int = 1000, cursor: str | None = None
    ) -> dict[str, Any]:
        """Tombstones, oldest first, a page at a time (``next_cursor`` continues)."""
        principal.require(READ)
        check_limit(limit)

        def tx(conn: Connection) -> dict[str, Any]:
            q = select(tombstones).where(tombstones.c.tenant_id == principal.tenant_id)
            if not include_lifted:
                q = q.where(tombstones.c.lifted_at.is_(None))
            kind = "tombstones-all" if include_lifted else "tombstones"
            rows, after = paged(conn, principal, q, ((tombstones.c.id, False),), limit, kind=kind, cursor=cursor)
            return {"tombstones": [tombstone_public(r) for r in rows], "next_cursor": after}

        return read_tx(self.store, principal, tx)


def check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise CairnError("INVALID_INPUT", f"limit must be between 1 and {MAX_PAGE}, got {limit}")
