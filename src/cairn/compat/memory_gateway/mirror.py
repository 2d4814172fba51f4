"""The Cairn store beside the corpus: every topic is a lesson, every change a service operation.

The store is ``<corpus>/.gateway/cairn.db`` (docs/memory-gateway.md says why there). A topic
``type/name`` is the lesson ``project::type.name`` / ``type::name``: one scope per topic, because
Cairn treats the same text in one scope as one lesson seen again, while the corpus may hold two
topics with the same body. Tombstones are checked across scopes, so a forgotten body stays
refused under any other name. The topic's type is the lesson's kind; its description is the
lesson's trigger; ``url`` is the topic file, relative to the corpus.

Nothing here decides a rule: writes, supersession, archive, restore, forget, history and search
are the service's own operations, one transaction each, with its tombstones, versions and audit.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.compat.memory_gateway.corpus import STATE_DIR

if TYPE_CHECKING:
    from cairn.library import Memory

DB_FILE = "cairn.db"
KIND_OF = {"user": "preference", "feedback": "lesson", "project": "fact", "reference": "reference"}
_SCOPE_NAME_MAX = 100  # core.scope.MAX_NAME_CHARS


def address(slug: str) -> tuple[str, str]:
    """(scope, key) of a topic. Long names keep a readable prefix and a hash (scope names are bounded)."""
    type_, stem = slug.split("/", 1)
    name = f"{type_}.{stem}"
    if len(name) > _SCOPE_NAME_MAX:
        name = f"{name[:80]}.{hashlib.sha256(stem.encode()).hexdigest()[:16]}"
    return f"project::{name}", f"{type_}::{stem}"


def slug_of(key: str) -> str | None:
    type_, sep, stem = key.partition("::")
    return f"{type_}/{stem}" if sep and type_ in KIND_OF else None


class Mirror:
    """One open store for one corpus, as the local account (``CAIRN_TOKEN`` does not apply)."""

    def __init__(self, corpus_root: Path) -> None:
        import cairn.library

        state = corpus_root / STATE_DIR
        self.memory: Memory = cairn.library.open(home=state, db=f"sqlite:///{state / DB_FILE}", token="", session="")
        self.svc = self.memory.service
        self.p = self.memory.principal

    def close(self) -> None:
        self.memory.close()

    def row(self, slug: str) -> dict[str, Any] | None:
        """The lesson row of a topic in any state, or None."""
        from cairn.service.records import fetch

        scope, key = address(slug)
        return self.svc.store.run(lambda conn: fetch(conn, self.p, scope, key), write=False, **self.p.db_vars)

    @staticmethod
    def same(row: dict[str, Any] | None, body: str) -> bool:
        from cairn.core.content import content_hash

        return row is not None and row["content_hash"] == content_hash(body.rstrip())

    def _options(self, slug: str, description: str) -> dict[str, Any]:
        type_ = slug.split("/", 1)[0]
        return {"kind": KIND_OF[type_], "trigger": description[:500] or None, "url": f"{slug}.md"}

    def put(self, slug: str, description: str, body: str) -> None:
        """Make the topic's lesson hold ``body`` and be active (create, edit, or bring back)."""
        scope, key = address(slug)
        row = self.row(slug)
        if row is None or not self.same(row, body) or row["trust"] == "rejected" or row["superseded_by"] is not None:
            self.svc.write(self.p, scope, key, body, **self._options(slug, description))
            row = self.row(slug)
        if row is not None and row["archived_at"] is not None:
            self.svc.restore(self.p, scope, key)

    def supersede(self, new: str, description: str, body: str, old: str) -> None:
        """The new topic replaces ``old`` (the same slug: a new version; another: linked and retired)."""
        scope, key = address(new)
        old_row = self.row(old)
        new_row = self.row(new)
        if old_row is None or old_row["trust"] == "rejected":
            self.put(new, description, body)
            return
        if old == new:
            if self.same(new_row, body) and new_row is not None and new_row["archived_at"] is None:
                return
        elif new_row is not None and self.same(new_row, body) and old_row["superseded_by"] == new_row["id"]:
            return
        if old != new and old_row["superseded_by"] is not None:
            self.put(new, description, body)
            return
        self.svc.supersede(self.p, scope, key, body, supersedes=address(old), **self._options(new, description))
        row = self.row(new)
        if row is not None and row["archived_at"] is not None:
            self.svc.restore(self.p, scope, key)

    def archive(self, slug: str) -> None:
        row = self.row(slug)
        if row is not None and row["archived_at"] is None and row["trust"] != "rejected":
            self.svc.archive(self.p, *address(slug))

    def forget(self, slug: str, reason: str) -> None:
        """Reject and tombstone the topic's lesson, then erase its text from the store (two steps, each
        idempotent: a replay after a crash between them finishes the erasure)."""
        row = self.row(slug)
        if row is None:
            return
        scope, key = address(slug)
        if row["trust"] != "rejected":
            self.svc.forget(self.p, scope, key, reason)
        self.svc.erase_forgotten(self.p, scope, key)

    def history(self, slug: str) -> dict[str, Any]:
        return self.svc.history(self.p, *address(slug))

    def search(self, query: str, limit: int) -> list[dict[str, Any]]:
        return self.svc.search(self.p, query, limit=limit)["results"]

    def active(self) -> dict[str, dict[str, Any]]:
        """Every active topic lesson by slug (the reconciliation in ``index``)."""
        from sqlalchemy import select

        from cairn.core.timeparse import utcnow
        from cairn.service.records import active_clause
        from cairn.store.schema import lessons

        def tx(conn: Any) -> dict[str, dict[str, Any]]:
            q = select(lessons.c.key, lessons.c.content_hash).where(
                lessons.c.tenant_id == self.p.tenant_id, active_clause(utcnow())
            )
            out = {}
            for r in conn.execute(q).mappings():
                slug = slug_of(r["key"])
                if slug is not None:
                    out[slug] = dict(r)
            return out

        return self.svc.store.run(tx, write=False, **self.p.db_vars)
