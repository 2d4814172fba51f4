"""The daemon's background sync: the exchange ``cairn sync`` runs, every ``sync.interval_minutes``
with ``sync.url`` (docs/sync.md).

It runs on the daemon's background thread, never in a request: a hook or a command never waits on
the network, and while the server is unreachable every command keeps working on the local store;
the next round tries again. The log names the server by host and port only and says what moved and
the error code when it failed: never the token (read from the variable ``sync.token_env`` names),
never lesson text.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cairn.errors import CairnError

if TYPE_CHECKING:
    from cairn.core.principal import Principal
    from cairn.service.api import Cairn


def where(url: str) -> str:
    """The server as the log names it: host and port, never a user or password in the URL."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.hostname or '?'}{':' + str(parts.port) if parts.port else ''}"


class BackgroundSync:
    """When the next sync is due, and running one."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.next_at = 0.0  # monotonic time; the first round runs at once
        self.last: dict[str, Any] | None = None  # the last round's summary or failure (for tests, status)

    def due(self, svc: Cairn) -> bool:
        cfg = svc.settings
        return bool(cfg.sync_url) and cfg.sync_interval_minutes > 0 and time.monotonic() >= self.next_at

    def when_due(self, svc: Cairn, principal: Principal) -> dict[str, Any] | None:
        """A round when one is due (:meth:`due`), else nothing."""
        return self.run(svc, principal) if self.due(svc) else None

    def run(self, svc: Cairn, principal: Principal) -> dict[str, Any] | None:
        """One exchange with ``sync.url``; a failure is logged by its code and retried next round."""
        from cairn.runtime.sync_client import LocalSide, exchange, server_side

        cfg = svc.settings
        self.next_at = time.monotonic() + cfg.sync_interval_minutes * 60
        target = where(cfg.sync_url)
        try:
            server = server_side(cfg, cfg.sync_url)
            result = exchange(LocalSide(svc, principal), server)
        except CairnError as exc:
            self.last = {"ok": False, "code": exc.code}
            self.log(f"sync with {target} failed: {exc.code}; next try in {cfg.sync_interval_minutes:g} min")
            return None
        except Exception as exc:  # noqa: BLE001 - keep serving; the next round retries
            self.last = {"ok": False, "code": type(exc).__name__}
            self.log(f"sync with {target} failed: {type(exc).__name__}")
            return None
        self.last = {"ok": True, **result}
        pulled, pushed = result["pulled"], result["pushed"]
        if pulled["events"] or pushed["events"]:
            self.log(
                f"synced with {target}: pulled {pulled['applied']} (conflicts {pulled['conflicts']}), "
                f"pushed {pushed['applied']} (conflicts {pushed['conflicts']})"
            )
        return result
