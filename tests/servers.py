"""One real server per database per test session, and a fresh tenant on it per test module.

The API, MCP and dashboard tests used to start a uvicorn and a store of their own per module; they
isolate by tenant instead: every module signs up its own accounts (``alice-3``, ``bob-3``…) on the
session's server, so what one module writes is never in another's view (a count of "all lessons" or
"all audit rows" is a count within the module's tenant, as it was within its store). Under xdist a
session fixture is per worker process: each worker has its own servers.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cairn.core.principal import Principal
from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.http_server import serving

# The tests' embedder: tiny and deterministic. Set while a module's tenant is in use (the embedder is
# read per call from the environment), removed after it, as the per-module servers did.
EMBED_ENV = ("CAIRN_EMBED_MODEL", "hash-test-64")


@dataclass
class Server:
    """A real uvicorn on loopback serving the API app (MCP at /mcp, the dashboard at /ui)."""

    base: str  # http://127.0.0.1:PORT
    svc: Cairn
    store: Store
    backend: str
    operator: Principal  # the local operator, who signs accounts up


@dataclass
class Tenant:
    """Two accounts of their own on a shared server (each account is a tenant: its name is its id)."""

    alice_name: str
    bob_name: str
    alice: str  # admin token of account alice_name
    bob: str  # admin token of account bob_name (another tenant)
    alice_p: Principal
    bob_p: Principal


_numbers = itertools.count(1)


def start_server(request: pytest.FixtureRequest, backend: str, tmp: Path) -> Iterator[Server]:
    """Serve a fresh store of ``backend`` until the session ends."""
    from cairn.api.app import create_app
    from tests.conftest import new_store_url

    store = Store(new_store_url(request, backend, tmp))
    if backend == "postgres":
        store.upgrade()
    svc = Cairn(store, Settings())
    me = local_principal()
    svc.ensure_tenant(me)
    try:
        with serving(create_app(svc)) as base:
            yield Server(base, svc, store, backend, me)
    finally:
        store.dispose()


def new_tenant(server: Server) -> Tenant:
    """Sign up two accounts no other test on ``server`` has: the caller's tenants are its own."""
    n = next(_numbers)
    alice_name, bob_name = f"alice-{n}", f"bob-{n}"
    alice = server.svc.create_user(server.operator, alice_name)["token"]
    bob = server.svc.create_user(server.operator, bob_name)["token"]
    return Tenant(alice_name, bob_name, alice, bob, server.svc.resolve_token(alice), server.svc.resolve_token(bob))


def server_for(request: pytest.FixtureRequest, backend: str) -> Server:
    """The session's server on ``backend`` (started on first use)."""
    return request.getfixturevalue(f"server_{backend}")


@contextlib.contextmanager
def embed_env() -> Iterator[None]:
    """The tests' embedder for the duration of a module (as each module's own server had it)."""
    name, value = EMBED_ENV
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


@pytest.fixture(scope="session")
def server_sqlite(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from start_server(request, "sqlite", tmp_path_factory.mktemp("server-sqlite"))


@pytest.fixture(scope="session")
def server_postgres(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from start_server(request, "postgres", tmp_path_factory.mktemp("server-postgres"))


__all__ = ["Server", "Tenant", "new_tenant", "server_for", "embed_env", "server_sqlite", "server_postgres"]
