"""Opening the local store: the one place that turns a home directory into a service and a principal.

The CLI, the daemon and the hooks' in-process fallback all start here, so "which database, which
settings, which principal" has one answer. The database is the SQLite file in the home unless a
URL is given (``--db``, or ``CAIRN_DATABASE_URL``): ``postgresql://…`` for a team server.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cairn.errors import CairnError

if TYPE_CHECKING:
    from cairn.core.principal import Principal
    from cairn.runtime.settings import Settings
    from cairn.service.api import Cairn


def ensure_home(home: Path) -> Path:
    """Create the home directory owner-only: it holds the store and the daemon's socket."""
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise CairnError("SETUP", f"cannot create the Cairn home {home}: {exc.strerror}") from None
    return home


def database_url(home: Path, db: str | None = None) -> str:
    """Which database: ``--db``, else ``CAIRN_DATABASE_URL``, else the SQLite file in the home."""
    from cairn.runtime.home import database_choice
    from cairn.store.engine import sqlite_url

    return database_choice(db) or sqlite_url(home)


# The daemon's open service per (home, database URL): in the daemon's process, a forwarded command
# (cairn.daemon.hosted) that opens the same store gets this warm one (its index, caches and pool).
_WARM: dict[tuple[str, str], Cairn] = {}


def serve_warm(home: Path, url: str, svc: Cairn) -> None:
    """Called by the daemon: ``open_service`` for this home and database returns ``svc`` from now on."""
    _WARM[(str(home.resolve()), url)] = svc


def open_service(home: Path, settings: Settings | None = None, cwd: Path | None = None, db: str | None = None) -> Cairn:
    from cairn.runtime import clock
    from cairn.runtime import settings as settings_mod

    clock.install()
    ensure_home(home)  # the home holds settings, hook state and the daemon's socket on every database
    url = database_url(home, db)
    cfg = settings or settings_mod.load(home, cwd)
    warm = _WARM.get((str(home.resolve()), url)) if _WARM else None
    if warm is not None:
        if cfg == warm.settings:
            return warm
        # Another repository's .cairn.toml (or environment): the same store and caches, its settings.
        return warm.with_settings(cfg)
    from cairn.service.api import Cairn
    from cairn.store.engine import Store

    svc = Cairn(Store(url), cfg)
    collect_again()
    return svc


def collect_again() -> None:
    """Turn cyclic garbage collection back on where the entry point turned it off for the imports
    (``cairn.cli.main.main``), with what is alive now (modules, tables, the store) frozen out of
    every later collection: it lives as long as the process."""
    import gc

    if not gc.isenabled():
        gc.freeze()
        gc.enable()


TOKEN_ENV = "CAIRN_TOKEN"  # noqa: S105 - the variable's name


def principal_for(svc: Cairn, session: str | None = None, human: bool = False, token: str | None = None) -> Principal:
    """Who this command acts as: the account of ``token`` (default ``CAIRN_TOKEN``) when set, else the local account.

    Without a token the command runs with the database's own credentials, as the ``local``
    account (the operator, on a shared Postgres); with one, as the token's account in the token's
    tenant, with the token's permissions capped by that account's current role.
    """
    import os

    secret = (token if token is not None else os.environ.get(TOKEN_ENV, "")).strip()
    if secret:
        return svc.resolve_token(secret, session=session or os.environ.get("CAIRN_SESSION") or None, human=human)
    principal = local_principal(session=session, human=human)
    svc.ensure_tenant(principal)
    return principal


def local_principal(session: str | None = None, human: bool = False, actor: str | None = None) -> Principal:
    """The single-user default on the embedded store: the local tenant, the OS user as actor.

    ``actor`` is given by the local daemon, which serves its owner's other processes: it passes the
    caller's ``CAIRN_ACTOR``, not its own (only processes of the same OS user can reach its socket).
    """
    import os

    from cairn.core.principal import LOCAL_TENANT, LOCAL_USER, Principal

    actor = actor or os.environ.get("CAIRN_ACTOR") or _os_user()
    return Principal(
        tenant_id=LOCAL_TENANT,
        actor=actor,
        session=session or os.environ.get("CAIRN_SESSION") or None,
        human=human,
        user_id=LOCAL_USER,
    )


def _os_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - containers without a passwd entry
        return "local"
