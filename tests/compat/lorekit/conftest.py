"""A real uvicorn on loopback serving Cairn's app (LoreKit's surface mounted in it), on SQLite and
Postgres, with two accounts; requests go through a real HTTP client."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.api.conftest import Http
from tests.conftest import new_store_url
from tests.http_server import serving

BASE = "/lorekit/functions/v1"


@dataclass
class LoreKitServer:
    http: Http
    svc: Cairn
    alice: str  # LoreKit-style admin token (lk_rw_…) of account alice
    bob: str  # LoreKit-style admin token of account bob
    alice_ro: str  # lk_ro_… read-only token of alice
    store: Store


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def lk(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoreKitServer]:
    from cairn.api.app import create_app

    os.environ["CAIRN_EMBED_MODEL"] = "hash-test-64"
    url = new_store_url(request, request.param, tmp_path_factory.mktemp("lorekit"))
    store = Store(url)
    if request.param == "postgres":
        store.upgrade()
    svc = Cairn(store, Settings())
    me = local_principal()
    svc.ensure_tenant(me)
    tokens = {}
    for name in ("alice", "bob"):
        p = svc.resolve_token(svc.create_user(me, name)["token"])
        tokens[name] = svc.token_create(p, perm="admin", style="lorekit", expires="never")["token"]
        if name == "alice":
            tokens["alice_ro"] = svc.token_create(p, perm="read", style="lorekit")["token"]
    try:
        with serving(create_app(svc, mcp=False)) as base:
            yield LoreKitServer(Http(base + BASE), svc, tokens["alice"], tokens["bob"], tokens["alice_ro"], store)
    finally:
        store.dispose()
        os.environ.pop("CAIRN_EMBED_MODEL", None)
