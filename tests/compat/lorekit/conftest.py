"""LoreKit's surface as Cairn's app mounts it, on the session's shared server (SQLite and Postgres),
with two accounts of the module's own; requests go through a real HTTP client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.api.conftest import Http
from tests.servers import embed_env, new_tenant, server_for

BASE = "/lorekit/functions/v1"


@dataclass
class LoreKitServer:
    http: Http
    svc: Cairn
    alice: str  # LoreKit-style admin token (lk_rw_…) of account alice
    bob: str  # LoreKit-style admin token of account bob
    alice_ro: str  # lk_ro_… read-only token of alice
    store: Store
    alice_name: str  # the module's own account on the shared server (an account is a tenant)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def lk(request: pytest.FixtureRequest) -> Iterator[LoreKitServer]:
    """Two accounts of this module's own, with LoreKit-style tokens, on the session's shared server."""
    server = server_for(request, request.param)
    t = new_tenant(server)
    tokens = {}
    for name, p in (("alice", t.alice_p), ("bob", t.bob_p)):
        tokens[name] = server.svc.token_create(p, perm="admin", style="lorekit", expires="never")["token"]
    tokens["alice_ro"] = server.svc.token_create(t.alice_p, perm="read", style="lorekit")["token"]
    with embed_env():
        yield LoreKitServer(
            Http(server.base + BASE), server.svc, tokens["alice"], tokens["bob"], tokens["alice_ro"], server.store,
            t.alice_name,
        )  # fmt: skip
