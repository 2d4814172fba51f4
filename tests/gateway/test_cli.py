"""`cairn conversation list | show | forget` as a user runs them (the real entry point, a subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

from cairn.core.gateway import Attribution
from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.service.conversations import Conversations
from cairn.store.engine import Store, sqlite_url
from tests.conftest import run_cli


def _envelope(home: Path, *args: str) -> dict:
    proc = run_cli(home, "--json", *args)
    return json.loads(proc.stdout.splitlines()[-1])


def _record(home: Path, thread: str, text: str) -> int:
    store = Store(sqlite_url(home))
    store.ensure_schema()
    try:
        svc = Cairn(store, Settings())
        me = local_principal()
        svc.ensure_tenant(me)
        ledger = Conversations(svc)
        result = ledger.record(
            me, Attribution("acme/widget", None, None, "headers"), protocol="openai", thread=thread, model="m",
            messages=[("user", text)], answer="Noted.", snapshot=ledger.epoch(me),
        )  # fmt: skip
        return result["conversation"]
    finally:
        store.dispose()


def test_list_show_forget_message_then_all(cairn_home: Path) -> None:
    conv = _record(cairn_home, "cli-1", "The deploy key for staging is kept in vault path ops/staging.")
    _record(cairn_home, "cli-2", "Another conversation about the release checklist items.")
    listed = _envelope(cairn_home, "conversation", "list")
    assert listed["status"] == "ok" and {c["id"] for c in listed["data"]["conversations"]} == {conv, conv + 1}
    shown = _envelope(cairn_home, "conversation", "show", str(conv))["data"]
    message = next(m["id"] for m in shown["transcript"] if m["role"] == "user")
    human = run_cli(cairn_home, "conversation", "show", str(conv))
    assert f"message {message}" in human.stdout and "vault path" in human.stdout

    forgot = _envelope(cairn_home, "conversation", "forget", str(conv), "--message", str(message))["data"]
    assert forgot["conversations"][0]["messages"][0]["id"] == message
    assert "vault path" not in json.dumps(_envelope(cairn_home, "conversation", "show", str(conv)))

    refused = _envelope(cairn_home, "conversation", "forget", str(conv), "--turn", "1", "--message", "1")
    assert refused["status"] != "ok" and refused["reason"]["code"] == "INVALID_INPUT"
    missing = _envelope(cairn_home, "conversation", "show", "999")
    assert missing["reason"]["code"] == "NOT_FOUND"

    reset = _envelope(cairn_home, "conversation", "forget", "--all")["data"]
    assert len(reset["conversations"]) == 2
    assert _envelope(cairn_home, "conversation", "list")["data"]["conversations"] == []
    assert b"vault path" not in (cairn_home / "cairn.db").read_bytes()
