"""Extraction: candidate lessons from a recorded turn, guarded against what was erased meanwhile.

A job reads the turn (one read transaction: its text, the conversation's source revision, the
tenant's deletion epoch), asks the model (``ask``: the gateway's call to its upstream, outside any
transaction), then writes in one transaction that first re-checks both snapshots:

* **source revision** — the conversation changed since the read (a message or turn forgotten, a turn
  added, the conversation erased): what was computed is discarded and the job recomputes once from a
  fresh read; if it changed again, nothing is written.
* **deletion epoch** — something else in the tenant was erased (a lesson forgotten or purged, another
  conversation forgotten): nothing is written; the job does not retry.

Each time a guard fires, a ``gateway-guard`` audit row names it (``source_revision`` or
``deletion_epoch``) with the conversation and turn. What survives is written through the ordinary
write path as a *candidate* (tombstones, recurrence and limits apply) with origin ``gateway``, the
conversation and turn in its ``trigger``, and a ``conversation_lessons`` row linking it to the turn
so forgetting the turn can find it. A proposal whose address already holds another lesson is
skipped: a model's proposal never edits an existing lesson.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from cairn.core import extraction as core
from cairn.core.gateway import Attribution
from cairn.core.principal import WRITE, Principal
from cairn.core.timeparse import utcnow
from cairn.errors import CairnError
from cairn.service import audit, epoch
from cairn.service.conversations import GUARD_ACTION
from cairn.service.records import fetch
from cairn.service.rows import tenant_row
from cairn.service.tx import write_tx
from cairn.service.write_input import make_write
from cairn.store.schema import conversation_lessons, conversation_messages, conversation_turns, conversations

if TYPE_CHECKING:
    from cairn.service.api import Cairn

REVISION_GUARD = "source_revision"
SOURCE_AGENT = "cairn gateway extraction"

# ask(system prompt, user message, conversation row) -> the model's answer text
Ask = Callable[[str, str, dict[str, Any]], str]


@dataclass(frozen=True)
class Snapshot:
    conversation: dict[str, Any]
    transcript: list[tuple[str, str]]
    revision: int
    epoch: int


class Extraction:
    """Extraction jobs over the service facade; ``before_write`` is a test hook (an interleaving)."""

    def __init__(self, cairn: Cairn, before_write: Callable[[int], None] | None = None) -> None:
        self.cairn = cairn
        self.before_write = before_write  # called with the attempt number (1, 2) between ask and write

    def read(self, principal: Principal, conversation_id: int, turn: int) -> Snapshot | None:
        """The turn's kept messages and both snapshots, or None when the turn is gone."""

        def tx(conn: Connection) -> Snapshot | None:
            conv = tenant_row(conn, principal, conversations, id=conversation_id)
            if conv is None:
                return None
            rows = conn.execute(
                select(conversation_messages.c.role, conversation_messages.c.content)
                .where(
                    conversation_messages.c.tenant_id == principal.tenant_id,
                    conversation_messages.c.conversation_id == conversation_id,
                    conversation_messages.c.turn == turn,
                )
                .order_by(conversation_messages.c.position)
            ).all()
            return Snapshot(
                dict(conv), [(r, c) for r, c in rows], conv["revision"], epoch.current(conn, principal.tenant_id)
            )

        return self.cairn.store.run(tx, write=False, **principal.db_vars)

    def run(self, principal: Principal, conversation_id: int, turn: int, ask: Ask) -> dict[str, Any]:
        """Extract from one turn: read, ask, write under both guards; recompute once on a revision change."""
        principal.require(WRITE)
        guards: list[str] = []
        for attempt in (1, 2):
            snap = self.read(principal, conversation_id, turn)
            if snap is None or not any(role == "user" for role, _ in snap.transcript):
                return {"written": [], "skipped": [], "guards": guards, "reason": "turn gone or empty"}
            answer = ask(core.PROMPT, core.request_text(snap.transcript), snap.conversation)
            proposals = core.parse(answer)
            if self.before_write is not None:
                self.before_write(attempt)
            result = self._write(principal, snap, turn, proposals, last=attempt == 2)
            guards += result.pop("guards")
            if result.get("retry"):
                continue
            return {**result, "guards": guards}
        return {"written": [], "skipped": [], "guards": guards, "reason": "source changed twice"}

    def _write(
        self, principal: Principal, snap: Snapshot, turn: int, proposals: list[core.Proposal], *, last: bool
    ) -> dict[str, Any]:
        conv = snap.conversation
        where = Attribution(conv["repo"], conv["branch"], conv["project"], "headers")
        scope = where.narrowest()
        if scope is None:  # never recorded unattributed; kept as the closed default regardless
            return {"written": [], "skipped": [], "guards": []}

        def tx(conn: Connection, acting: Principal) -> dict[str, Any]:
            now = utcnow()
            detail = {"conversation": conv["id"], "turn": turn}
            revision = conn.execute(
                select(conversations.c.revision).where(
                    conversations.c.tenant_id == principal.tenant_id, conversations.c.id == conv["id"]
                )
            ).scalar()
            if revision != snap.revision:
                audit.record(
                    conn, principal, GUARD_ACTION, at=now,
                    detail={**detail, "guard": REVISION_GUARD, "discarded": "extraction",
                            "then": "nothing" if last or revision is None else "recompute"},
                )  # fmt: skip
                return {"written": [], "skipped": [], "guards": [REVISION_GUARD], "retry": revision is not None}
            if not epoch.unchanged(conn, principal.tenant_id, snap.epoch):
                audit.record(
                    conn, principal, GUARD_ACTION, at=now,
                    detail={**detail, "guard": epoch.GUARD, "discarded": "extraction", "then": "nothing"},
                )  # fmt: skip
                return {"written": [], "skipped": [], "guards": [epoch.GUARD]}
            written, skipped = [], []
            for p in proposals:
                existing = fetch(conn, principal, scope, p.key)
                if existing is not None and existing["value"] != p.value:
                    skipped.append({"key": p.key, "reason": "address holds another lesson"})
                    continue
                inp = make_write(
                    principal, scope, p.key, p.value, origin="gateway", source_agent=SOURCE_AGENT,
                    trigger=f"conversation {conv['id']} turn {turn}",
                )  # fmt: skip
                try:
                    with conn.begin_nested():
                        out = self.cairn.services.lessons.write_in(conn, principal, inp)  # the one write path
                except CairnError as exc:  # a tombstone or a limit refuses this one; the others go on
                    skipped.append({"key": p.key, "reason": exc.code})
                    continue
                # A recurrence of the same content lands on the lesson that holds it, at its own key.
                shown = out.get("lesson") or {}
                lesson = fetch(conn, principal, shown.get("scope", scope), shown.get("key", p.key)) or {}
                lesson_id = lesson.get("id")
                if lesson_id is None:
                    skipped.append({"key": p.key, "reason": str(out.get("action", "unchanged"))})
                    continue
                linked = conn.execute(
                    select(conversation_lessons.c.lesson_id).where(
                        conversation_lessons.c.tenant_id == principal.tenant_id,
                        conversation_lessons.c.lesson_id == lesson_id,
                        conversation_lessons.c.conversation_id == conv["id"],
                        conversation_lessons.c.turn == turn,
                    )
                ).first()
                if linked is None:
                    conn.execute(
                        insert(conversation_lessons).values(
                            tenant_id=principal.tenant_id, lesson_id=lesson_id, conversation_id=conv["id"], turn=turn
                        )
                    )
                written.append({"scope": lesson["scope"], "key": lesson["key"], "action": out.get("action")})
            conn.execute(
                update(conversation_turns)
                .where(
                    conversation_turns.c.tenant_id == principal.tenant_id,
                    conversation_turns.c.conversation_id == conv["id"],
                    conversation_turns.c.turn == turn,
                )
                .values(extracted_at=now)
            )
            return {"written": written, "skipped": skipped, "guards": []}

        return write_tx(self.cairn.store, principal, tx)
