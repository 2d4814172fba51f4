"""Through the MCP SDK's client (streamable HTTP, both databases): a write that restates forgotten
content says it was held, and no MCP read tool returns it."""

from __future__ import annotations

import anyio

from tests.api.conftest import Api
from tests.mcp.test_http import _with

SCOPE = "repo::acme/vault-mcp"
FORGOTTEN = "The staging deploy key is stored in Vault at ops/deploy/staging."
PARAPHRASE = "The deploy key for staging is stored in Vault at ops/deploy/staging."
UNRELATED = "Run the integration suite with pytest -m integration before merging."
QUERY = "staging deploy key vault"


def test_a_paraphrase_written_over_mcp_is_held_out_of_every_tool(api: Api) -> None:
    async def script(c):  # type: ignore[no-untyped-def]
        await c.call_tool("write", {"scope": SCOPE, "key": "deploy-key", "value": FORGOTTEN})
        forgot = await c.call_tool("forget", {"scope": SCOPE, "key": "deploy-key", "reason": "leaked"})
        tid = forgot.structured_content["tombstone_id"]
        exact = await c.call_tool("write", {"scope": SCOPE, "key": "again", "value": FORGOTTEN})
        assert exact.is_error and exact.structured_content["code"] == "TOMBSTONED"
        await c.call_tool("write", {"scope": SCOPE, "key": "tests", "value": UNRELATED})
        held = await c.call_tool("write", {"scope": SCOPE, "key": "vault-path", "value": PARAPHRASE})
        assert not held.is_error, held
        body = held.structured_content
        assert body["lesson"]["status"] == "held" and body["held"]["code"] == "TOMBSTONE_PARAPHRASE"
        assert body["held"]["tombstone_id"] == tid
        seen: dict[str, set[str]] = {}
        listed = await c.call_tool("list_lessons", {"scope": SCOPE})
        seen["list"] = {x["key"] for x in listed.structured_content["lessons"]}
        for mode in ("hybrid", "fts", "vector"):
            found = await c.call_tool("search", {"query": QUERY, "mode": mode})
            seen[mode] = {x["key"] for x in found.structured_content["results"]}
        recalled = await c.call_tool("recall", {"text": QUERY})
        seen["recall"] = {x["key"] for x in recalled.structured_content["lessons"]}
        block = await c.call_tool("context", {"repo": "acme/vault-mcp", "task": QUERY})
        seen["context"] = {x["key"] for x in block.structured_content["lessons"]}
        read = await c.call_tool("read", {"scope": SCOPE, "key": "vault-path"})
        queue = await c.call_tool("review", {})
        marks = {x["key"]: x.get("held") for x in queue.structured_content["candidates"]}
        return seen, read.is_error, marks

    seen, read_refused, marks = anyio.run(_with, api, api.alice, script)
    assert "tests" in seen["list"]
    for path, keys in seen.items():
        assert "vault-path" not in keys, path
    assert read_refused
    assert marks["vault-path"]["key"] == "deploy-key"
