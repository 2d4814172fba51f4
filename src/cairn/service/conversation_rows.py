"""The conversation ledger's rows as the gateway's service reads them: one conversation (if the
caller may see it), a thread's forget marks, the identities already forgotten, the public form."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from cairn.core import gateway as core
from cairn.core.gateway import Attribution
from cairn.core.principal import Principal
from cairn.core.timeparse import format_time
from cairn.errors import CairnError
from cairn.service.rows import tenant_row
from cairn.store.schema import (
    conversation_tombstones,
    conversations,
)

MAX_MESSAGE_CHARS = 256 * 1024  # a message's recorded text; beyond it the end is kept (errors end there)


def conversation_row(conn: Connection, principal: Principal, conversation_id: int) -> dict[str, Any]:
    row = tenant_row(conn, principal, conversations, id=conversation_id)
    if row is None:
        raise CairnError("NOT_FOUND", f"no conversation {conversation_id} (cairn conversation list)")
    return dict(row)


def visible(principal: Principal, conv: Any) -> bool:
    where = Attribution(conv["repo"], conv["branch"], conv["project"], "headers")
    return principal.can_see(where.narrowest() or "global")


def thread_marks(conn: Connection, principal: Principal, thread: str) -> dict[str, Any]:
    rows = conn.execute(
        select(conversation_tombstones.c.kind, conversation_tombstones.c.position).where(
            conversation_tombstones.c.tenant_id == principal.tenant_id, conversation_tombstones.c.thread == thread
        )
    ).all()
    return {
        "conversation": any(kind == "conversation" for kind, _ in rows),
        "positions": {pos for kind, pos in rows if kind == "message" and pos is not None},
    }


def forgotten_identities(conn: Connection, principal: Principal, rows: list[tuple[int, tuple[str, str]]]) -> set[str]:
    """Which of these messages' (and their sentences') identities are tombstoned."""
    wanted: set[str] = set()
    for _, (_, text) in rows:
        wanted |= core.identities(text[-MAX_MESSAGE_CHARS:])
    if not wanted:
        return set()
    found: set[str] = set()
    ordered = sorted(wanted)
    for i in range(0, len(ordered), 500):
        found.update(
            conn.execute(
                select(conversation_tombstones.c.identity).where(
                    conversation_tombstones.c.tenant_id == principal.tenant_id,
                    conversation_tombstones.c.kind == "content",
                    conversation_tombstones.c.identity.in_(ordered[i : i + 500]),
                )
            ).scalars()
        )
    return found


def conversation_public(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"],
        "protocol": row["protocol"],
        "model": row["model"],
        "repo": row["repo"],
        "branch": row["branch"],
        "project": row["project"],
        "turns": row["turns"],
        "messages": row["kept"],
        "revision": row["revision"],
        "created_at": format_time(row["created_at"]),
        "updated_at": format_time(row["updated_at"]),
        "created_by": row["created_by"],
    }
