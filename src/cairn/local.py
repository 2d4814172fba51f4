"""Opening the local store: the one place that turns a home directory into a service and a principal.

The CLI, the daemon and the hooks' in-process fallback all start here, so "which database, which
settings, which principal" has one answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cairn.errors import CairnError

if TYPE_CHECKING:
    from cairn.service.api import Cairn
    from cairn.settings import Settings


def resolve_home(home: str | Path | None) -> Path:
    from cairn.settings import default_home

    return Path(home).expanduser() if home else default_home()


def ensure_home(home: Path) -> Path:
    """Create the home directory owner-only: it holds the store and the daemon's socket."""
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise CairnError("SETUP", f"cannot create the Cairn home {home}: {exc.strerror}") from None
    return home


def open_service(home: Path, settings: Settings | None = None, cwd: Path | None = None) -> Cairn:
    from cairn import settings as settings_mod
    from cairn.service.api import Cairn
    from cairn.store.engine import Store, sqlite_url

    ensure_home(home)
    return Cairn(Store(sqlite_url(home)), settings or settings_mod.load(home, cwd))
