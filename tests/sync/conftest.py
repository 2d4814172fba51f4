"""Two laptops and a server: the rig of the sync tests.

The server is the session's real uvicorn on loopback (``tests/servers.py``), on SQLite and on
Postgres (the module's ``backend``), with a tenant of the module's own (alice, and bob as another
tenant). A laptop is a fresh Cairn home with its own SQLite store; its commands run through the real
``cairn`` entry point, in this process (``run_cli``) or as a process of its own where the test is
about the process (killed, offline, the daemon).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.core.principal import Principal
from cairn.service.api import Cairn
from cairn.store.engine import Store, sqlite_url
from tests.conftest import run_cli, run_cli_process
from tests.servers import EMBED_ENV, Server, Tenant, embed_env, new_tenant, server_for

ENV = {"CAIRN_NO_DAEMON": "1", EMBED_ENV[0]: EMBED_ENV[1], "CAIRN_ACTOR": "agent-laptop"}


def envelope(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, (proc.stdout, proc.stderr)
    return json.loads(lines[0])


class Laptop:
    """A Cairn home with its own SQLite store, and the server it syncs with."""

    def __init__(self, name: str, home: Path, url: str, token: str) -> None:
        self.name, self.home, self.url, self.token = name, home, url, token
        home.mkdir(parents=True, exist_ok=True)

    def run(
        self, *args: str, process: bool = False, env: dict[str, str] | None = None, stdin: str | None = None
    ) -> Any:
        """``cairn --json ARGS`` on this laptop's store (no token: a local command is the local account's)."""
        full = {**ENV, **(env or {})}
        argv = args if args[:1] == ("hook",) else ("--json", *args)
        if process:
            return run_cli_process(self.home, *argv, env=full, stdin=stdin)
        return run_cli(self.home, *argv, env=full, stdin=stdin)

    def ok(self, *args: str, **kw: Any) -> Any:
        proc = self.run(*args, **kw)
        env = envelope(proc)
        assert proc.returncode == 0 and env["status"] == "ok", (args, env)
        return env["data"]

    def sync_proc(self, *args: str, token: str | None = None, **kw: Any) -> Any:
        env = {"CAIRN_TOKEN": token or self.token, **kw.pop("env", {})}
        return self.run("--url", self.url, "sync", *args, env=env, **kw)

    def sync(self, *args: str, token: str | None = None, **kw: Any) -> dict[str, Any]:
        proc = self.sync_proc(*args, token=token, **kw)
        env = envelope(proc)
        assert proc.returncode == 0 and env["status"] == "ok", env
        return env["data"]

    @property
    def db(self) -> Path:
        return self.home / "cairn.db"

    def service(self) -> Cairn:
        store = Store(sqlite_url(self.home))
        store.ensure_schema()
        return Cairn(store)

    def versions(self) -> dict[tuple[str, str], set[tuple[str, str]]]:
        with sqlite3.connect(self.db) as conn:
            rows = conn.execute(
                "SELECT l.scope, l.key, v.uid, v.content_hash FROM lesson_versions v "
                "JOIN lessons l ON l.id = v.lesson_id WHERE v.tenant_id = 'local'"
            ).fetchall()
        return _grouped(rows)

    def file_bytes(self) -> bytes:
        """Every byte of the laptop's store (main file, WAL, ranking indexes), checkpointed and vacuumed."""
        with sqlite3.connect(self.db) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        return b"".join(
            p.read_bytes()
            for p in sorted(self.home.glob("cairn.db*")) + sorted(self.home.glob("cairn.db.rank/*"))
            if p.is_file()
        )


def _grouped(rows: list[Any]) -> dict[tuple[str, str], set[tuple[str, str]]]:
    out: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for scope, key, uid, chash in rows:
        out.setdefault((scope, key), set()).add((uid, chash))
    return out


def server_versions(server: Server, tenant: str) -> dict[tuple[str, str], set[tuple[str, str]]]:
    from sqlalchemy import text

    with server.store.engine.begin() as conn:
        if server.backend == "postgres":  # row security admits the tenant the transaction names
            conn.execute(text("SELECT set_config('cairn.tenant', :t, true)"), {"t": tenant})
        rows = conn.execute(
            text(
                "SELECT l.scope, l.key, v.uid, v.content_hash FROM lesson_versions v "
                "JOIN lessons l ON l.id = v.lesson_id WHERE v.tenant_id = :t"
            ),
            {"t": tenant},
        ).fetchall()
    return _grouped([tuple(r) for r in rows])


class Rig:
    def __init__(self, server: Server, tenant: Tenant, tmp: Path) -> None:
        self.server, self.tenant, self.tmp = server, tenant, tmp
        self.url = server.base

    @property
    def svc(self) -> Cairn:
        return self.server.svc

    @property
    def alice(self) -> Principal:
        return self.tenant.alice_p

    def laptop(self, name: str, token: str | None = None) -> Laptop:
        return Laptop(name, self.tmp / name, self.url, token or self.tenant.alice)

    def server_versions(self, tenant: str | None = None) -> dict[tuple[str, str], set[tuple[str, str]]]:
        return server_versions(self.server, tenant or self.tenant.alice_name)

    def active_values(self) -> set[str]:
        page = self.svc.list(self.alice, limit=1000)
        return {lesson["value"] for lesson in page["lessons"]}


@pytest.fixture(scope="module")
def module_server(request: pytest.FixtureRequest, backend: str) -> Iterator[tuple[Server, Tenant]]:
    server = server_for(request, backend)
    with embed_env():
        yield server, new_tenant(server)


@pytest.fixture
def rig(module_server: tuple[Server, Tenant], tmp_path: Path) -> Rig:
    """Per test: the module's server, a fresh tenant on it (what one test syncs is never in another's)."""
    server, _ = module_server
    return Rig(server, new_tenant(server), tmp_path)
