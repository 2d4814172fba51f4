"""Where this machine's Cairn lives: the home directory and the database it names. Standard library only.

Every process that opens or reaches a store asks here: the CLI, the hooks (before anything heavy is
imported, hence ``os`` and no ``pathlib``), the daemon and its clients, ``cairn install``, ``cairn
doctor`` and ``cairn.open()``. One answer means a hook, the daemon it talks to and the command a
person types can never disagree about which store they mean.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # see cairn.errors
if TYPE_CHECKING:
    from os import PathLike

HOME_ENV = "CAIRN_HOME"
DATABASE_ENV = "CAIRN_DATABASE_URL"
DEFAULT_HOME = os.path.join("~", ".cairn")


def home_dir(home: str | PathLike[str] | None = None) -> str:
    """The Cairn home: ``home`` if given, else ``$CAIRN_HOME``, else ``~/.cairn``; ``~`` expanded."""
    raw = os.fspath(home) if home else os.environ.get(HOME_ENV) or DEFAULT_HOME
    return os.path.expanduser(raw)


def database_choice(db: str | None = None) -> str | None:
    """The database URL asked for: ``--db``, else ``$CAIRN_DATABASE_URL``; None is the home's SQLite file."""
    return (db or "").strip() or os.environ.get(DATABASE_ENV, "").strip() or None
