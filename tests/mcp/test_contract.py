"""What the MCP server says about itself, and how it refuses arguments (the SDK's own client, stdio).

A refusal of an argument is the same structured ``{code, message, data}`` as every other refusal --
never pydantic's text -- and refuses before any work: nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import anyio

import cairn
from tests.mcp.test_stdio import EXPECTED_TOOLS, _session

READ_ONLY = {
    "read", "list_lessons", "search", "recall", "context", "history", "neighborhood", "scopes", "review",
    "consolidate_preview", "consolidate_runs", "consolidate_show",
}  # fmt: skip


def test_server_info_capabilities_and_annotations(tmp_path: Path) -> None:
    async def script(c):  # type: ignore[no-untyped-def]
        assert c.server_info.name == "cairn" and c.server_info.version == cairn.__version__
        caps = c.server_capabilities
        assert caps.tools is not None
        assert caps.prompts is None and caps.resources is None  # nothing listed, nothing advertised
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert set(tools) == EXPECTED_TOOLS
        for name, tool in tools.items():
            a = tool.annotations
            assert a is not None and a.open_world_hint is False, name
            assert a.read_only_hint is (name in READ_ONLY), name
            if name not in READ_ONLY:
                assert a.destructive_hint is not None and a.idempotent_hint is not None, name
        assert tools["forget"].annotations.destructive_hint is True
        assert tools["write"].annotations.destructive_hint is False
        assert tools["write"].annotations.idempotent_hint is False  # the same write again counts a recurrence
        assert tools["restore"].annotations.idempotent_hint is True

    anyio.run(_session, tmp_path, script)


def test_argument_refusals_carry_stable_codes_not_pydantic_text(tmp_path: Path) -> None:
    async def script(c):  # type: ignore[no-untyped-def]
        cases = [
            ("write", {"scope": "global", "key": "k", "value": 5}, "value"),  # wrong type
            ("write", {"scope": "global", "key": "k"}, "value"),  # missing
            ("write", {"scope": "global", "key": "k", "value": "v", "kind": "rumour"}, "kind"),  # not an enum value
            ("list_lessons", {"limit": 0}, "limit"),  # below the bound
            ("list_lessons", {"limit": True}, "limit"),  # a boolean is not an integer
            ("write", {"scope": "global", "key": "k", "value": "v", "tags": "a,b"}, "tags"),  # a string, not a list
        ]
        for tool, args, where in cases:
            r = await c.call_tool(tool, args)
            assert r.is_error, (tool, args)
            body = r.structured_content
            assert body["code"] == "INVALID_INPUT", body
            assert body["message"].startswith(where) and body["data"]["errors"][0]["where"] == where, body
            assert r.content[0].text.startswith("INVALID_INPUT: ")
            assert "pydantic" not in r.content[0].text and "validation error" not in r.content[0].text
        unknown = await c.call_tool("write", {"scope": "global", "key": "k", "value": "v", "sudo": True})
        assert unknown.is_error and unknown.structured_content["code"] == "INVALID_INPUT"
        assert unknown.structured_content["data"]["unknown"] == ["sudo"]
        no_tool = await c.call_tool("drop_everything", {})
        assert no_tool.is_error and no_tool.structured_content["code"] == "NOT_FOUND"
        deep: object = "x"
        for _ in range(100):  # past Cairn's bound, within what the SDK's own message parser reads
            deep = [deep]
        nested = await c.call_tool("write", {"scope": "global", "key": "k", "value": "v", "tags": deep})
        assert nested.is_error and nested.structured_content["code"] == "INVALID_INPUT"
        huge = await c.call_tool("list_lessons", {"limit": 10**60})
        assert huge.is_error and huge.structured_content["code"] == "INVALID_INPUT"
        assert (await c.call_tool("list_lessons", {})).structured_content["lessons"] == []  # nothing written

    anyio.run(_session, tmp_path, script)
