"""The write-ahead log: ``<corpus>/.gateway/wal.jsonl``, one JSON record per line.

A mutating verb first appends an ``intent`` (the whole operation, with the sha256 of its payload),
fsynced, before it changes the store or a file; it appends ``commit`` when every step is done.
Every invocation, before it serves a verb, replays each intent that has no closing record: each
step is idempotent, so a crash (kill -9) at any point ends with the operation completed. An
intent whose payload no longer matches its sha256 is not replayed: an ``aborted: sha_mismatch``
record closes it. A trailing partial line (a crash mid-append) is dropped.

``MEMORY_GATEWAY_CRASH_AT=<stage>`` makes the process exit 111 right after that stage (tests).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

CRASH_ENV = "MEMORY_GATEWAY_CRASH_AT"
CRASH_EXIT = 111
# Past this size the log is rewritten to its last transaction once nothing is open.
COMPACT_BYTES = 64 * 1024


def payload_sha(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def crash_point(stage: str) -> None:
    """Die like a killed process right after ``stage`` when the test hook names it."""
    if os.environ.get(CRASH_ENV) == stage:
        os._exit(CRASH_EXIT)


class Wal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> tuple[list[dict[str, Any]], bool]:
        """Records, and whether the file ends in a partial line (or holds undecodable lines)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return [], False
        records = []
        damaged = bool(data) and not data.endswith(b"\n")
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                damaged = True
                continue
            if isinstance(rec, dict):
                records.append(rec)
            else:
                damaged = True
        return records, damaged

    def pending(self) -> tuple[list[dict[str, Any]], bool]:
        """Intents without a closing record, in order, and whether the file needs repair."""
        records, damaged = self._read()
        closed = {r.get("txn") for r in records if r.get("state") in ("commit", "aborted")}
        return [r for r in records if r.get("state") == "intent" and r.get("txn") not in closed], damaged

    def repair(self) -> None:
        """Rewrite the log without partial or undecodable lines (under the corpus lock)."""
        records, damaged = self._read()
        if damaged:
            self._rewrite(records)

    def _rewrite(self, records: list[dict[str, Any]]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as fh:
            for r in records:
                fh.write(json.dumps(r, sort_keys=True).encode() + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def append(self, record: dict[str, Any]) -> None:
        record.setdefault("ts", int(time.time()))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, json.dumps(record, sort_keys=True).encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)

    def intent(self, verb: str, payload: dict[str, Any]) -> str:
        txn = uuid.uuid4().hex
        self.append({"txn": txn, "state": "intent", "verb": verb, "payload": payload, "sha256": payload_sha(payload)})
        return txn

    def commit(self, txn: str) -> None:
        self.append({"txn": txn, "state": "commit"})
        try:
            if self.path.stat().st_size > COMPACT_BYTES:
                records, _ = self._read()
                self._rewrite([r for r in records if r.get("txn") == txn])
        except OSError:
            pass

    def abort(self, txn: str, why: str) -> None:
        self.append({"txn": txn, "state": "aborted", "aborted": why})


def intact(record: dict[str, Any]) -> bool:
    payload = record.get("payload")
    return isinstance(payload, dict) and record.get("sha256") == payload_sha(payload)
