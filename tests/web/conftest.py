"""A real uvicorn on loopback serving the dashboard (mounted at /ui) over a real store.

``web`` runs on SQLite and Postgres (module scope, like tests/api); the browser tests use
``web_sqlite`` and a headless Debian ``chromium`` driven by Playwright through ``executable_path``
(``playwright install`` cannot download here: scripts/setup_browser.sh installs the browser).
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cairn.core.principal import Principal
from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.conftest import new_store_url
from tests.http_server import serving

ROOT = Path(__file__).resolve().parents[2]


XSS = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> & "quotes"'


@dataclass
class Web:
    base: str  # http://127.0.0.1:PORT (the dashboard is under /ui)
    svc: Any  # the Cairn facade the server runs
    store: Store
    alice: str  # admin token of account alice
    bob: str  # admin token of account bob (another tenant)
    reader: str  # read-only token of alice's store
    alice_p: Principal  # alice as an agent (writes start as candidates)
    bob_p: Principal

    def client(self) -> Client:
        return Client(self.base)


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    text: str

    def header(self, name: str) -> str:
        return self.headers.get(name, "")

    def cookies(self) -> list[str]:
        return self.headers.get_all("set-cookie") or []


@dataclass
class Client:
    """A cookie-keeping HTTP client that never follows redirects (the tests look at each hop)."""

    base: str
    jar: dict[str, str] = field(default_factory=dict)

    def request(self, method: str, path: str, form: dict[str, Any] | list[tuple[str, str]] | None = None,
                headers: dict[str, str] | None = None) -> Reply:  # fmt: skip
        url = urllib.parse.urlsplit(self.base)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        body = urllib.parse.urlencode(form, doseq=True) if form is not None else None
        hdrs = {"Host": url.netloc}
        if body is not None:
            hdrs["Content-Type"] = "application/x-www-form-urlencoded"
        if self.jar:
            hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.jar.items())
        hdrs.update(headers or {})
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        reply = Reply(resp.status, resp.headers, resp.read().decode())
        conn.close()
        for raw in reply.cookies():
            name, _, rest = raw.partition("=")
            value = rest.split(";", 1)[0]
            if "max-age=0" in raw.lower() or value in ("", '""'):
                self.jar.pop(name, None)
            else:
                self.jar[name] = value
        return reply

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def post(self, path: str, form: dict[str, Any] | list[tuple[str, str]], **kw: Any) -> Reply:
        return self.request("POST", path, form, **kw)

    def signin(self, token: str) -> Reply:
        page = self.get("/ui/signin")
        reply = self.post("/ui/signin", {"csrf": csrf_of(page.text), "token": token, "next": ""})
        return reply

    def csrf(self, path: str = "/ui/lessons") -> str:
        return csrf_of(self.get(path).text)


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field on the page"
    return m.group(1)


def _serve(request: pytest.FixtureRequest, backend: str, tmp: Path) -> Iterator[Web]:
    from cairn.api.app import create_app

    os.environ["CAIRN_EMBED_MODEL"] = "hash-test-64"
    url = new_store_url(request, backend, tmp)
    store = Store(url)
    if backend == "postgres":
        store.upgrade()
    svc = Cairn(store, Settings())
    me = local_principal()
    svc.ensure_tenant(me)
    alice = svc.create_user(me, "alice")["token"]
    bob = svc.create_user(me, "bob")["token"]
    alice_p = svc.resolve_token(alice)
    bob_p = svc.resolve_token(bob)
    reader = svc.token_create(alice_p, perm="read", name="read-only")["token"]

    app = create_app(svc, mcp=False)  # the real API app, which mounts the dashboard at /ui
    try:
        with serving(app) as base:
            yield Web(base, svc, store, alice, bob, reader, alice_p, bob_p)
    finally:
        store.dispose()
        os.environ.pop("CAIRN_EMBED_MODEL", None)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def web(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    yield from _serve(request, request.param, tmp_path_factory.mktemp("web"))


@pytest.fixture(scope="module")
def web_sqlite(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    yield from _serve(request, "sqlite", tmp_path_factory.mktemp("web"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per module: Debian's package, never a Playwright download.

    Module, not session: Playwright's sync API keeps an asyncio loop running in this thread while
    it is started, and a later test of the same process that runs its own loop (anyio.run in the
    MCP tests, in whatever order a parallel run hands out files) would find it busy."""
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail(
            "chromium is not installed: run scripts/setup_browser.sh (as root; it runs apt-get install chromium). "
            "The dashboard's browser tests drive Debian's chromium; `playwright install` cannot download here."
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: make setup")
    pw = sync_playwright().start()
    b = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"])
    try:
        yield b
    finally:
        b.close()
        pw.stop()
