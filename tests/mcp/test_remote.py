"""`cairn mcp --url`: a stdio MCP server whose tools call a remote Cairn with the process's token."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio

from tests.api.conftest import Api
from tests.mcp.test_stdio import _params


async def _remote(home: Path, api: Api, token: str, script):  # type: ignore[no-untyped-def]
    from mcp import Client

    params = _params(home, {"CAIRN_TOKEN": token})
    params.args = [*params.args, "--url", api.http.base]
    async with Client(params) as client:
        return await script(client)


def test_tools_reach_the_remote_store_as_the_tokens_account(api: Api, tmp_path: Path) -> None:
    async def script(c):  # type: ignore[no-untyped-def]
        w = await c.call_tool("write", {"scope": "repo::acme/edge", "key": "remote-mcp", "value": "Pin the CDN TTL."})
        assert not w.is_error, w
        ctx = await c.call_tool("context", {"repo": "acme/edge", "branch": "main"})
        assert "remote-mcp" in ctx.structured_content["text"]
        bad = await c.call_tool("write", {"scope": "repo:acme/edge", "key": "k", "value": "v"})
        assert bad.is_error and bad.structured_content["code"] == "INVALID_SCOPE"
        assert bad.structured_content["data"]["corrected"] == "repo::acme/edge"
        f = await c.call_tool("forget", {"scope": "repo::acme/edge", "key": "remote-mcp", "reason": "stale"})
        assert not f.is_error
        again = await c.call_tool("write", {"scope": "global", "key": "other", "value": "Pin the CDN TTL."})
        assert again.is_error and again.structured_content["code"] == "TOMBSTONED"
        return (await c.call_tool("list_lessons", {})).structured_content["lessons"]

    anyio.run(_remote, tmp_path, api, api.alice, script)
    # It went to the server's store, in alice's tenant; nothing in the local home, nothing for bob.
    tomb = api.http("GET", "/v1/tombstones", token=api.alice).body["tombstones"]
    assert any(t["key"] == "remote-mcp" for t in tomb)
    bobs = api.http("GET", "/v1/tombstones", token=api.bob).body["tombstones"]
    assert not any(t["key"] == "remote-mcp" for t in bobs)
    assert not (tmp_path / "cairn.db").exists()


def test_another_tenants_token_sees_nothing_through_remote_mcp(api: Api, tmp_path: Path) -> None:
    api.http("POST", "/v1/lessons", {"scope": "global", "key": "alice-remote", "value": "quokka marker"}, api.alice)

    async def script(c):  # type: ignore[no-untyped-def]
        r = await c.call_tool("read", {"scope": "global", "key": "alice-remote"})
        s = await c.call_tool("search", {"query": "quokka marker", "mode": "fts"})
        return r.structured_content["code"], s.structured_content["results"]

    code, results = anyio.run(_remote, tmp_path, api, api.bob, script)
    assert code == "NOT_FOUND" and results == []


def test_a_bad_token_or_server_stops_it_at_start(api: Api, tmp_path: Path) -> None:
    for token, url, code, exits in (
        ("cairn_forged", api.http.base, "UNAUTHENTICATED", (1, 2)),
        ("", api.http.base, "UNAUTHENTICATED", (1, 2)),
        (api.alice, "http://127.0.0.1:9", "UNREACHABLE", (3,)),  # the server's absence has its own exit
    ):
        params = _params(tmp_path, {"CAIRN_TOKEN": token})
        proc = subprocess.run(
            [params.command, *params.args, "--url", url], env=params.env, cwd=params.cwd, input="",
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode in exits and code in proc.stderr, proc.stderr
        assert proc.stdout == ""
        assert token not in proc.stderr or not token
