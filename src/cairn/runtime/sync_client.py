"""The sync exchange between this store and a Cairn server: pull, then push, in batches, resumable.

``cairn sync`` and the daemon's background sync both run :func:`exchange`; neither holds a rule.
The rules (what an event is, how one applies, conflicts, tombstones and purges winning, trust,
idempotency by event uid, the cursors and the peer's chain head recorded in the apply's own
transaction) are the sync service's (``service/sync.py``). This module only moves batches between
the two sides and says how far it got:

1. **pull**: the server's feed since this store's pull cursor (the server leaves out what came from
   this store) → applied here, one transaction per batch, which records the new pull cursor and the
   server's chain head with the events. A sync cut anywhere restarts from the last batch applied.
2. **push**: this store's feed since its push cursor, leaving out what came from the server → the
   server applies it (idempotent by event uid) → this store records the push cursor and the
   server's head (``record_pushed``). Cut between the two, the next sync sends that batch again and
   the server skips every event of it.

A read-only token pulls and never pushes (the server would refuse the apply; the client does not
ask). Batches are bounded by count (the feed's page) and by bytes (the API's body cap for an
apply): a page whose request would pass the cap is sent as smaller pages.

``CAIRN_SYNC_CRASH_AT=STAGE:N`` kills this process (SIGKILL, no cleanup) at that stage of the N-th
batch: the kill-at-every-step tests drive it. Stages: :data:`STAGES`.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cairn.errors import CairnError

if TYPE_CHECKING:
    from pathlib import Path

    from cairn.core.principal import Principal
    from cairn.runtime.remote import RemoteCairn
    from cairn.runtime.settings import Settings
    from cairn.service.api import Cairn

CRASH_ENV = "CAIRN_SYNC_CRASH_AT"
# Where a sync can be cut: a pulled batch fetched and not yet applied here; applied here; a pushed
# batch applied by the server and not yet recorded here; recorded here.
STAGES = ("pull-fetched", "pull-applied", "push-sent", "push-recorded")
# Tallies an apply answers with; a sync adds them up per direction.
COUNTS = ("applied", "skipped", "conflicts")

# Why a push did not run, as the summary says it.
PULL_ONLY = "pull only was asked: this store's changes wait for the next sync"
READ_ONLY = "the token is read-only: pulled only"
PEERS_FILE = "sync-peers.json"  # in the home: {server URL: its store id}, written after each exchange starts
# (direction, feed rows read so far, feed rows to read in all): a feed page reads audit rows, and the
# sending store's chain head says how many there are, so the bar has a total without a count query.
Progress = Callable[[str, int, int], None]


def _read_peers(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: it is only a hint for an offline status
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def _plain(value: Any) -> Any:
    """A service answer as JSON data (the in-process service answers with models, the server with JSON)."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if dump is not None else value


class LocalSide:
    """This store, in process, as its local principal (never ``CAIRN_TOKEN``'s account: that token is
    the server's). ``home``: where to remember which store answered at which URL (``PEERS_FILE``),
    so ``cairn sync status`` can say what the last exchange recorded while the server is offline."""

    def __init__(self, svc: Cairn, principal: Principal, home: Path | None = None) -> None:
        self.svc, self.p, self.home = svc, principal, home

    def remember(self, url: str, store_id: str) -> None:
        if self.home is None or self.remembered(url) == store_id:
            return
        path = self.home / PEERS_FILE
        known = _read_peers(path)
        known[url] = store_id
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(known, indent=1) + "\n", encoding="utf-8")
        tmp.chmod(0o600)
        tmp.replace(path)

    def remembered(self, url: str) -> str | None:
        return _read_peers(self.home / PEERS_FILE).get(url) if self.home is not None else None

    def store_id(self) -> str:
        return str(self.svc.sync_store_id(self.p))

    def feed(self, since: int, limit: int, exclude_origin: str | None) -> dict[str, Any]:
        return _plain(self.svc.sync_feed(self.p, since=since, limit=limit, exclude_origin=exclude_origin))

    def apply(self, batch: dict[str, Any]) -> dict[str, Any]:
        from cairn.core.sync import SyncBatch

        return _plain(self.svc.sync_apply(self.p, SyncBatch.model_validate(batch)))

    def peer_state(self, peer: str) -> dict[str, Any]:
        return _plain(self.svc.sync_peer_state(self.p, peer))

    def record_pushed(self, peer: str, cursor: int, head: dict[str, Any]) -> None:
        from cairn.core.sync import ChainHead

        self.svc.sync_record_pushed(self.p, peer, cursor, ChainHead.model_validate(head))


