"""LoreKit's MCP surface (JSON-RPC over plain POST at /lorekit/functions/v1/mcp) as mcp-remote and
LoreKit's plugins call it: the eleven tools, their result shapes, its error codes and statuses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.conftest import Reply
from tests.compat.lorekit.conftest import LoreKitServer

TOOLS = [
    "memory.write", "memory.read", "memory.list", "memory.delete", "memory.search", "memory.archive",
    "memory.scopes", "memory.list_archived", "memory.restore", "memory.purge", "memory.purge_expired",
]  # fmt: skip


def rpc(lk: LoreKitServer, method: str, params: dict[str, Any] | None = None, token: str | None = None) -> Reply:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method}
    if params is not None:
        body["params"] = params
    return lk.http(
        "POST", "/mcp", body, token=token or lk.alice, headers={"Accept": "application/json, text/event-stream"}
    )


def call(lk: LoreKitServer, name: str, token: str | None = None, **arguments: Any) -> Any:
    r = rpc(lk, "tools/call", {"name": name, "arguments": arguments}, token=token)
    assert r.status == 200 and "error" not in r.body, r.body
    [content] = r.body["result"]["content"]
    assert content["type"] == "text"
    return json.loads(content["text"])


def error(lk: LoreKitServer, name: str, token: str | None = None, **arguments: Any) -> tuple[int, int, str]:
    r = rpc(lk, "tools/call", {"name": name, "arguments": arguments}, token=token)
    assert "result" not in r.body, r.body
    return r.status, r.body["error"]["code"], r.body["error"]["message"]


def test_handshake_and_tool_list(lk: LoreKitServer) -> None:
    r = rpc(lk, "initialize", {"protocolVersion": "2024-11-05", "capabilities": {}})
    assert r.status == 200 and r.body["id"] == 7
    assert r.body["result"]["protocolVersion"] == "2024-11-05" and r.body["result"]["serverInfo"]["name"] == "lorekit"
    assert rpc(lk, "notifications/initialized").status == 204
    tools = rpc(lk, "tools/list").body["result"]["tools"]
    assert [t["name"] for t in tools] == TOOLS
    assert all(t["inputSchema"]["type"] == "object" for t in tools)
    write = next(t for t in tools if t["name"] == "memory.write")
    assert write["inputSchema"]["required"] == ["scope", "key", "value"]


def test_write_read_list_search_round_trip(lk: LoreKitServer) -> None:
    w = call(lk, "memory.write", scope="project::mcp", key="migrations", value="run migrations before the seed",
             tags=["db"], ttl_days=30)  # fmt: skip
    assert set(w) == {"id", "created_at", "expires_at"} and w["expires_at"] is not None
    assert call(lk, "memory.read", scope="project::mcp", key="migrations")["value"] == "run migrations before the seed"
    assert call(lk, "memory.read", scope="project::mcp", key="absent") is None
    page = call(lk, "memory.list", scope="project::mcp")
    assert [e["key"] for e in page["entries"]] == ["migrations"] and page["hasMore"] is False
    assert set(page["entries"][0]) == {"id", "key", "value", "tags", "updated_at"}
    summary = call(lk, "memory.list", scope="project::mcp", view="summary")["entries"][0]
    assert "value" not in summary and summary["value_bytes"] == len(b"run migrations before the seed")
    ranked = call(lk, "memory.list", scope="project::mcp", order="rank")
    assert ranked["nextCursor"] is None and ranked["entries"][0]["key"] == "migrations"
    found = call(lk, "memory.search", q="migrations OR seed", scopes=["project::mcp"])
    assert found["entries"][0]["key"] == "migrations" and found["entries"][0]["scope"] == "project::mcp"
    assert "rank" in found["entries"][0]
    scopes = call(lk, "memory.scopes")["scopes"]
    assert {"scope": "project::mcp", "count": 1, "last_activity": None} in scopes


def test_archive_restore_delete_and_purges(lk: LoreKitServer) -> None:
    call(lk, "memory.write", scope="project::mcplife", key="k", value="a lesson to archive and restore")
    assert call(lk, "memory.archive", scope="project::mcplife", key="k") == {"archived": True}
    assert call(lk, "memory.archive", scope="project::mcplife", key="nope") == {
        "archived": False,
        "reason": "not_found",
    }
    archived = call(lk, "memory.list_archived", scope="project::mcplife")["entries"]
    assert [e["key"] for e in archived] == ["k"] and archived[0]["archived_at"]
    assert call(lk, "memory.restore", scope="project::mcplife", key="k") == {"restored": True}
    assert call(lk, "memory.restore", scope="project::mcplife", key="k")["restored"] is False
    assert call(lk, "memory.delete", scope="project::mcplife", key="k") == {"deleted": False, "archived": True}
    assert call(lk, "memory.delete", scope="project::mcplife", key="k", force=True) == {
        "deleted": True,
        "archived": False,
    }
    gone = call(lk, "memory.delete", scope="project::mcplife", key="never")
    assert gone == {"deleted": False, "archived": False, "reason": "not_found"}
    assert isinstance(call(lk, "memory.purge", retention_days=30)["purged"], int)
    assert isinstance(call(lk, "memory.purge_expired")["purged"], int)


def test_tokens_errors_and_permissions(lk: LoreKitServer) -> None:
    r = lk.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert r.status == 200 and r.body["error"]["code"] == -32001 and r.body["id"] == 3
    r = lk.http("POST", f"/mcp?token={lk.alice}", {"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
    assert r.status == 200 and len(r.body["result"]["tools"]) == 11  # mcp-remote's ?token= form
    status, code, message = error(lk, "memory.write", token=lk.alice_ro, scope="global", key="k", value="v")
    assert (status, code) == (200, -32003) and "write permission" in message
    assert error(lk, "memory.nope")[:2] == (400, -32601)
    assert rpc(lk, "resources/list").body["error"]["code"] == -32601


def test_tenancy_through_mcp(lk: LoreKitServer) -> None:
    call(lk, "memory.write", scope="project::mcpvault", key="secret-door", value="the vault door code is in 1password")
    assert call(lk, "memory.read", token=lk.bob, scope="project::mcpvault", key="secret-door") is None
    assert call(lk, "memory.list", token=lk.bob, scope="project::mcpvault")["entries"] == []
    assert call(lk, "memory.search", token=lk.bob, q="vault door")["entries"] == []
    assert (
        call(lk, "memory.delete", token=lk.bob, scope="project::mcpvault", key="secret-door", force=True)["deleted"]
        is False
    )
    assert call(lk, "memory.read", scope="project::mcpvault", key="secret-door") is not None


@pytest.mark.parametrize(
    ("name", "arguments", "needle"),
    [
        ("memory.write", {"scope": "global", "key": "k"}, "scope, key, and value are required"),
        ("memory.write", {"scope": "repo:acme/widget", "key": "k", "value": "v"}, "repo::acme/widget"),
        ("memory.write", {"scope": "global", "key": "k", "value": "v", "ttl_days": 0}, "ttl_days"),
        ("memory.write", {"scope": "global", "key": "k", "value": "v", "kind": "fact"}, "kind"),
        ("memory.list", {"scope": "global", "limit": 101}, "limit"),
        ("memory.list", {"scope": "global", "view": "tiny"}, "view"),
        ("memory.list", {"scope": "global", "order": "random"}, "order"),
        ("memory.list", {}, "scope"),
        ("memory.search", {}, "q"),
        ("memory.purge", {"retention_days": 366}, "retention_days"),
        ("memory.read", {"scope": "global"}, "required"),
    ],
)
def test_bad_arguments_are_32603_with_the_reason(lk: LoreKitServer, name: str, arguments: dict, needle: str) -> None:
    status, code, message = error(lk, name, **arguments)
    assert (status, code) == (400, -32603) and needle in message


def test_transport_refusals(lk: LoreKitServer) -> None:
    r = lk.http("GET", "/mcp", token=lk.alice)
    assert r.status == 405 and "POST" in r.body["error"]
    r = lk.http("POST", "/mcp", raw=b"{oops", token=lk.alice)
    assert r.status == 400 and r.body["error"]["code"] == -32700
    r = lk.http("POST", "/mcp", {"id": 1, "method": "tools/list"}, token=lk.alice)
    assert r.status == 400 and r.body["error"]["code"] == -32600
    params = {"name": "memory.read", "arguments": [1]}
    r = lk.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, token=lk.alice)
    assert r.status == 400 and r.body["error"]["code"] == -32603
    assert lk.http("GET", "/mcp/healthz").body == {"status": "ok"}
