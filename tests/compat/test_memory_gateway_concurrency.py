"""Concurrent writers wait their turn: none is refused, none is lost (the peer refused 16 of 100)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.compat.gateway_helpers import Result, disagreements, run

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)

WRITERS = 8
EACH = 4


def test_eight_concurrent_writers_are_all_served(corpus: Path, gw_env: dict[str, str]) -> None:
    env = {**gw_env, "MEMORY_GATEWAY_WAIT": "120"}  # generous: the machine running tests may be loaded
    results: list[Result] = []
    guard = threading.Lock()

    def writer(w: int) -> None:
        for i in range(EACH):
            args = ("create", f"w{w} topic {i}", "--type", "project")
            r = run(corpus, *args, body=f"writer {w} fact {i}", env=env, process=True)
            with guard:
                results.append(r)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    refused = [r.env for r in results if r.rc != 0]
    assert refused == []
    live = sorted(p.name for p in (corpus / "project").iterdir())
    assert live == sorted(f"w{w}-topic-{i}.md" for w in range(WRITERS) for i in range(EACH))
    assert len((corpus / "MEMORY.md").read_text().splitlines()) == WRITERS * EACH
    assert disagreements(corpus) == []


def test_a_writer_waits_for_another_instead_of_refusing(corpus: Path, gw_env: dict[str, str]) -> None:
    """A Cairn writer holding the corpus (here: crashed mid-way and recovered) never makes the next refuse."""
    import fcntl
    import os

    state = corpus / ".gateway"
    state.mkdir()
    fd = os.open(state / "writer.flock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a Cairn writer in the middle of its change
    timer = threading.Timer(2.0, lambda: (fcntl.flock(fd, fcntl.LOCK_UN), os.close(fd)))
    timer.start()
    waiting = {**gw_env, "MEMORY_GATEWAY_WAIT": "60"}
    r = run(corpus, "create", "patient", "--type", "user", body="waited", env=waiting, process=True)
    timer.join()
    assert r.rc == 0
    # past the bound it is refused, with the bound and the setting named
    fd2 = os.open(state / "writer.flock", os.O_RDWR)
    fcntl.flock(fd2, fcntl.LOCK_EX)
    try:
        bounded = {**gw_env, "MEMORY_GATEWAY_WAIT": "0.5"}
        late = run(corpus, "create", "late", "--type", "user", body="x", env=bounded, process=True)
    finally:
        fcntl.flock(fd2, fcntl.LOCK_UN)
        os.close(fd2)
    assert (late.rc, late.code) == (1, "CONCURRENT_WRITER")
    assert "MEMORY_GATEWAY_WAIT" in late.env["reason"]["message"]
    assert not (corpus / "user/late.md").exists()
