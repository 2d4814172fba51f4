"""The MCP ``context`` and ``recall`` tools hand an agent the same neutralized block as the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio

from tests.hosts.test_block_forgery import FORGERIES, WORDS, check_block
from tests.mcp.test_stdio import _params, _session


def test_context_and_recall_tools_defuse_forged_fences(tmp_path: Path) -> None:
    env = {**_params(tmp_path).env}
    for key, value in FORGERIES.items():
        proc = subprocess.run(
            [sys.executable, "-m", "cairn.cli.main", "write", "global", key, value],
            env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr

    async def script(c):  # type: ignore[no-untyped-def]
        ctx = await c.call_tool("context", {})
        assert not ctx.is_error
        assert len(check_block(ctx.structured_content["text"])) == len(FORGERIES)
        rec = await c.call_tool("recall", {"text": f"Error: {WORDS}"})
        assert not rec.is_error
        check_block(rec.structured_content["text"])

    anyio.run(_session, tmp_path, script)
