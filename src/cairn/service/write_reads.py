"""What a lesson write reads about its tenant before it decides, in one statement.

Every write asks four small questions of its tenant inside its transaction: does a live
tombstone match this content or address (``tombstones.check_tombstones``), what are the tenant's
limit overrides (``limits.check_write``), does the tenant hold tombstone vectors for the
configured model (``paraphrase.hold_for``), and where does its audit chain end
(``audit.record_many``; read after the write lock, and the write appends no audit row before its
own, so the head is still the head when the row is appended). Each module owns its question (the columns are defined
there); this module only asks the three at once, because a statement's round through the SQL layer
costs more than answering any of them. The answers are then handed to the same checks, which
decide exactly as when they read for themselves.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from cairn.core.principal import Principal
from cairn.service import audit, indexing, limits, paraphrase, tombstones

# Built once: every write runs it.
_WRITE_READS = select(
    tombstones.LIVE_MATCH_ID, *limits.OVERRIDE_COLUMNS, *paraphrase.STAMP_COLUMNS, *audit.HEAD_COLUMNS
)


def read(conn: Connection, principal: Principal, scope: str, key: str, chash: str, identity: str) -> Any:
    """The row of answers: ``tombstone`` (a matching live tombstone's id, or None), the limit
    overrides by name, ``epoch`` / ``tombstone_vectors`` (``paraphrase.STAMP_COLUMNS``) and
    ``audit_seq`` / ``audit_hash`` (``audit.HEAD_COLUMNS``)."""
    params = {
        "tenant": principal.tenant_id,
        "hash": chash,
        "identity": identity,
        "scope": scope,
        "key": key,
        "model": indexing.configured_model(),
    }
    return conn.execute(_WRITE_READS, params).mappings().one()


def stamp(row: Any) -> tuple[Any, Any]:
    """The paraphrase stamp out of the row, as ``paraphrase.hold_for`` takes it."""
    return (row["epoch"], row["tombstone_vectors"])


def audit_head(row: Any) -> tuple[Any, Any]:
    """The audit chain's head out of the row, as ``audit.record_many`` takes it."""
    return (row["audit_seq"], row["audit_hash"])
