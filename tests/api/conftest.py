"""The API tests' client, and a tenant of their own on the session's server (SQLite and Postgres)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.servers import embed_env, new_tenant, server_for


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
    alice: str  # admin token of account alice_name
    bob: str  # admin token of account bob_name (another tenant)
    store: Store
    alice_name: str  # the module's own accounts on the shared server (each account is a tenant)
    bob_name: str


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def api(request: pytest.FixtureRequest) -> Iterator[Api]:
    """A fresh tenant (two accounts) on the session's server of the database."""
    server = server_for(request, request.param)
    t = new_tenant(server)
    with embed_env():
        yield Api(Http(server.base), server.svc, t.alice, t.bob, server.store, t.alice_name, t.bob_name)
