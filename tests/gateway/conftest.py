"""The gateway in front of a fake provider, over a real store (SQLite and Postgres), per module.

Both servers are real uvicorn servers on loopback; the tests drive them with the official ``openai``
and ``anthropic`` SDKs, as a user's tools would.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from cairn.core.principal import Principal
from cairn.gateway.app import Gateway, Upstream, create_gateway
from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.service.conversations import Conversations
from cairn.store.engine import Store
from tests.conftest import new_store_url
from tests.gateway.fake_upstream import Fake, app
from tests.http_server import serving

PROVIDER_KEY = "sk-provider-SECRET-0123456789"  # noqa: S105 - a test's stand-in for the provider key


@dataclass
class Rig:
    svc: Cairn
    store: Store
    fake: Fake
    upstream: str  # the fake provider's base URL
    base: str  # the gateway's base URL
    alice: str  # alice's admin token
    bob: str  # bob's admin token (another tenant)
    alice_p: Principal
    gateway: Gateway

    @property
    def svc_conversations(self) -> Conversations:
        return self.gateway.conversations

    def openai(self, token: str | None = None, **headers: str):  # type: ignore[no-untyped-def]
        import openai

        return openai.OpenAI(
            base_url=self.base + "/v1", api_key=token or self.alice, default_headers=headers, max_retries=0
        )

    def anthropic(self, token: str | None = None, **headers: str):  # type: ignore[no-untyped-def]
        import anthropic

        return anthropic.Anthropic(
            base_url=self.base, api_key=token or self.alice, default_headers=headers, max_retries=0
        )


# A store and servers of its own, not the shared server: the gateway app and its fake upstream are this rig's.
@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    os.environ["CAIRN_EMBED_MODEL"] = "hash-test-64"
    url = new_store_url(request, request.param, tmp_path_factory.mktemp("gw"))
    store = Store(url)
    if request.param == "postgres":
        store.upgrade()
    svc = Cairn(store, Settings())
    me = local_principal()
    svc.ensure_tenant(me)
    alice = svc.create_user(me, "alice")["token"]
    bob = svc.create_user(me, "bob")["token"]
    fake = Fake()
    try:
        with serving(app(fake)) as upstream:
            gw = Gateway(Conversations(svc), Upstream(upstream, PROVIDER_KEY))
            with serving(create_gateway(gw)) as base:
                yield Rig(svc, store, fake, upstream, base, alice, bob, svc.resolve_token(alice), gw)
    finally:
        store.dispose()
        os.environ.pop("CAIRN_EMBED_MODEL", None)


@pytest.fixture
def gw(rig: Rig) -> Rig:
    rig.fake.reset()
    return rig


_accounts = itertools.count(1)


@dataclass
class Account:
    token: str
    p: Principal


@pytest.fixture
def account(rig: Rig) -> Account:
    """A new account (its own tenant) for one test: tombstones a test writes stay in its tenant."""
    token = rig.svc.create_user(local_principal(), f"acct{next(_accounts)}")["token"]
    return Account(token, rig.svc.resolve_token(token))
