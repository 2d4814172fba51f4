"""The CLI against a remote Cairn (``--url`` + ``CAIRN_TOKEN``) behaves as it does on a local store.

One script of commands runs three times: in process on a local store, through ``cairn serve``'s HTTP
API on another, and forwarded whole to a local daemon (``cairn.runtime.forward``) on a third. The
first two run the entry point in the test's process (``tests/inprocess.py``); the forwarded side is
a ``cairn`` process of its own, since forwarding hands the daemon that process's descriptors. Each
triple of envelopes must match once the values that differ by nature (times, chain hashes, token
secrets) are masked: same data, same refusals with the same codes, same exit codes.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, run_cli_process
from tests.daemon.test_daemon import _env, start_daemon, stop_daemon

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?")
HEX = re.compile(r"\b[0-9a-f]{32,64}\b")
SECRET = re.compile(r"cairn_[A-Za-z0-9_\-]{20,}")
# The model, and one pinned clock for every side, its server and its daemon: a context block's factors
# (recency) depend on each lesson's age, and the sides run at different speeds (two in this process,
# the third a process per command), so on a live clock the same script leaves different ages.
EMBED = {"CAIRN_EMBED_MODEL": "hash-test-64", "CAIRN_FAKE_NOW": "2030-01-15T12:00:00Z"}


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        # A cursor encodes a row's timestamp and a token prefix is random, like the times masked below.
        return {
            k: ("<random>" if k in ("next_cursor", "prefix") and v else _mask(v))
            for k, v in value.items()
            if k not in ("served_by", "seconds", "elapsed_ms")
        }
    if isinstance(value, list):
        return [_mask(v) for v in value]
    if isinstance(value, str):
        return SECRET.sub("<secret>", HEX.sub("<hash>", ISO.sub("<time>", value)))
    return value


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Side:
    """One way of running the CLI: a home, a token, and (remote) the server's URL; ``forwarded``: the
    home's local daemon runs the commands (CAIRN_NO_DAEMON unset)."""

    def __init__(self, home: Path, token: str, url: str | None, forwarded: bool = False) -> None:
        self.home, self.token, self.url, self.forwarded = home, token, url, forwarded

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        extra = ("--url", self.url) if self.url else ()
        env = {"CAIRN_TOKEN": self.token, "CAIRN_ACTOR": "agent-a", **EMBED}
        if self.forwarded:
            return run_cli_process(self.home, "--json", *extra, *args, stdin=stdin, env=env)
        env["CAIRN_NO_DAEMON"] = "1"
        return run_cli(self.home, "--json", *extra, *args, stdin=stdin, env=env)

    def envelope(self, *args: str, stdin: str | None = None) -> dict[str, Any]:
        proc = self.run(*args, stdin=stdin)
        assert "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stdout.splitlines()
        assert len(lines) == 1, (args, proc.stdout, proc.stderr)
        envelope = json.loads(lines[0])
        assert proc.returncode == {"ok": 0, "refused": 1}.get(envelope["status"], 2), (args, proc.returncode)
        return envelope


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    local_home = tmp_path_factory.mktemp("local")
    served_home = tmp_path_factory.mktemp("served")
    tokens = []
    for home in (local_home, served_home):
        made = json.loads(run_cli(home, "--json", "user", "create", "alice", env=EMBED).stdout)
        tokens.append(made["data"]["token"])
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(served_home), "serve", "--no-warm", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(**EMBED), cwd=served_home,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            with urllib.request.urlopen(url + "/v1/health", timeout=5):
                break
        except OSError:
            assert time.monotonic() < deadline, "cairn serve did not answer"
            time.sleep(0.2)
    try:
        yield Side(local_home, tokens[0], None), Side(served_home, tokens[1], url)
    finally:
        stop_daemon(proc)


