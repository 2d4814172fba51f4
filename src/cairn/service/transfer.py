"""Import of JSONL: an export's lossless round trip (``export.py``), and plain records from anywhere.

Import validates every line (``import_records.py``) before it writes anything, then writes in
batches of one transaction each: a killed import leaves whole batches, and running it again finishes the job
without duplicating anything (identical records are no-ops, not recurrences).

An import carries data, not authority. A file can claim anything — that a lesson is verified, that
a person wrote it, that it was seen fifty times — so only an admin's explicit restore
(``restore=True``, ``cairn import --restore``) grants what the file says: trust, provenance
(origin, author, created_by), counters and timestamps, with the whole version history, audited as a
restore. Any other import lands each lesson as a candidate with origin ``import`` and the importer
as author, and keeps what the record claimed in ``lessons.claimed``, shown as claims. Either way
each record passes the write path's own validators (``make_write``: types, limits) and the same
tombstone check.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection

from cairn.core.lesson import HELD
from cairn.core.principal import ADMIN, WRITE, Principal
from cairn.core.timeparse import format_time, utcnow
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.service import audit, indexing, limits, paraphrase, state_proof
from cairn.service.import_bulk import PlainBulk, RestoreBulk
from cairn.service.import_records import parse_all, values_of
from cairn.service.lessons import Lessons
from cairn.service.mutate import apply, replay
from cairn.service.records import fetch
from cairn.service.tombstones import check_tombstones, forgotten_identity
from cairn.service.tx import write_tx
from cairn.store.engine import Store
from cairn.store.schema import lessons, links, tombstones

BATCH = 500
MAX_REPORTED_ERRORS = 20

Progress = Callable[[int, int], None]


def _t(v: datetime | None) -> str | None:
    return format_time(v) if v is not None else None


@dataclass(eq=False, repr=False)
class Transfer:
    """Import; a record is written through the lessons' own write path."""

    store: Store
    settings: Settings
    lessons: Lessons

    def import_lines(
        self,
        principal: Principal,
        lines: Iterable[str],
        *,
        restore: bool = False,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Import JSONL; ``restore`` (an admin's) grants what the records claim, see the module doc."""
        principal.require(ADMIN if restore else WRITE)
        records, errors = parse_all(principal, lines, restore)
        if errors:
            shown = errors[:MAX_REPORTED_ERRORS]
            more = f" (and {len(errors) - len(shown)} more)" if len(errors) > len(shown) else ""
            raise CairnError(
                "INVALID_INPUT",
                f"{len(errors)} invalid line(s), nothing was imported{more}: "
                + "; ".join(f"line {n}: {msg}" for n, msg in shown),
                {"errors": [{"line": n, "message": m} for n, m in shown]},
            )
        counts = {"created": 0, "updated": 0, "unchanged": 0, "tombstones": 0, "links": 0}
        refused: list[dict[str, Any]] = []
        supersessions: list[tuple[tuple[str, str], tuple[str, str]]] = []
        total = len(records)
        done = 0
        for start in range(0, total, BATCH):
            batch = records[start : start + BATCH]

            def tx(
                conn: Connection, principal: Principal, batch: list[tuple[int, str, Any]] = batch, done: int = done
            ) -> list[tuple[str, Any]]:
                bulk = PlainBulk(
                    self.lessons, conn, principal, [rec for _, kind, rec in batch if kind == "plain"], restore
                )
                replays = RestoreBulk(
                    conn, principal, [rec for _, kind, rec in batch if kind == "lesson"], restore, supersessions
                )
                outcomes: list[tuple[str, Any]] = []
                lim, _ = limits.effective(conn, self.settings, principal.tenant_id)
                for lineno, kind, rec in batch:
                    try:
                        if lim.max_value_bytes:  # every value a record would store, versions included
                            for value in values_of(kind, rec):
                                limits.check_value(conn, self.settings, principal, value)
                        # The two lanes flush in turn, so lessons are written (and audited) in file order.
                        if kind == "plain" and bulk.can_create(rec):
                            replays.flush()
                            bulk.add(rec)
                            outcomes.append(("created", None))
                            continue
                        if kind == "lesson" and replays.can_create(rec):
                            bulk.flush()
                            replays.add(rec)
                            outcomes.append(("created", None))
                            continue
                        bulk.flush()
                        replays.flush()
                        outcomes.append(self._import_one(conn, principal, kind, rec, supersessions, restore))
                        if kind == "plain":
                            bulk.touched(rec)
                        elif kind == "lesson":
                            replays.touched(rec)
                        elif kind == "tombstone":
                            # It may refuse records after it, which the lanes' one look at the
                            # tombstones did not see: the rest of the batch takes the general path
                            # (an export lists tombstones after every lesson, so this costs little).
                            bulk.enabled = replays.enabled = False
                    except CairnError as exc:
                        if exc.code not in ("TOMBSTONED", "CONFLICT", "FORBIDDEN", "LIMIT"):
                            raise
                        outcomes.append(("refused", {"line": lineno, "code": exc.code, "message": exc.message}))
                bulk.flush()
                replays.flush()
                # The tenant's lesson limit holds for imports too, checked per batch in its own
                # transaction: a batch that would cross it is rolled back whole; earlier batches
                # stay (an import is idempotent: rerun it once the limit is raised).
                if lim.max_lessons:
                    held = conn.execute(
                        select(func.count()).where(lessons.c.tenant_id == principal.tenant_id)
                    ).scalar_one()
                    if held > lim.max_lessons:
                        raise CairnError(
                            "LIMIT",
                            f"importing line {batch[0][0]} onwards would bring this store to {held} lessons; its "
                            f"limit is {lim.max_lessons}. {done} record(s) before it were imported; raise the "
                            "limit (cairn limits set) or archive and purge lessons, then rerun the import",
                            {"limit": "max_lessons", "allowed": lim.max_lessons, "got": held, "imported": done},
                        )
                return outcomes

            for outcome, info in write_tx(self.store, principal, tx):
                if outcome == "refused":
                    refused.append(info)
                else:
                    counts[outcome] += 1
            done += len(batch)
            if progress:
                progress(done, total)
        if supersessions:
            write_tx(self.store, principal, lambda conn, acting: _link_supersessions(conn, acting, supersessions))
        return {**counts, "refused": refused, "records": total, "restore": restore}

    def _import_one(
        self,
        conn: Connection,
        principal: Principal,
        kind: str,
        rec: Any,
        supersessions: list[tuple[tuple[str, str], tuple[str, str]]],
        restore: bool,
    ) -> tuple[str, Any]:
        now = utcnow()
        level = ADMIN if restore else WRITE
        if kind == "plain":
            principal.require(level, rec.scope)
            result = self.lessons.write_in(conn, principal, rec, import_mode=True)
            return ("unchanged" if result["action"] in ("unchanged", "recurred") else result["action"], None)
        if kind == "lesson":
            lesson, versions = rec
            principal.require(level, lesson["scope"])
            existing = fetch(conn, principal, lesson["scope"], lesson["key"])
            last = versions[-1]
            if existing is not None:
                same = existing["content_hash"] == last["content_hash"]
                if same and (not restore or existing["version"] == last["version"]):
                    return ("unchanged", None)
                raise CairnError(
                    "CONFLICT",
                    f"{lesson['scope']} {lesson['key']} already exists with a different history "
                    f"(version {existing['version']} here, {last['version']} in the file)",
                )
            if not restore and last["trust"] == "rejected":
                raise CairnError(
                    "FORBIDDEN",
                    f"{lesson['scope']} {lesson['key']} is a rejected lesson: only an admin's import --restore "
                    "brings rejected lessons back (its tombstone, when the file has it, is imported either way)",
                )
            if last["trust"] != "rejected":
                check_tombstones(
                    conn, principal, last["value"], lesson["scope"], lesson["key"], chash=last["content_hash"]
                )
            if restore:
                replay(conn, principal, lesson, versions, now)
            else:
                twin = self.lessons.same_content_in_scope(conn, principal, lesson["scope"], last["content_hash"])
                if twin is not None:
                    return ("unchanged", None)
                state = _claimed_state(principal, lesson, versions, now)
                detail: dict[str, Any] = {"claimed": True, "versions": len(versions)}
                hold = paraphrase.hold_for(conn, principal, last["value"])
                if hold is not None:  # restates forgotten content: held, as a write would be
                    state["trust"] = HELD
                    detail.update(hold.detail())
                apply(conn, principal, None, state, "import", now, detail=detail)
            if lesson.get("superseded_by"):
                sb = lesson["superseded_by"]
                supersessions.append(((lesson["scope"], lesson["key"]), (sb["scope"], sb["key"])))
            return ("created", None)
        if kind == "tombstone":
            principal.require(level, rec["scope"])
            values = dict(rec)
            match = [
                tombstones.c.tenant_id == principal.tenant_id,
                tombstones.c.content_hash == rec["content_hash"],
                tombstones.c.scope == rec["scope"],
                tombstones.c.key == rec["key"],
            ]
            claims = None
            if restore:
                match.append(tombstones.c.created_at == rec["created_at"])
            else:
                # Who forgot it and when are the file's word: the row says who imported it, when.
                lifted = rec["lifted_at"] is not None
                match.append(tombstones.c.lifted_at.is_not(None) if lifted else tombstones.c.lifted_at.is_(None))
                claims = {
                    k: _t(v) if isinstance(v, datetime) else v
                    for k, v in rec.items()
                    if k in ("created_at", "created_by", "lifted_at", "lifted_by") and v is not None
                }
                values.update(created_at=now, created_by=principal.actor)
                if lifted:
                    values.update(lifted_at=now, lifted_by=principal.actor)
            if conn.execute(select(tombstones.c.id).where(*match)).first():
                return ("unchanged", None)
            target = fetch(conn, principal, rec["scope"], rec["key"])
            if values["identity"] is None and target is not None:  # an older export: the text may be here
                values["identity"] = forgotten_identity(conn, principal, target["id"], rec["content_hash"])
            tid = conn.execute(
                insert(tombstones).values(
                    tenant_id=principal.tenant_id, lesson_id=target["id"] if target else None, **values
                )
            ).inserted_primary_key[0]
            detail: dict[str, Any] = {"tombstone_id": tid, "lifted": rec["lifted_at"] is not None}
            if restore:
                detail["restore"] = True
            else:
                detail["claimed"] = claims
            audit.record(
                conn,
                principal,
                "import-tombstone",
                lesson_id=target["id"] if target else None,
                scope=rec["scope"],
                key=rec["key"],
                hash_before=rec["content_hash"],
                detail=detail,
                at=now,
                state_hash=state_proof.tombstone_read_back(conn, principal.tenant_id, tid),
            )
            return ("tombstones", None)
        # link
        principal.require(level, rec["src"][0])
        src = fetch(conn, principal, *rec["src"])
        dst = fetch(conn, principal, *rec["dst"])
        if src is None or dst is None:
            raise CairnError("CONFLICT", f"link endpoints not in the store: {rec['src']} -> {rec['dst']}")
        exists = conn.execute(
            select(links.c.id).where(
                links.c.src_id == src["id"], links.c.dst_id == dst["id"], links.c.rel == rec["rel"]
            )
        ).first()
        if exists:
            return ("unchanged", None)
        conn.execute(
            insert(links).values(
                tenant_id=principal.tenant_id,
                src_id=src["id"],
                dst_id=dst["id"],
                rel=rec["rel"],
                created_at=rec["created_at"] if restore else now,
                created_by=rec["created_by"] if restore else principal.actor,
            )
        )
        link_detail: dict[str, Any] = {"rel": rec["rel"], "to": {"scope": dst["scope"], "key": dst["key"]}}
        link_detail.update({"imported": True, "restore": True} if restore else {"imported": True})
        audit.record_lesson(conn, principal, "link", src, detail=link_detail, at=now)
        return ("links", None)


def _claimed_state(
    principal: Principal, lesson: dict[str, Any], versions: list[dict[str, Any]], now: datetime
) -> dict[str, Any]:
    """A lesson record landed without a restore: its data, the importer's authority, its claims kept.

    Data is the text and what qualifies it (tags, kind, agent, trigger, url, valid time, expiry, an
    archived lesson stays out of reads). Authority — trust, origin, author, counters, who and when —
    is the importer's and "now"; what the record said about those is kept in ``claimed``.
    """
    last = versions[-1]
    claims = {
        "origin": lesson["origin"],
        "author": lesson.get("author"),
        "created_by": lesson["created_by"],
        "created_at": _t(lesson["created_at"]),
        "updated_by": last["actor"],
        "updated_at": _t(last["recorded_at"]),
        "trust": last["trust"],
        "seen_count": last["seen_count"],
        "helped_count": last["helped_count"],
        "not_helped_count": last["not_helped_count"],
        "versions": len(versions),
        "archived_at": _t(lesson.get("archived_at")),
        "claimed": lesson.get("claimed_by_file"),
    }
    return {
        "scope": lesson["scope"],
        "key": lesson["key"],
        "value": last["value"],
        "tags": last["tags"],
        "kind": last["kind"],
        "source_agent": last["source_agent"],
        "trigger": last["trigger"],
        "origin": "import",
        "author": principal.actor,
        "url": lesson.get("url"),
        "trust": "candidate",
        "seen_count": 1,
        "helped_count": 0,
        "not_helped_count": 0,
        "valid_from": last["valid_from"],
        "valid_to": last["valid_to"],
        "expires_at": last["expires_at"],
        "archived_at": now if lesson.get("archived_at") else None,
        "superseded_by": None,
        "content_hash": last["content_hash"],
        "claimed": json.dumps({k: v for k, v in claims.items() if v is not None}, ensure_ascii=False),
    }


def _link_supersessions(
    conn: Connection, principal: Principal, pairs: list[tuple[tuple[str, str], tuple[str, str]]]
) -> None:
    """Restore ``superseded_by`` pointers once both ends exist (they may arrive in either order).

    The old lesson leaves the active set here, so it leaves the search indexes in the same
    transaction, and the change gets its audit row (which is also how ranking indexes in other
    processes learn that it is no longer eligible).
    """
    now = utcnow()
    for old_addr, new_addr in pairs:
        old, new = fetch(conn, principal, *old_addr), fetch(conn, principal, *new_addr)
        if old is None or new is None or old["superseded_by"] is not None:
            continue
        conn.execute(
            update(lessons)
            .where(and_(lessons.c.tenant_id == principal.tenant_id, lessons.c.id == old["id"]))
            .values(superseded_by=new["id"])
        )
        indexing.drop(conn, old["id"])
        audit.record_lesson(
            conn,
            principal,
            "import-supersede",
            old,
            hash_before=old["content_hash"],
            detail={"superseded_by": {"scope": new["scope"], "key": new["key"]}},
            at=now,
            state_hash=state_proof.read_back(conn, principal.tenant_id, old["id"])["state_hash"],
        )
