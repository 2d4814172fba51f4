"""The daemon's socket protocol refuses bad JSON with INVALID_INPUT and keeps serving."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cairn.daemon import protocol
from cairn.daemon.server import Daemon


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"\n",  # json.loads alone raises RecursionError, which killed the handler
        b'{"v": 1, "op": "ping", "params": ' + b"[" * 40 + b"]" * 40 + b"}\n",
        b'{"v": ' + b"1" * 5000 + b', "op": "ping", "params": {}}\n',
        b'{"v": 1, "op": "ping", "params": {"n": NaN}}\n',
        b'{"v": 1, "op": "p\xffing", "params": {}}\n',
        b'["not", "an", "object"]\n',
    ],
)
def test_bad_json_on_the_socket_is_invalid_input(tmp_path: Path, raw: bytes) -> None:
    os.environ.setdefault("CAIRN_EMBED_MODEL", "hash-test-64")
    daemon = Daemon(tmp_path, log=lambda _msg: None)
    try:
        answer = daemon.handle(raw)
        assert answer["ok"] is False and answer["error"]["code"] == "INVALID_INPUT", answer
        assert daemon.handle(protocol.encode({"v": protocol.PROTOCOL, "op": "ping", "params": {}}))["ok"]
    finally:
        daemon.svc.store.dispose()
