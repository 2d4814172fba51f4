"""Cairn as a Python library: ``cairn.open()`` gives a store with the caller's principal bound.

The CLI, the daemon and the hooks reach the service through ``cairn.runtime.local``; so does this module, so a
program that imports Cairn opens the same database with the same settings and acts as the same
account as ``cairn`` would in its place (the local account, or ``CAIRN_TOKEN``'s / ``token=``'s).
Every method is one service operation in one transaction and returns what ``--json`` prints as
``data``; a refusal raises :class:`cairn.errors.CairnError` with the same stable ``code``.

Only the verbs a program needs day to day have a method here; the rest of the service is
``memory.service``, called with ``memory.principal`` as its first argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import TracebackType

    from cairn.core.principal import Principal
    from cairn.service.api import Cairn


def open(
    home: str | Path | None = None,
    *,
    db: str | None = None,
    token: str | None = None,
    session: str | None = None,
    human: bool = False,
    cwd: str | Path | None = None,
) -> Memory:
    """Open (creating and migrating on first use) the store in ``home`` and bind who acts.

    ``home``: the Cairn home (default ``$CAIRN_HOME`` or ``~/.cairn``); ``db``: a database URL
    instead of the home's SQLite file (default ``$CAIRN_DATABASE_URL``); ``token``: act as this
    token's account (default ``$CAIRN_TOKEN``, else the local account); ``session``: the agent
    session, for recurrence (default ``$CAIRN_SESSION``); ``human``: writes are a person's (they
    start verified); ``cwd``: whose ``.cairn.toml`` applies (default: none, the home's settings).
    """
    import os

    from cairn.runtime.home import home_dir
    from cairn.runtime.local import open_service, principal_for

    session = session or os.environ.get("CAIRN_SESSION") or None
    where = Path(home_dir(home))
    svc = open_service(where, cwd=Path(cwd) if cwd is not None else None, db=db)
    try:
        principal = principal_for(svc, session=session, human=human, token=token)
    except BaseException:
        svc.store.dispose()
        raise
    return Memory(svc, principal, where)


@dataclass(eq=False, repr=False)
class Memory:
    """One open store and the principal every call acts as. Close it (or use ``with``) when done."""

    service: Cairn
    principal: Principal
    home: Path

    # -- lessons ----------------------------------------------------------------------------------
    def write(
        self,
        scope: str,
        key: str,
        value: str,
        *,
        tags: list[str] | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Create a lesson, edit it, or count a recurrence (same content): ``{"action", "lesson", …}``.

        ``options`` are the service's write options: ``kind``, ``trigger``, ``url``, ``source_agent``,
        ``ttl`` (a ``timedelta``), ``valid_from`` / ``valid_to`` (aware datetimes).
        """
        if tags is not None:
            options["tags"] = tags
        return self.service.write(self.principal, scope, key, value, **options)

    def write_many(self, items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        """Many writes at once, each with ``write``'s rules, version and audit row, in one transaction
        per 500: ``{"results": [one write result, or {"action": "refused", "code", …}, per item], "counts"}``.

        Each item is a mapping: ``scope``, ``key``, ``value`` and any of ``write``'s options (``tags``, …).
        """
        return self.service.write_many(self.principal, items)

    def read(
        self, scope: str, key: str, *, as_of: datetime | None = None, valid_at: datetime | None = None
    ) -> dict[str, Any]:
        """The active lesson (``{"lesson": …}``), or as held at ``as_of`` / valid at ``valid_at``."""
        return self.service.read(self.principal, scope, key, as_of=as_of, valid_at=valid_at)

    def list(self, scope: str | None = None, **filters: Any) -> dict[str, Any]:
        """Active lessons newest first: ``{"lessons", "truncated", "next_cursor"}`` (``tag``, ``trust``,
        ``archived``, ``limit``, ``cursor``)."""
        return self.service.list(self.principal, scope, **filters)

    def history(self, scope: str, key: str) -> dict[str, Any]:
        """Every version of a lesson, oldest first."""
        return self.service.history(self.principal, scope, key)

    def forget(self, scope: str, key: str, reason: str) -> dict[str, Any]:
        """Reject a lesson for good: its content is tombstoned and refused under any key."""
        return self.service.forget(self.principal, scope, key, reason)

    # -- finding ----------------------------------------------------------------------------------
    def search(self, query: str, **filters: Any) -> dict[str, Any]:
        """Hybrid search (full text + meaning): ``{"query", "mode", "results"}``; ``repo``/``branch``/
        ``project`` follow the ladder, ``scopes``, ``tag``, ``trust``, ``limit``, ``mode`` narrow it."""
        return self.service.search(self.principal, query, **filters)

    def recall(self, error_text: str, **where: Any) -> dict[str, Any]:
        """At most three lessons that fit a failure, or none (``{"text", "lessons", …}``)."""
        return self.service.recall(self.principal, error_text, **where)

    def context(
        self,
        *,
        repo: str | None = None,
        branch: str | None = None,
        project: str | None = None,
        cwd: str | Path | None = None,
        task: str | None = None,
        max_chars: int | None = None,
        loop_cap: int | None = None,
    ) -> dict[str, Any]:
        """The session-start block for a working context: ``{"text", "loaded", "eligible", "ladder", …}``.

        ``cwd`` fills in what is not given from that directory's git checkout (and applies its
        ``.cairn.toml``), as ``cairn context`` does for its working directory.
        """
        from cairn.daemon.ops import where
        from cairn.runtime import settings as settings_mod

        params = {"repo": repo, "branch": branch, "project": project, "cwd": str(cwd) if cwd is not None else None}
        repo, branch, project, checkout = where(params)
        settings = settings_mod.load(self.home, checkout) if checkout is not None else None
        return self.service.context(
            self.principal,
            repo=repo,
            branch=branch,
            project=project,
            task=task,
            max_chars=max_chars,
            loop_cap=loop_cap,
            settings=settings,
        )

    # -- lifetime ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the database connections (the store stays on disk)."""
        self.service.store.dispose()

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<cairn.Memory home={str(self.home)!r} as {self.principal.actor!r}>"
