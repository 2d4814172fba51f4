"""The memory gateway's service side: what a request is given to weigh, the conversation ledger,
and forgetting a conversation, a turn or a message for real.

A composed service object (it holds the ``Cairn`` facade it reads and writes through), so the
gateway surface calls one method per step and holds no rule: attribution, the block's shape, thread
names and sentence identities are ``core.gateway``'s; the context block and recall are the
operations every other surface calls, with the caller's principal.

Forgetting (``forget``) happens in one transaction: the messages' rows are deleted (the ledger holds
the only copy of a message's text), tombstones are written at the granularity asked for *and* on
the content (each sentence's identity), candidates extracted only from what is forgotten are archived
or purged, the conversation's source revision and the tenant's deletion epoch move, and one audit
row names every message, position, tombstone and lesson it touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from cairn.core import gateway as core
from cairn.core.content import content_hash, content_identity
from cairn.core.gateway import Attribution, memory_block
from cairn.core.lesson import CANDIDATE_FATES, HELD, MAX_PAGE
from cairn.core.principal import READ, WRITE, Principal
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.service import audit, epoch, rank_cache
from cairn.service.conversation_rows import (
    MAX_MESSAGE_CHARS,
    conversation_public,
    conversation_row,
    forgotten_identities,
    thread_marks,
    visible,
)
from cairn.service.mutate import apply
from cairn.service.purge import erase
from cairn.service.records import fetch_id
from cairn.service.rows import tenant_row
from cairn.service.tx import write_tx
from cairn.store.dialect import ONE_ROW
from cairn.store.engine import mark_erased
from cairn.store.schema import (
    conversation_lessons,
    conversation_messages,
    conversation_tombstones,
    conversation_turns,
    conversations,
    tombstones,
)

if TYPE_CHECKING:
    from cairn.service.api import Cairn

# The end of a long user turn holds the failure (recall reads at most this much itself).
RECALL_TEXT_MAX = 8000
FORGET_ACTION = "conversation-forget"
GUARD_ACTION = "gateway-guard"


@dataclass(frozen=True)
class Memory:
    """What one request gets: the block (``None``: send the request unchanged) and what is in it."""

    block: str | None
    loaded: int
    recalled: int
    scopes: list[str]


@dataclass(eq=False, repr=False)
class Conversations:
    """Gateway operations over the service facade (one read transaction per call)."""

    cairn: Cairn

    def memory(self, principal: Principal, where: Attribution, latest_turn: str | None, *, failed: bool) -> Memory:
        """The context block for ``where`` plus, when the latest user turn ``failed``, recall on it.

        An unknown attribution reads ``global`` only: no project's lessons reach a conversation nobody
        attributed. ``failed`` is the surface's reading of the turn (``hosts.protocols.looks_failed``,
        the one definition hooks use too).
        """
        principal.require(READ)
        ctx: dict[str, Any] = self.cairn.context(principal, repo=where.repo, branch=where.branch, project=where.project)
        recall_text = ""
        recalled = 0
        if failed and latest_turn and latest_turn.strip():
            found = self.cairn.recall(
                principal, latest_turn[-RECALL_TEXT_MAX:], repo=where.repo, branch=where.branch, project=where.project
            )
            recall_text = found["text"]
            recalled = len(found["lessons"])
        block = memory_block(ctx["text"], ctx["loaded"], recall_text)
        return Memory(block, ctx["loaded"] if block else 0, recalled, list(ctx["ladder"]))

    # -- the ledger ---------------------------------------------------------------------------------
    def epoch(self, principal: Principal) -> int:
        """The tenant's deletion epoch now: a request snapshots it before it relays anything."""
        return self.cairn.store.run(
            lambda conn: epoch.current(conn, principal.tenant_id), write=False, **principal.db_vars
        )

    def record(
        self,
        principal: Principal,
        where: Attribution,
        *,
        protocol: str,
        thread: str,
        model: str | None,
        messages: list[tuple[str, str]],
        answer: str | None,
        snapshot: int,
    ) -> dict[str, Any]:
        """Record one turn: the request's messages not seen before, and the answer, in one write.

        Writes nothing when: the attribution is unknown (fails closed); the thread, or the position a
        message would take, is tombstoned (a replay of something forgotten); every new message was
        seen already (a retry or regeneration); or the tenant's deletion epoch moved since ``snapshot``
        (something was erased while this request streamed: the guard is named in the audit). Each
        sentence whose identity is tombstoned is stored as ``[forgotten]``.
        """
        if not where.known:
            return {"recorded": False, "reason": "unknown attribution"}
        principal.require(WRITE)

        def tx(conn: Connection, acting: Principal) -> dict[str, Any]:
            now = utcnow()
            if not epoch.unchanged(conn, principal.tenant_id, snapshot):
                audit.record(
                    conn, principal, GUARD_ACTION, detail={"guard": epoch.GUARD, "thread": thread, "discarded": "turn"}
                )
                return {"recorded": False, "reason": "guard", "guard": epoch.GUARD}
            marks = thread_marks(conn, principal, thread)
            if marks["conversation"]:
                return {"recorded": False, "reason": "forgotten conversation"}
            conv = tenant_row(conn, principal, conversations, thread=thread)
            seen = conv["positions"] if conv else 0
            fresh = list(enumerate(messages))[seen:]
            if not fresh:
                return {"recorded": False, "reason": "replay"}
            if conv is None:
                conv_id = conn.execute(
                    insert(conversations).values(
                        tenant_id=principal.tenant_id, thread=thread, protocol=protocol, model=model,
                        repo=where.repo, branch=where.branch, project=where.project, revision=0, turns=0,
                        positions=0, created_at=now, updated_at=now, created_by=principal.actor,
                    )
                ).inserted_primary_key[0]  # fmt: skip
                turns = 0
            else:
                conv_id, turns = conv["id"], conv["turns"]
            turn = turns + 1
            rows = fresh + ([(len(messages), ("assistant", answer))] if answer is not None else [])
            forgotten = forgotten_identities(conn, principal, rows)
            kept = []
            for position, (role, text) in rows:
                if position in marks["positions"]:
                    continue
                text = text[-MAX_MESSAGE_CHARS:]
                shown = core.redact(text, forgotten)
                if shown is None:
                    continue
                kept.append(
                    {"tenant_id": principal.tenant_id, "conversation_id": conv_id, "turn": turn, "position": position,
                     "role": role, "content": shown, "created_at": now}
                )  # fmt: skip
            if kept:
                conn.execute(insert(conversation_messages), kept)
            conn.execute(
                insert(conversation_turns).values(
                    tenant_id=principal.tenant_id, conversation_id=conv_id, turn=turn, created_at=now
                )
            )
            conn.execute(
                update(conversations)
                .where(conversations.c.tenant_id == principal.tenant_id, conversations.c.id == conv_id)
                .values(
                    turns=turn,
                    positions=len(messages) + (1 if answer is not None else 0),
                    revision=conversations.c.revision + 1,
                    updated_at=now,
                    model=model,
                )
            )
            return {"recorded": True, "conversation": conv_id, "turn": turn, "messages": len(kept)}

        return write_tx(self.cairn.store, principal, tx)

    def list(self, principal: Principal, *, limit: int = 100) -> dict[str, Any]:  # noqa: A003 - the verb
        """The tenant's conversations, most recently active first (those attributed to scopes the
        caller may not see left out)."""
        principal.require(READ)
        if not 1 <= limit <= MAX_PAGE:
            raise CairnError("INVALID_INPUT", f"limit must be between 1 and {MAX_PAGE}, got {limit}")

        def tx(conn: Connection) -> dict[str, Any]:
            counts = (
                select(conversation_messages.c.conversation_id, func.count().label("n"))
                .where(conversation_messages.c.tenant_id == principal.tenant_id)
                .group_by(conversation_messages.c.conversation_id)
                .subquery()
            )
            rows = (
                conn.execute(
                    select(conversations, func.coalesce(counts.c.n, 0).label("kept"))
                    .outerjoin(counts, counts.c.conversation_id == conversations.c.id)
                    .where(conversations.c.tenant_id == principal.tenant_id)
                    .order_by(conversations.c.updated_at.desc(), conversations.c.id.desc())
                    .limit(limit)
                )
                .mappings()
                .all()
            )
            shown = [r for r in rows if visible(principal, r)]
            return {"conversations": [conversation_public(r) for r in shown]}

        return self.cairn.store.run(tx, write=False, **principal.db_vars)

    def show(self, principal: Principal, conversation_id: int) -> dict[str, Any]:
        """One conversation with its kept messages, turn by turn, and the candidates drawn from it."""
        principal.require(READ)

        def tx(conn: Connection) -> dict[str, Any]:
            conv = conversation_row(conn, principal, conversation_id)
            msgs = (
                conn.execute(
                    select(conversation_messages)
                    .where(
                        conversation_messages.c.tenant_id == principal.tenant_id,
                        conversation_messages.c.conversation_id == conversation_id,
                    )
                    .order_by(conversation_messages.c.position, conversation_messages.c.id)
                )
                .mappings()
                .all()
            )
            links = conn.execute(
                select(conversation_lessons.c.lesson_id, conversation_lessons.c.turn).where(
                    conversation_lessons.c.tenant_id == principal.tenant_id,
                    conversation_lessons.c.conversation_id == conversation_id,
                )
            ).all()
            derived = []
            for lesson_id, turn in links:
                row = fetch_id(conn, principal, lesson_id)
                if row is not None:
                    derived.append({"turn": turn, "scope": row["scope"], "key": row["key"], "trust": row["trust"]})
            out = conversation_public({**conv, "kept": len(msgs)})
            out["transcript"] = [
                {
                    "id": m["id"],
                    "turn": m["turn"],
                    "position": m["position"],
                    "role": m["role"],
                    "content": m["content"],
                }
                for m in msgs
            ]
            out["lessons"] = derived
            return out

        return self.cairn.store.run(tx, write=False, **principal.db_vars)

    # -- forgetting -----------------------------------------------------------------------------------
    def forget(
        self,
        principal: Principal,
        conversation_id: int | None = None,
        *,
        turn: int | None = None,
        message: int | None = None,
        everything: bool = False,
        candidates: str = "archive",
    ) -> dict[str, Any]:
        """Forget a conversation, one of its turns, or one message (or ``everything``: the reset).

        ``candidates``: what happens to candidate lessons extracted only from what is forgotten —
        ``archive`` (hidden, restorable by a person) or ``purge`` (tombstoned and erased, like
        ``cairn forget`` then ``cairn purge``). Verified lessons and candidates with another source
        are left alone; their link to the forgotten turns goes.
        """
        principal.require(WRITE)
        if candidates not in CANDIDATE_FATES:
            raise CairnError("INVALID_INPUT", f"candidates must be archive or purge; got {candidates!r}")
        if everything:
            if conversation_id is not None or turn is not None or message is not None:
                raise CairnError("INVALID_INPUT", "--all forgets every conversation; give no ID, --turn or --message")
            principal.require_account_wide("forgetting every conversation")
        elif conversation_id is None:
            raise CairnError("INVALID_INPUT", "name a conversation: cairn conversation forget ID (or --all)")
        if turn is not None and message is not None:
            raise CairnError("INVALID_INPUT", "give --turn or --message, not both")

        def tx(conn: Connection, acting: Principal) -> dict[str, Any]:
            now = utcnow()
            if everything:
                ids = (
                    conn.execute(
                        select(conversations.c.id)
                        .where(conversations.c.tenant_id == principal.tenant_id)
                        .order_by(conversations.c.id)
                    )
                    .scalars()
                    .all()
                )
                convs = [conversation_row(conn, principal, i) for i in ids]
            else:
                convs = [conversation_row(conn, principal, conversation_id)]  # type: ignore[arg-type]
            report: dict[str, Any] = {"conversations": [], "tombstones": 0, "archived": [], "purged": []}
            for conv in convs:
                if not visible(principal, conv):
                    raise CairnError("FORBIDDEN", f"conversation {conv['id']} is outside this token's scopes")
                one = self._forget_in(conn, principal, conv, turn, message, candidates, now)
                report["conversations"].append(one)
                report["tombstones"] += len(one["tombstones"])
                report["archived"] += one["archived"]
                report["purged"] += one["purged"]
            epoch.bump(conn, principal.tenant_id)
            audit.record(
                conn, principal, FORGET_ACTION, at=now,
                detail={"all": everything, "candidates": candidates, "forgotten": report["conversations"]},
            )  # fmt: skip
            return report

        result = write_tx(self.cairn.store, principal, tx)
        if result["purged"]:  # no kept ranking index outlives an erased lesson
            rank_cache.discard(self.cairn.store.url)
        return result

    def _forget_in(
        self,
        conn: Connection,
        principal: Principal,
        conv: dict[str, Any],
        turn: int | None,
        message: int | None,
        candidates: str,
        now: Any,
    ) -> dict[str, Any]:
        tenant = principal.tenant_id
        where_msgs = [
            conversation_messages.c.tenant_id == tenant,
            conversation_messages.c.conversation_id == conv["id"],
        ]
        if turn is not None:
            if not 1 <= turn <= conv["turns"]:
                raise CairnError("NOT_FOUND", f"conversation {conv['id']} has turns 1-{conv['turns']}, not {turn}")
            where_msgs.append(conversation_messages.c.turn == turn)
        if message is not None:
            where_msgs.append(conversation_messages.c.id == message)
        msgs = conn.execute(select(conversation_messages).where(*where_msgs)).mappings().all()
        if message is not None and not msgs:
            raise CairnError("NOT_FOUND", f"conversation {conv['id']} has no message {message}")
        granularity = "message" if message is not None else "turn" if turn is not None else "conversation"
        turns = sorted({m["turn"] for m in msgs}) if message is not None else [turn] if turn is not None else None
        marks: list[dict[str, Any]] = []
        base = {"tenant_id": tenant, "thread": conv["thread"], "created_at": now, "created_by": principal.actor}
        if granularity == "conversation":
            marks.append({**base, "kind": "conversation", "turn": None, "position": None, "identity": None})
        if granularity == "turn":
            marks.append({**base, "kind": "turn", "turn": turn, "position": None, "identity": None})
        for m in msgs:  # each position: a replayed request cannot put a message back there
            marks.append({**base, "kind": "message", "turn": m["turn"], "position": m["position"], "identity": None})
        have = set(
            conn.execute(
                select(conversation_tombstones.c.identity).where(
                    conversation_tombstones.c.tenant_id == tenant, conversation_tombstones.c.kind == "content"
                )
            ).scalars()
        )
        new_ids: set[str] = set()
        for m in msgs:
            new_ids |= core.identities(m["content"].replace(core.FORGOTTEN, " "))
        for identity in sorted(new_ids - have):
            marks.append(
                {**base, "kind": "content", "thread": None, "turn": None, "position": None, "identity": identity}
            )
        if marks:
            conn.execute(insert(conversation_tombstones), marks)
        conn.execute(delete(conversation_messages).where(*where_msgs))
        mark_erased(conn)  # the messages' text: no copy left in SQLite's write-ahead log either
        archived, purged = self._derived(conn, principal, conv, turns, candidates, now)
        if granularity == "conversation":
            conn.execute(
                delete(conversation_turns).where(
                    conversation_turns.c.tenant_id == tenant, conversation_turns.c.conversation_id == conv["id"]
                )
            )
            conn.execute(
                delete(conversations).where(conversations.c.tenant_id == tenant, conversations.c.id == conv["id"])
            )
        else:
            if granularity == "turn":
                conn.execute(
                    delete(conversation_turns).where(
                        conversation_turns.c.tenant_id == tenant,
                        conversation_turns.c.conversation_id == conv["id"],
                        conversation_turns.c.turn == turn,
                    )
                )
            conn.execute(
                update(conversations)
                .where(conversations.c.tenant_id == tenant, conversations.c.id == conv["id"])
                .values(revision=conversations.c.revision + 1, updated_at=now)
            )
        return {
            "conversation": conv["id"],
            "granularity": granularity,
            "turn": turn,
            "messages": [{"id": m["id"], "turn": m["turn"], "position": m["position"]} for m in msgs],
            "tombstones": [mk["kind"] if mk["kind"] != "content" else "content" for mk in marks],
            "archived": archived,
            "purged": purged,
        }

    def _derived(
        self,
        conn: Connection,
        principal: Principal,
        conv: dict[str, Any],
        turns: list[int] | None,
        candidates: str,
        now: Any,
    ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
        """Archive or purge the candidates drawn only from ``turns`` (None: the whole conversation)."""
        tenant = principal.tenant_id
        gone = [conversation_lessons.c.tenant_id == tenant, conversation_lessons.c.conversation_id == conv["id"]]
        if turns is not None:
            gone.append(conversation_lessons.c.turn.in_(turns))
        lesson_ids = sorted(set(conn.execute(select(conversation_lessons.c.lesson_id).where(*gone)).scalars()))
        conn.execute(delete(conversation_lessons).where(*gone))
        archived: list[dict[str, str]] = []
        purged: list[dict[str, str]] = []
        for lesson_id in lesson_ids:
            other = conn.execute(
                select(conversation_lessons.c.lesson_id)
                .where(conversation_lessons.c.tenant_id == tenant, conversation_lessons.c.lesson_id == lesson_id)
                .limit(ONE_ROW)
            ).first()
            row = fetch_id(conn, principal, lesson_id)
            if other is not None or row is None or row["trust"] not in ("candidate", HELD):
                continue  # another source vouches for it, a person verified it, or it is gone already
            address = {"scope": row["scope"], "key": row["key"]}
            if candidates == "archive":
                if row["archived_at"] is None:
                    apply(conn, principal, row, dict(row, archived_at=now), "archive", now,
                          detail={"reason": f"conversation {conv['id']} forgotten"})  # fmt: skip
                archived.append(address)
                continue
            identity = content_identity(row["value"])
            tomb_id = conn.execute(
                insert(tombstones).values(
                    tenant_id=tenant, content_hash=row["content_hash"] or content_hash(row["value"]),
                    identity=identity, scope=row["scope"], key=row["key"],
                    reason=f"extracted from conversation {conv['id']}, which was forgotten",
                    lesson_id=lesson_id, created_at=now, created_by=principal.actor,
                )
            ).inserted_primary_key[0]  # fmt: skip
            rejected = apply(
                conn, principal, row, dict(row, trust="rejected"), "forget", now,
                detail={"tombstone_id": tomb_id, "reason": "conversation forgotten", "identity": identity},
            )  # fmt: skip
            erased = erase(conn, principal, lesson_id)
            audit.record(
                conn, principal, "purge", lesson_id=lesson_id, scope=row["scope"], key=row["key"],
                version_before=rejected["version"], hash_before=row["content_hash"],
                detail={"sweep": "forgotten", "versions_erased": erased}, at=now,
            )  # fmt: skip
            purged.append(address)
        return archived, purged
