"""A crash at any point of a mutation leaves files and store in agreement once the next call runs.

``MEMORY_GATEWAY_CRASH_AT=<stage>`` makes the command die (``os._exit``: no cleanup, the lock left
held, like kill -9) right after a stage; the next invocation — a plain ``read`` — must complete the
operation before it answers. A real SIGKILL at random moments is tested too.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.compat.gateway_helpers import COMMAND, Result, disagreements, live_files

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)

GW = Callable[..., Result]

SETUP = {
    "create": [],
    "update": [("create", "topic", "--type", "user", "body one")],
    "supersede": [("create", "topic", "--type", "user", "body one")],
    "archive": [("create", "topic", "--type", "user", "body one")],
    "forget": [
        ("create", "topic", "--type", "user", "body one"),
        ("update", "--supersede", "--type", "user", "--name", "topic", "body two"),
    ],
}
ACTION = {
    "create": (("create", "topic", "--type", "user"), "body one"),
    "update": (("update", "user/topic"), "appended"),
    "supersede": (("update", "--supersede", "--type", "user", "--name", "topic"), "body two"),
    "archive": (("archive", "user/topic"), None),
    "forget": (("forget", "user/topic", "--reason", "wrong"), None),
}
STAGES = {
    "create": ["intent", "store", "newtopic", "index", "commit"],
    "update": ["intent", "store", "newtopic", "index", "commit"],
    "supersede": ["intent", "store", "archive", "newtopic", "index", "commit"],
    "archive": ["intent", "store", "archive", "index", "commit"],
    "forget": ["intent", "store", "remove", "index", "commit"],
}
# What the corpus holds once the operation completed.
AFTER = {
    "create": (["MEMORY.md", "user/topic.md"], "body one\n"),
    "update": (["MEMORY.md", "user/topic.md"], "body one\nappended\n"),
    "supersede": ([".archive/user/topic/0001.md", "MEMORY.md", "user/topic.md"], "body two\n"),
    "archive": ([".archive/user/topic/0001.md", "MEMORY.md"], None),
    "forget": (["MEMORY.md"], None),
}


def _prepare(gw: GW, verb: str) -> None:
    for *args, body in SETUP[verb]:
        assert gw(*args, body=body).rc == 0


@pytest.mark.parametrize(("verb", "stage"), [(v, s) for v in STAGES for s in STAGES[v]])
def test_crash_after_each_stage_is_completed_by_the_next_call(gw: GW, corpus: Path, verb: str, stage: str) -> None:
    _prepare(gw, verb)
    args, body = ACTION[verb]
    crashed = gw(*args, body=body, MEMORY_GATEWAY_CRASH_AT=stage)
    assert crashed.rc == 111 and crashed.out == ""
    after = gw("read", "user/topic")  # recovery runs before any verb is served
    files, content = AFTER[verb]
    if content is None:
        assert after.code == "NOT_FOUND"
    else:
        assert (after.rc, after.data["content"]) == (0, content)
    assert live_files(corpus) == files
    assert disagreements(corpus) == []
    # completed once: repeating the recovery changes nothing
    assert gw("read", "user/topic").rc == after.rc
    assert live_files(corpus) == files
    # the dead writer's lock is reclaimed by the next writer, which does not wait for it
    assert gw("create", "next", "--type", "project", body="next", MEMORY_GATEWAY_WAIT="0").rc == 0
    assert disagreements(corpus) == []


def test_a_tampered_intent_is_not_replayed(gw: GW, corpus: Path) -> None:
    import json

    _prepare(gw, "supersede")
    gw(*ACTION["supersede"][0], body="body two", MEMORY_GATEWAY_CRASH_AT="intent")
    wal = corpus / ".gateway" / "wal.jsonl"
    records = [json.loads(line) for line in wal.read_text().splitlines()]
    for r in records:
        if r["state"] == "intent" and r["payload"]["op"] == "supersede":
            r["payload"]["body"] = "forged"
    wal.write_text("".join(json.dumps(r) + "\n" for r in records))
    r = gw("read", "user/topic")
    assert r.data["content"] == "body one\n"
    assert "does not match its sha256" in r.err
    assert any(json.loads(line).get("aborted") == "sha_mismatch" for line in wal.read_text().splitlines())
    assert disagreements(corpus) == []


def test_sigkill_at_random_moments_never_leaves_files_and_store_apart(
    gw: GW, corpus: Path, gw_env: dict[str, str]
) -> None:
    rng = random.Random(18)
    assert gw("create", "topic", "--type", "user", body="v0").rc == 0
    for i in range(1, 7):
        proc = subprocess.Popen(
            [*COMMAND, "--corpus", str(corpus), "update", "--supersede", "--type", "user", "--name", "topic"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=gw_env,
        )  # fmt: skip
        assert proc.stdin is not None
        proc.stdin.write(f"v{i}".encode())
        proc.stdin.close()
        time.sleep(rng.uniform(0.2, 1.6))
        proc.kill()  # SIGKILL, wherever it is
        proc.wait()
        r = gw("read", "user/topic")
        assert r.rc == 0 and r.data["content"] in (f"v{i - 1}\n", f"v{i}\n")
        assert disagreements(corpus) == []
        if r.data["content"] != f"v{i}\n":  # killed before its intent was logged: do it again
            assert gw("update", "--supersede", "--type", "user", "--name", "topic", body=f"v{i}").rc == 0
    assert len(gw("read", "user/topic", "--archived").data["archived"]) == 6
    assert disagreements(corpus) == []
