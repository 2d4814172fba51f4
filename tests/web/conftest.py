"""The dashboard (mounted at /ui) on the session's shared server, a tenant of its own per module.

``web`` runs on SQLite and Postgres (module scope, like tests/api); the browser tests use
``web_sqlite`` and a headless Debian ``chromium`` driven by Playwright through ``executable_path``
(``playwright install`` cannot download here: scripts/setup_browser.sh installs the browser).
"""

from __future__ import annotations

import http.client
import re
import shutil
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cairn.core.principal import Principal
from cairn.store.engine import Store
from tests.servers import embed_env, new_tenant, server_for

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
    alice_name: str  # the module's own accounts on the shared server (each account is a tenant)
    bob_name: str

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


def _serve(request: pytest.FixtureRequest, backend: str) -> Iterator[Web]:
    """A fresh tenant (two accounts, a read-only token) on the session's server of ``backend``."""
    server = server_for(request, backend)
    t = new_tenant(server)
    reader = server.svc.token_create(t.alice_p, perm="read", name="read-only")["token"]
    with embed_env():
        yield Web(server.base, server.svc, server.store, t.alice, t.bob, reader, t.alice_p, t.bob_p,
                  t.alice_name, t.bob_name)  # fmt: skip


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def web(request: pytest.FixtureRequest) -> Iterator[Web]:
    yield from _serve(request, request.param)


@pytest.fixture(scope="module")
def web_sqlite(request: pytest.FixtureRequest) -> Iterator[Web]:
    yield from _serve(request, "sqlite")


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
