"""MCP over streamable HTTP, mounted in the API at /mcp, driven by the SDK's client with bearer tokens."""

from __future__ import annotations

import anyio
import pytest

from tests.api.conftest import Api


async def _with(api: Api, token: str | None, script):  # type: ignore[no-untyped-def]
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        Client(streamable_http_client(api.http.base + "/mcp/", http_client=http)) as client,
    ):
        return await script(client)


def test_tools_over_http_with_the_same_tokens(api: Api) -> None:
    async def script(c):  # type: ignore[no-untyped-def]
        assert "write" in {t.name for t in (await c.list_tools()).tools}
        w = await c.call_tool("write", {"scope": "repo::acme/web", "key": "cache-bust", "value": "Bust the CDN cache."})
        assert not w.is_error, w
        r = await c.call_tool("read", {"scope": "repo::acme/web", "key": "cache-bust"})
        return r.structured_content["lesson"]["value"]

    assert anyio.run(_with, api, api.alice, script) == "Bust the CDN cache."
    # The lesson is alice's: visible through the HTTP API with her token, not with bob's.
    assert api.http("GET", "/v1/lesson?scope=repo::acme/web&key=cache-bust", token=api.alice).status == 200
    assert api.http("GET", "/v1/lesson?scope=repo::acme/web&key=cache-bust", token=api.bob).status == 404


def test_another_tenants_token_sees_nothing_over_mcp(api: Api) -> None:
    api.http("POST", "/v1/lessons", {"scope": "global", "key": "alice-mcp", "value": "okapi marker"}, api.alice)

    async def script(c):  # type: ignore[no-untyped-def]
        read = await c.call_tool("read", {"scope": "global", "key": "alice-mcp"})
        found = await c.call_tool("search", {"query": "okapi", "mode": "fts"})
        return read.is_error, read.structured_content.get("code"), found.structured_content["results"]

    assert anyio.run(_with, api, api.bob, script) == (True, "NOT_FOUND", [])


def test_a_read_only_and_a_scope_limited_token_over_mcp(api: Api) -> None:
    me = api.svc.resolve_token(api.alice)
    ro = api.svc.token_create(me, perm="read")["token"]
    narrow = api.svc.token_create(me, perm="write", scope_patterns=["repo::acme/*"])["token"]

    async def write(c):  # type: ignore[no-untyped-def]
        out = await c.call_tool("write", {"scope": "repo::other/x", "key": "k", "value": "outside"})
        return out.is_error, out.structured_content.get("code")

    assert anyio.run(_with, api, ro, write) == (True, "FORBIDDEN")
    assert anyio.run(_with, api, narrow, write) == (True, "FORBIDDEN")


@pytest.mark.parametrize("token", [None, "cairn_forged"])
def test_no_or_a_bad_token_is_refused_before_any_tool(api: Api, token: str | None) -> None:
    async def script(c):  # type: ignore[no-untyped-def]
        return await c.list_tools()

    with pytest.raises(BaseException) as info:  # the SDK raises an ExceptionGroup around the 401
        anyio.run(_with, api, token, script)
    assert "401" in repr(info.value) or "rror" in repr(info.value)
    raw = api.http("POST", "/mcp/", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token=token)
    assert raw.status == 401


def test_argument_refusals_over_http_are_structured(api: Api) -> None:
    async def script(c):  # type: ignore[no-untyped-def]
        extra = await c.call_tool("read", {"scope": "global", "key": "k", "as_admin": True})
        wrong = await c.call_tool("search", {"query": "x", "limit": "lots"})
        return [(r.is_error, r.structured_content["code"]) for r in (extra, wrong)], c.server_info.version

    import cairn

    codes, version = anyio.run(_with, api, api.alice, script)
    assert codes == [(True, "INVALID_INPUT"), (True, "INVALID_INPUT")]
    assert version == cairn.__version__