@pytest.fixture(scope="module")
def forwarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, subprocess.Popen[str]]]:
    """A third home whose commands the local daemon runs (socket only, as one started on demand)."""
    home = tmp_path_factory.mktemp("forwarded")
    token = json.loads(run_cli(home, "--json", "user", "create", "alice", env=EMBED).stdout)["data"]["token"]
    proc = start_daemon(home, env=_env(**EMBED))
    try:
        yield Side(home, token, None, forwarded=True), proc
    finally:
        stop_daemon(proc)


SCRIPT: list[tuple[str, ...]] = [
    ("write", "repo::acme/api", "retry-budget", "Cap retries at three; the gateway times out at 30 s.", "--tag", "net"),
    ("write", "repo::acme/api", "retry-budget", "Cap retries at three; the gateway times out at 30 s.", "--tag", "net"),
    ("write", "repo::acme/api", "retry-budget", "Cap retries at two; the gateway now times out at 20 s."),
    ("write", "global", "lockfile", "Commit the lockfile with every dependency change.", "--ttl", "30d"),
    ("write", "repo::acme/api", "migrations", "Run migrations before the app starts, never from the app."),
    ("read", "repo::acme/api", "retry-budget"),
    ("list",),
    ("list", "--limit", "1"),
    ("history", "repo::acme/api", "retry-budget"),
    ("diff", "repo::acme/api", "retry-budget", "1", "2"),
    (
        "supersede",
        "global",
        "lockfile-v2",
        "Commit lockfiles; CI refuses a drifted one.",
        "--supersedes",
        "global",
        "lockfile",
    ),
    ("archive", "repo::acme/api", "migrations"),
    ("list", "--archived"),
    ("restore", "repo::acme/api", "migrations"),
    ("feedback", "repo::acme/api", "migrations", "helped"),
    ("link", "repo::acme/api", "migrations", "repo::acme/api", "retry-budget"),
    ("neighborhood", "repo::acme/api", "migrations"),
    ("review",),
    ("review", "verify", "repo::acme/api", "migrations"),
    ("forget", "repo::acme/api", "retry-budget", "--reason", "wrong numbers"),
    ("write", "global", "elsewhere", "Cap retries at two; the gateway now times out at 20 s."),  # TOMBSTONED
    ("tombstones",),
    ("search", "migrations before the app", "--mode", "fts"),
    ("recall", "--text", "error: migrations ran from the app and deadlocked"),
    ("context", "--repo", "acme/api", "--branch", "main"),
    ("audit", "--limit", "5"),
    ("audit", "verify"),
    ("whoami",),
    ("read", "nope::x", "k"),  # INVALID_SCOPE with the corrected form
    ("read", "global", "missing"),  # NOT_FOUND
    ("write", "global", "k", "x" * 70000),  # VALUE_TOO_LARGE
    ("token", "create", "--perm", "read", "--name", "ci"),
    ("token", "list"),
    ("org", "create", "acme"),
    ("org", "members", "acme"),
    ("export", "-"),  # refused with --json on both sides: stdout would carry two outputs
]


def test_every_command_answers_the_same_through_the_server_and_the_daemon(
    sides: tuple[Side, Side], forwarded: tuple[Side, subprocess.Popen[str]]
) -> None:
    local, remote = sides
    daemon_side, daemon = forwarded
    for args in SCRIPT:
        here, there, hosted = local.envelope(*args), remote.envelope(*args), daemon_side.envelope(*args)
        assert here["status"] == there["status"] == hosted["status"], (args, here, there, hosted)
        assert _mask(here) == _mask(there), (args, here, there)
        assert _mask(here) == _mask(hosted), (args, here, hosted)
    # The daemon ran the script's commands itself: every command line but context and recall (those
    # ask it per operation, and with a token run in process), and the ping that found it up.
    _, out, _ = stop_daemon(daemon)
    assert f"{len(SCRIPT) - 2 + 1} on the socket" in out, out
    # The script exercised refusals too, not only successes.
    assert remote.envelope("read", "global", "missing")["reason"]["code"] == "NOT_FOUND"
    assert (
        remote.envelope("write", "global", "again", "Cap retries at two; the gateway now times out at 20 s.")["reason"][
            "code"
        ]
        == "TOMBSTONED"
    )


