"""A real uvicorn server on loopback in front of a real store (SQLite and Postgres), per module."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.conftest import new_store_url
from tests.http_server import serving


@dataclass
class Reply:
    status: int
    body: Any
    content_type: str


class Http:
    def __init__(self, base: str) -> None:
        self.base = base

    def __call__(
        self, method: str, path: str, body: Any = None, token: str | None = None, raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:  # fmt: skip
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return Reply(resp.status, json.loads(resp.read() or b"null"), resp.headers.get("content-type", ""))
        except urllib.error.HTTPError as err:
            payload = err.read()
            return Reply(err.code, json.loads(payload) if payload else None, err.headers.get("content-type", ""))


@dataclass
class Api:
    http: Http
    svc: Cairn
    alice: str  # admin token of account alice
    bob: str  # admin token of account bob
    store: Store


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    import os

    from cairn.api.app import create_app

    os.environ["CAIRN_EMBED_MODEL"] = "hash-test-64"
    url = new_store_url(request, request.param, tmp_path_factory.mktemp("api"))
    store = Store(url)
    if request.param == "postgres":
        store.upgrade()
    svc = Cairn(store, Settings())
    me = local_principal()
    svc.ensure_tenant(me)
    alice = svc.create_user(me, "alice")["token"]
    bob = svc.create_user(me, "bob")["token"]
    try:
        with serving(create_app(svc)) as base:
            yield Api(Http(base), svc, alice, bob, store)
    finally:
        store.dispose()
        os.environ.pop("CAIRN_EMBED_MODEL", None)