class ServerSide:
    """The server, over its HTTP API (the catalogue's sync routes), as the bearer token's caller."""

    def __init__(self, remote: RemoteCairn | None, url: str = "", missing: CairnError | None = None) -> None:
        # ``missing``: why there is no ``remote`` (no token): ``cairn sync status`` still shows what
        # was recorded, and any call that needs the server raises it.
        self._remote, self._url, self.missing = remote, url or (remote.http.url if remote else ""), missing
        self._whoami: dict[str, Any] | None = None

    @property
    def remote(self) -> RemoteCairn:
        if self._remote is None:
            raise self.missing or CairnError("INTERNAL", "no server to ask")
        return self._remote

    @property
    def url(self) -> str:
        return self._url

    def whoami(self) -> dict[str, Any]:
        if self._whoami is None:
            self._whoami = self.remote.whoami(None)
        return self._whoami

    def store_id(self) -> str:
        return str(self.remote.sync_store_id(None)["store_id"])

    def feed(self, since: int, limit: int, exclude_origin: str | None) -> dict[str, Any]:
        return self.remote.sync_feed(None, since=since, limit=limit, exclude_origin=exclude_origin)

    def apply(self, batch: dict[str, Any]) -> dict[str, Any]:
        return self.remote.sync_apply(None, batch)

    def peer_state(self, peer: str) -> dict[str, Any]:
        return self.remote.sync_peer_state(None, peer)

    @property
    def bytes(self) -> dict[str, int]:
        if self._remote is None:
            return {"sent": 0, "received": 0}
        return {"sent": self._remote.http.sent, "received": self._remote.http.received}


@dataclass
class Direction:
    """One direction's tallies."""

    batches: int = 0
    events: int = 0
    applied: int = 0
    skipped: int = 0
    conflicts: int = 0
    refused: list[Any] = field(default_factory=list)
    cursor: int = 0
    skipped_reason: str | None = None  # why this direction did not run (a read-only token's push)

    def add(self, events: int, result: dict[str, Any]) -> None:
        self.batches += 1
        self.events += events
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + int(result.get(name) or 0))
        self.refused.extend(result.get("refused") or [])

    def as_dict(self) -> dict[str, Any]:
        out = {
            "batches": self.batches,
            "events": self.events,
            **{n: getattr(self, n) for n in COUNTS},
            "refused": self.refused,
            "cursor": self.cursor,
        }
        if self.skipped_reason:
            out["not_run"] = self.skipped_reason
        return out


def server_side(settings: Settings, url: str | None = None, *, need_token: bool = True) -> ServerSide:
    """The server to sync with: ``url`` (``--url``), else ``CAIRN_URL``, else ``sync.url`` from the
    home's config.toml; its token from the variable ``sync.token_env`` names (``CAIRN_TOKEN`` by default).

    No token is ``UNAUTHENTICATED`` naming the variable read, so a user who exported another one
    learns which; with ``need_token=False`` (``cairn sync status``) the side is kept without a
    connection and says why when asked."""
    from cairn.runtime.local import TOKEN_ENV
    from cairn.runtime.remote import RemoteCairn, configured_url

    server_url = configured_url(url) or configured_url(settings.sync_url or None)
    if server_url is None:
        raise CairnError(
            "INVALID_INPUT",
            "no server to sync with: cairn sync --url http://HOST:PORT, or set [sync] url in config.toml",
        )
    token_env = settings.sync_token_env or TOKEN_ENV
    token = os.environ.get(token_env, "").strip()
    if not token:
        other = " (or name another variable with [sync] token_env in config.toml)" if token_env == TOKEN_ENV else ""
        missing = CairnError(
            "UNAUTHENTICATED",
            f"no token for {server_url}: ${token_env} is not set{other}; "
            f"run: {token_env}=cairn_… cairn sync --url {server_url} "
            "(a token made there: cairn token create --perm write)",
            {"token_env": token_env},
        )
        if need_token:
            raise missing
        return ServerSide(None, server_url, missing)
    return ServerSide(RemoteCairn(server_url, token))


def open_sides(
    home: Path, *, url: str | None = None, db: str | None = None, cwd: Path | None = None, need_token: bool = True
) -> tuple[LocalSide, ServerSide]:
    """This home's store, as the local principal (never the token's account: the token is the
    server's), and the server it syncs with (:func:`server_side`)."""
    from cairn.runtime import settings as settings_mod
    from cairn.runtime.local import local_principal, open_service

    settings = settings_mod.load(home, cwd)
    server = server_side(settings, url, need_token=need_token)
    svc = open_service(home, settings=settings, cwd=cwd, db=db)
    principal = local_principal()
    svc.ensure_tenant(principal)
    return LocalSide(svc, principal, home), server


def _crash_point(stage: str, batch: int) -> None:
    """Die here when ``CAIRN_SYNC_CRASH_AT`` names this stage and batch (tests only set it)."""
    wanted = os.environ.get(CRASH_ENV)
    if wanted and wanted == f"{stage}:{batch}":
        os.kill(os.getpid(), signal.SIGKILL)


def peer_cursors(state: dict[str, Any]) -> tuple[int, int]:
    """(pull cursor, push cursor) from the sync service's peer state: how far this store has applied
    the peer's feed, and how far the peer has acknowledged this store's."""
    return int(state.get("pulled_cursor") or 0), int(state.get("pushed_cursor") or 0)


def _request_bytes(batch: dict[str, Any]) -> int:
    return len(json.dumps(batch, ensure_ascii=False).encode("utf-8"))


