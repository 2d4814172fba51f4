"""`cairn mcp` driven by the MCP SDK's own client over stdio (a real subprocess, a real store)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from tests.conftest import ROOT

EXPECTED_TOOLS = {
    "write", "read", "list_lessons", "search", "recall", "context", "history", "supersede",
    "archive", "restore", "forget", "feedback", "link", "neighborhood", "review", "scopes",
    "consolidate_preview", "consolidate_plan", "consolidate_apply", "consolidate_undo", "consolidate_runs",
    "consolidate_show",
}  # fmt: skip


def _params(home: Path, extra: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    from mcp import StdioServerParameters

    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "CAIRN_HOME": str(home),
        "CAIRN_EMBED_MODEL": "hash-test-64",
        "CAIRN_NO_DAEMON": "1",
        "PYTHONPATH": str(ROOT / "src"),
        **(extra or {}),
    }
    return StdioServerParameters(command=sys.executable, args=["-m", "cairn.cli.main", "mcp"], env=env, cwd=str(home))


async def _session(home: Path, script, extra: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    from mcp import Client

    async with Client(_params(home, extra)) as client:
        return await script(client)


def test_tools_write_search_recall_context_forget_and_the_refused_rewrite(tmp_path: Path) -> None:
    async def script(c):  # type: ignore[no-untyped-def]
        names = {t.name for t in (await c.list_tools()).tools}
        assert names >= EXPECTED_TOOLS
        write_tool = next(t for t in (await c.list_tools()).tools if t.name == "write")
        assert write_tool.input_schema["properties"]["scope"]["pattern"].startswith("^\\s*([Gg]")
        assert "kebab-case" in write_tool.input_schema["properties"]["key"]["description"]

        w = await c.call_tool(
            "write", {"scope": "repo::acme/api", "key": "db-lock", "value": "Retry on SQLITE_BUSY with backoff."}
        )
        assert not w.is_error and w.structured_content["action"] == "created"
        s = await c.call_tool("search", {"query": "SQLITE_BUSY retry", "repo": "acme/api", "mode": "fts"})
        assert [r["key"] for r in s.structured_content["results"]] == ["db-lock"]
        ctx = await c.call_tool("context", {"repo": "acme/api", "branch": "main"})
        assert "db-lock" in ctx.structured_content["text"]
        r = await c.call_tool("recall", {"text": "sqlite3.OperationalError: database is locked (SQLITE_BUSY)"})
        assert not r.is_error
        f = await c.call_tool("forget", {"scope": "repo::acme/api", "key": "db-lock", "reason": "wrong fix"})
        assert not f.is_error
        again = await c.call_tool(
            "write", {"scope": "global", "key": "other-key", "value": "Retry on SQLITE_BUSY with backoff."}
        )
        assert again.is_error and again.structured_content["code"] == "TOMBSTONED"
        assert again.content[0].text.startswith("TOMBSTONED: ")
        gone = await c.call_tool("read", {"scope": "repo::acme/api", "key": "db-lock"})
        assert gone.is_error and gone.structured_content["code"] == "NOT_FOUND"

    anyio.run(_session, tmp_path, script)


def test_bad_arguments_are_tool_errors_not_crashes(tmp_path: Path) -> None:
    async def script(c):  # type: ignore[no-untyped-def]
        bad_scope = await c.call_tool("write", {"scope": "repo:acme/api", "key": "k", "value": "v"})
        assert bad_scope.is_error and bad_scope.structured_content["code"] == "INVALID_SCOPE"
        assert bad_scope.structured_content["data"]["corrected"] == "repo::acme/api"  # the agent can retry
        wrong_type = await c.call_tool("write", {"scope": "global", "key": "k", "value": 5})
        assert wrong_type.is_error
        too_long = await c.call_tool("write", {"scope": "global", "key": "k", "value": "x" * 70000})
        assert too_long.is_error
        odd = await c.call_tool("write", {"scope": "repo::acme/../x", "key": "k", "value": "v"})
        assert odd.is_error and odd.structured_content["code"] == "INVALID_SCOPE"
        listing = await c.call_tool("list_lessons", {})
        assert listing.structured_content["lessons"] == []  # nothing was written by any refusal

    anyio.run(_session, tmp_path, script)


def test_a_read_only_token_cannot_write_over_stdio(tmp_path: Path) -> None:
    from cairn.runtime.local import local_principal, open_service

    svc = open_service(tmp_path)
    me = local_principal()
    svc.ensure_tenant(me)
    admin = svc.resolve_token(svc.create_user(me, "ana")["token"])
    ro = svc.token_create(admin, perm="read")["token"]
    svc.write(admin, "global", "shared", "ana's lesson")
    svc.store.dispose()

    async def script(c):  # type: ignore[no-untyped-def]
        w = await c.call_tool("write", {"scope": "global", "key": "k", "value": "v"})
        assert w.is_error and w.structured_content["code"] == "FORBIDDEN"
        r = await c.call_tool("read", {"scope": "global", "key": "shared"})
        assert not r.is_error and r.structured_content["lesson"]["value"] == "ana's lesson"

    anyio.run(_session, tmp_path, script, {"CAIRN_TOKEN": ro})


@pytest.mark.parametrize("token", ["cairn_unknown", "nonsense"])
def test_an_unknown_token_stops_the_server_at_start_with_the_reason(tmp_path: Path, token: str) -> None:
    """Fail fast: a host that starts `cairn mcp` with a bad token sees why in its server log."""
    import subprocess

    params = _params(tmp_path, {"CAIRN_TOKEN": token})
    proc = subprocess.run(
        [params.command, *params.args], env=params.env, cwd=params.cwd, input="", capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "UNAUTHENTICATED" in proc.stderr and token not in proc.stderr
    assert proc.stdout == ""  # stdout is the protocol channel: nothing else is ever written there


def test_list_lessons_pages_with_the_cursor(tmp_path: Path) -> None:
    async def script(c):  # type: ignore[no-untyped-def]
        for i in range(3):
            await c.call_tool("write", {"scope": "global", "key": f"page-{i}", "value": f"Paged lesson {i}."})
        first = (await c.call_tool("list_lessons", {"limit": 2})).structured_content
        assert len(first["lessons"]) == 2 and first["next_cursor"]
        rest = (await c.call_tool("list_lessons", {"limit": 2, "cursor": first["next_cursor"]})).structured_content
        assert rest["next_cursor"] is None
        keys = {r["key"] for r in first["lessons"] + rest["lessons"]}
        assert keys == {"page-0", "page-1", "page-2"}
        bad = await c.call_tool("list_lessons", {"cursor": "not-a-cursor"})
        assert bad.is_error and bad.structured_content["code"] == "INVALID_INPUT"

    anyio.run(_session, tmp_path, script)