def test_a_cursor_from_the_server_continues_the_list(sides: tuple[Side, Side]) -> None:
    _, remote = sides
    for i in range(5):
        remote.envelope("write", "project::pager", f"p{i}", f"paged lesson number {i}")
    seen: list[str] = []
    cursor = None
    while True:
        args = ("list", "project::pager", "--limit", "2") + (("--cursor", cursor) if cursor else ())
        data = remote.envelope(*args)["data"]
        seen += [r["key"] for r in data["lessons"]]
        cursor = data["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == [f"p{i}" for i in range(5)] and len(seen) == 5
    # A limit is one page on both sides: the API's cap is the service's, so --url answers as the local store.
    assert len(remote.envelope("list", "--limit", "700")["data"]["lessons"]) == len(
        remote.envelope("list", "--limit", "100")["data"]["lessons"]
    )


def test_export_and_import_round_trip_through_the_server(sides: tuple[Side, Side], tmp_path: Path) -> None:
    local, remote = sides
    backup = tmp_path / "backup.jsonl"
    exported = remote.envelope("export", str(backup))["data"]
    assert exported["lines"] > 0 and backup.read_text().count("\n") == exported["lines"]
    again = remote.envelope("import", str(backup))["data"]  # idempotent: everything is already there
    assert again["created"] == 0 and again["refused"] == [] and again["records"] > 0
    fresh = tmp_path / "plain.jsonl"
    fresh.write_text(
        "\n".join(json.dumps({"scope": "project::imp", "key": f"i{i}", "value": f"imported {i}"}) for i in range(3))
        + "\n"
    )
    assert remote.envelope("import", str(fresh))["data"]["created"] == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"scope": "project::imp", "key": "ok", "value": "fine"}\nnot json\n')
    reason = remote.envelope("import", str(bad))["reason"]
    assert reason["code"] == "INVALID_INPUT" and "line 2" in reason["message"]
    assert remote.envelope("read", "project::imp", "ok")["reason"]["code"] == "NOT_FOUND"  # nothing imported
    assert local.envelope("read", "project::imp", "i0")["reason"]["code"] == "NOT_FOUND"  # the other store


def test_refusals_that_belong_to_the_client(sides: tuple[Side, Side], tmp_path: Path) -> None:
    _, remote = sides
    home = tmp_path / "h"
    home.mkdir()

    def env_of(*args: str, token: str | None = "") -> dict[str, Any]:
        env = {"CAIRN_NO_DAEMON": "1", "CAIRN_TOKEN": remote.token if token == "" else (token or "")}
        proc = run_cli(home, "--json", *args, env=env)
        assert "Traceback" not in proc.stderr, proc.stderr
        return json.loads(proc.stdout)

    assert env_of("--url", remote.url, "list", token=None)["reason"]["code"] == "UNAUTHENTICATED"
    assert env_of("--url", remote.url, "list", token="cairn_forged")["reason"]["code"] == "UNAUTHENTICATED"
    assert env_of("--url", remote.url, "context", "--repo", "a/b", token=None)["reason"]["code"] == "UNAUTHENTICATED"
    dead = f"http://127.0.0.1:{_free_port()}"
    unreachable = env_of("--url", dead, "list")["reason"]
    assert unreachable["code"] == "UNREACHABLE" and dead in unreachable["message"]
    assert env_of("--url", dead, "recall", "--text", "boom")["reason"]["code"] == "UNREACHABLE"
    bad = env_of("--url", "127.0.0.1:8321", "list")["reason"]
    assert bad["code"] == "INVALID_INPUT" and bad["data"]["corrected"] == "http://127.0.0.1:8321"
    api = env_of("--url", "http://127.0.0.1:8321/v1/", "sync", "status")["reason"]  # a route's prefix pasted
    assert api["code"] == "INVALID_INPUT" and api["data"]["corrected"] == "http://127.0.0.1:8321"
    assert env_of("--url", "https://cairn.example.com/team/v1", "list")["reason"]["data"]["corrected"] == (
        "https://cairn.example.com/team"
    )
    both = env_of("--url", remote.url, "--db", "sqlite:///x.db", "list")["reason"]
    assert both["code"] == "INVALID_INPUT" and "not both" in both["message"]
    for local_only in (("db", "status"), ("db", "upgrade"), ("serve",), ("reindex",), ("user", "create", "eve")):
        reason = env_of("--url", remote.url, *local_only)["reason"]
        assert reason["code"] in ("INVALID_INPUT", "FORBIDDEN") and "server's host" in reason["message"], local_only
    # CAIRN_URL is the same as --url.
    proc = run_cli(home, "--json", "whoami", env={"CAIRN_URL": remote.url, "CAIRN_TOKEN": remote.token})
    assert json.loads(proc.stdout)["data"]["user"] == "alice"