def exchange(
    local: LocalSide,
    server: ServerSide,
    *,
    batch: int | None = None,
    push: bool = True,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Pull then push until both feeds are drained; the summary of what moved. ``batch``: feed rows
    per request (default and at most the sync service's, ``core/sync.py``)."""
    from cairn.api.guard import MAX_SYNC_BYTES
    from cairn.core.sync import DEFAULT_BATCH, MAX_BATCH

    batch = DEFAULT_BATCH if batch is None else batch
    if not 1 <= batch <= MAX_BATCH:
        raise CairnError("INVALID_INPUT", f"--batch must be 1-{MAX_BATCH}, got {batch}", {"corrected": MAX_BATCH})

    server_id, local_id = server.store_id(), local.store_id()
    if server_id == local_id:
        raise CairnError("INVALID_INPUT", f"{server.url} serves this very store ({local_id}): nothing to sync")
    local.remember(server.url, server_id)
    pulled, pushed = Direction(), Direction()
    pull_from, push_from = peer_cursors(local.peer_state(server_id))
    pull_start, push_start = pull_from, push_from
    server_head: Any = None
    # -- pull --------------------------------------------------------------------------------------
    n = 0
    while True:
        n += 1
        page = server.feed(pull_from, batch, local_id)
        _crash_point("pull-fetched", n)
        result = local.apply(page)
        _crash_point("pull-applied", n)
        pulled.add(len(page["events"]), result)
        pull_from = pulled.cursor = int(page["cursor"])
        server_head = page.get("head")
        if progress:
            progress("pull", pull_from - pull_start, max(int(server_head["seq"]), pull_from) - pull_start)
        if not page.get("more"):
            break
    # -- push --------------------------------------------------------------------------------------
    pushed.cursor = push_from
    local_head: Any = None
    if not push:
        pushed.skipped_reason = PULL_ONLY
    elif server.whoami().get("permission") == "read":
        pushed.skipped_reason = READ_ONLY
        push = False
    n = 0
    size = batch
    while push:
        page = local.feed(push_from, size, server_id)
        local_head = page.get("head")
        if len(page["events"]) > 1 and _request_bytes(page) > MAX_SYNC_BYTES:
            size = max(1, len(page["events"]) // 2)  # over the server's body cap: smaller pages
            continue
        if page["events"]:
            n += 1
            result = server.apply(page)
            _crash_point("push-sent", n)
            server_head = result.get("head") or server_head
            local.record_pushed(server_id, int(page["cursor"]), server_head)
            _crash_point("push-recorded", n)
            pushed.add(len(page["events"]), result)
        else:
            # Only rows whose events came from the server (what this sync just pulled): nothing to
            # send, so the cursor moves here without a request.
            local.record_pushed(server_id, int(page["cursor"]), server_head)
        push_from = pushed.cursor = int(page["cursor"])
        size = batch
        if progress:
            progress("push", push_from - push_start, max(int(local_head["seq"]), push_from) - push_start)
        if not page.get("more"):
            break
    if local_head is None:
        local_head = local.feed(push_from, 1, server_id).get("head")
    return {
        "url": server.url,
        "store": local_id,
        "server_store": server_id,
        "pulled": pulled.as_dict(),
        "pushed": pushed.as_dict(),
        "heads": {"local": local_head, "server": server_head},
        "bytes": server.bytes,
    }


def status(local: LocalSide, server: ServerSide) -> dict[str, Any]:
    """What this store knows of its exchange with the server, and what waits each way.

    Offline (or without a token to ask the server with), the answer still says what was recorded
    (cursors, the server's last chain head, the last exchange) for the store that last answered at
    that URL; ``reachable`` is False, the reason says why, and what waits on either side is not counted.
    """
    local_id = local.store_id()
    out: dict[str, Any] = {"url": server.url, "store": local_id, "reachable": True}
    try:
        server_id = server.store_id()
    except CairnError as exc:
        if exc.code != "UNREACHABLE" and exc is not server.missing:
            raise
        known = local.remembered(server.url)
        recorded = local.peer_state(known) if known else None
        return {**out, "reachable": False, "reason": exc.to_reason(), "server_store": known, "peer": recorded}
    state = local.peer_state(server_id)
    pull_from, push_from = peer_cursors(state)
    from cairn.core.sync import DEFAULT_BATCH

    waiting_pull = server.feed(pull_from, DEFAULT_BATCH, local_id)
    waiting_push = local.feed(push_from, DEFAULT_BATCH, server_id)
    pending: dict[str, Any] = {
        "pull": len(waiting_pull["events"]),
        "pull_more": bool(waiting_pull.get("more")),
        "push": len(waiting_push["events"]),
        "push_more": bool(waiting_push.get("more")),
    }
    if server.whoami().get("permission") == "read":
        pending["push_blocked"] = READ_ONLY  # what waits here is never sent with this token
    return {
        **out,
        "server_store": server_id,
        "peer": state,
        "pending": pending,
        "heads": {"local": waiting_push.get("head"), "server": waiting_pull.get("head")},
    }
