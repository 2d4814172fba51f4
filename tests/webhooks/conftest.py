"""A real `cairn serve` on loopback over a real store (SQLite and Postgres), with two tenants that
each registered repositories, and a sender that posts signed deliveries to it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from cairn.core.principal import Principal
from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.conftest import new_store_url
from tests.daemon.test_daemon import _env, stop_daemon
from tests.daemon.test_http_serve import _free_port
from tests.webhooks.payloads import signed

PATH = "/v1/webhooks/github"


@dataclass
class Reply:
    status: int
    body: Any


@dataclass
class Served:
    base: str
    svc: Cairn
    alice: Principal  # admin of tenant A ("alice"), registered acme/widget
    bob: Principal  # admin of tenant B ("bob"), registered bob/tools
    secrets: dict[str, str]  # repo -> secret

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> Reply:
        req = urllib.request.Request(self.base + path, data=body, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return Reply(resp.status, json.loads(resp.read() or b"null"))
        except urllib.error.HTTPError as err:
            raw = err.read()
            return Reply(err.code, json.loads(raw) if raw else None)

    def deliver(self, repo: str, event: str, payload: dict[str, Any], *, secret: str | None = None,
                delivery: str | None = None) -> Reply:  # fmt: skip
        body, headers = signed(event, payload, secret or self.secrets[repo], delivery)
        return self.post(f"{PATH}?repo={repo}", body, headers)

    def state(self) -> tuple[Any, ...]:
        """Everything a delivery could change, in both tenants: lessons (with counts and trust),
        the audit chains' lengths and the registrations' counters."""
        out: list[Any] = []
        for p in (self.alice, self.bob):
            lessons = self.svc.list(p, limit=10_000)["lessons"]
            out.append(sorted((x["scope"], x["key"], x["value"], x["trust"], x["seen_count"]) for x in lessons))
            out.append(len(self.svc.audit(p, limit=1000)["entries"]))
            out.append([(w["repo"], w["counts"]) for w in self.svc.webhook_list(p)["webhooks"]])
        return tuple(json.dumps(x, sort_keys=True) for x in out)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("webhook-home")
    url = new_store_url(request, request.param, tmp_path_factory.mktemp("webhook-db"))
    store = Store(url)
    if request.param == "postgres":
        store.upgrade()
    svc = Cairn(store, Settings())
    me = local_principal()
    svc.ensure_tenant(me)
    alice = svc.resolve_token(svc.create_user(me, "alice")["token"])
    bob = svc.resolve_token(svc.create_user(me, "bob")["token"])
    secrets = {
        "acme/widget": svc.webhook_add(alice, "acme/widget")["secret"],
        "bob/tools": svc.webhook_add(bob, "bob/tools")["secret"],
    }
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "serve", "--no-warm", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=home,
        env=_env(CAIRN_DATABASE_URL=url, CAIRN_SERVE_AUTO_START="0"),
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "cairn serve did not answer within 90 s"
            try:
                with urllib.request.urlopen(base + "/v1/health", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        yield Served(base, svc, alice, bob, secrets)
    finally:
        code, _out, err = stop_daemon(proc)
        store.dispose()
        assert code == 0, err
        # Never the secret nor a comment's text in the server's log.
        for secret in secrets.values():
            assert secret not in err
        assert "Flush the write buffer" not in err  # the 503 test logs its delivery by id only