def test_a_read_only_token_is_refused_by_the_server(sides: tuple[Side, Side]) -> None:
    _, remote = sides
    reader = remote.envelope("token", "create", "--perm", "read")["data"]["token"]
    ro = Side(remote.home, reader, remote.url)
    assert ro.envelope("read", "repo::acme/api", "migrations")["status"] == "ok"
    refused = ro.envelope("write", "global", "nope", "a read-only token cannot write this")
    assert refused["reason"]["code"] == "FORBIDDEN"
    assert remote.envelope("read", "global", "nope")["reason"]["code"] == "NOT_FOUND"


def test_hooks_read_the_team_server_with_cairn_url(sides: tuple[Side, Side], tmp_path: Path) -> None:
    _, remote = sides
    remote.envelope("write", "global", "hook-marker", "Remote hooks read the team server's lessons.")
    home = tmp_path / "laptop"  # an empty local home: the answer can only come from the server
    home.mkdir()
    payload = {
        "session_id": "remote-hook-1", "cwd": str(tmp_path), "hook_event_name": "SessionStart",
        "source": "startup", "transcript_path": str(tmp_path / "t.jsonl"), "permission_mode": "default",
    }  # fmt: skip
    env = {"CAIRN_URL": remote.url or "", "CAIRN_TOKEN": remote.token, **EMBED}
    proc = run_cli(home, "hook", "session-start", "--host", "claude-code", stdin=json.dumps(payload), env=env)
    assert proc.returncode == 0, proc.stderr
    block = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "hook-marker" in block
    assert not (home / "cairn.db").exists()


def test_a_server_that_is_not_cairn_is_named_as_such(tmp_path: Path) -> None:
    """``--url`` pointing at another HTTP server (a 404 page) is refused as a wrong address, with the
    form it should take; a proxy answering 502/503/504 (its Cairn is down) is UNREACHABLE, exit 3,
    like no answer at all, so a script or the daemon's background sync tries again later."""
    import http.server
    import threading

    status = {"code": 404}

    class Other(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_error(status["code"])

        do_POST = do_GET  # noqa: N815

        def log_message(self, *_args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    home = tmp_path / "h"
    home.mkdir()
    env = {"CAIRN_NO_DAEMON": "1", "CAIRN_TOKEN": "cairn_" + "x" * 43}
    try:
        for args in (("list",), ("sync",)):
            proc = run_cli(home, "--json", "--url", url, *args, env=env)
            reason = json.loads(proc.stdout)["reason"]
            assert proc.returncode == 1 and reason["code"] == "INVALID_INPUT", reason
            assert "not as a Cairn server" in reason["message"] and "HTTP 404" in reason["message"]
        status["code"] = 503
        proc = run_cli(home, "--json", "--url", url, "sync", env=env)
        reason = json.loads(proc.stdout)["reason"]
        assert proc.returncode == 3 and reason["code"] == "UNREACHABLE" and reason["data"]["url"] == url
    finally:
        server.shutdown()
        server.server_close()
