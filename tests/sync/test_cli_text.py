"""What ``cairn sync``, ``cairn sync status`` and ``cairn review`` print for a person, not only --json.

A user who follows docs/sync.md reads the text: a refused event says why on the line under the
counts, a sync without a token names the variable it read (and ``[sync] token_env``), ``cairn sync
status`` without a token still shows what the last exchange recorded, and a conflict is marked in
the review queue's text with the command that shows both versions. The printing is the CLI's and
does not depend on the server's database, so one backend (SQLite) is enough here.
"""

from __future__ import annotations

import pytest

from tests.sync.conftest import Rig, envelope

FORGOTTEN = "Deploy on Fridays after five; nobody is watching then."


@pytest.fixture(scope="module")
def backend() -> str:
    return "sqlite"


def _text(rig_laptop, *args: str, env: dict[str, str]):
    """``cairn ARGS`` as text (no --json) on the laptop's home."""
    from tests.conftest import run_cli
    from tests.sync.conftest import ENV

    return run_cli(rig_laptop.home, *args, env={**ENV, **env})


def test_a_refused_event_is_explained_in_the_text_summary(rig: Rig) -> None:
    # A write token: its account may not unforget on the server (an admin's right), so the laptop's
    # own unforget is refused there and the tombstone holds.
    member = rig.svc.token_create(rig.alice, perm="write")["token"]
    laptop = rig.laptop("refused-text", token=member)
    rig.svc.write(rig.alice, "global", "fridays", FORGOTTEN)
    rig.svc.forget(rig.alice, "global", "fridays", reason="never deploy on Fridays")
    laptop.ok("write", "global", "late-deploys", FORGOTTEN)  # written offline, before the tombstone arrives
    proc = _text(laptop, "--url", rig.url, "sync", env={"CAIRN_TOKEN": laptop.token})
    assert proc.returncode == 0, proc.stderr
    # Pulling forgets the local copy first, so nothing is refused yet: the copy never reaches the server.
    assert "refused" not in proc.stdout
    assert FORGOTTEN not in rig.active_values()
    # A copy the server refuses: the laptop lifts its own tombstone (the server's holds) and writes again.
    tomb = laptop.ok("tombstones")["tombstones"][0]["id"]
    laptop.ok("unforget", str(tomb), "--reason", "I think it is fine")
    laptop.ok("write", "global", "late-deploys", FORGOTTEN)
    proc = _text(laptop, "--url", rig.url, "sync", env={"CAIRN_TOKEN": laptop.token})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    pushed = next(i for i, line in enumerate(lines) if line.startswith("pushed:"))
    assert "refused:" in lines[pushed]
    reasons = lines[pushed + 1 :]
    assert any("TOMBSTONED" in r and "global late-deploys" in r for r in reasons), proc.stdout
    assert any(r.strip().startswith("- unforget") and "FORBIDDEN" in r for r in reasons), proc.stdout
    assert "see --json" not in proc.stdout
    assert FORGOTTEN not in rig.active_values()


def test_the_audit_text_names_the_peer_and_its_chain_head_at_each_exchange(rig: Rig) -> None:
    laptop = rig.laptop("audit-text")
    rig.svc.write(rig.alice, "global", "from-server", "A lesson the laptop pulls from the server.")
    laptop.ok("write", "global", "from-laptop", "A lesson the laptop pushes to the server.")
    result = laptop.sync()
    peer, head = result["server_store"], result["heads"]["server"]
    text = _text(laptop, "audit", env={}).stdout.splitlines()
    exchanges = [line for line in text if " sync-exchange" in line]
    assert exchanges and f"peer {peer[:12]}" in exchanges[-1], text
    pulled = next(line for line in text if "global from-server" in line)
    assert f"(sync from {peer[:12]})" in pulled
    # The exchange row names the server's head as the exchange recorded it (the pulled page's).
    rows = laptop.ok("audit")["entries"]
    recorded = next(e for e in rows if e["action"] == "sync-exchange")["detail"]["peer_head"]
    assert 0 < recorded["seq"] <= head["seq"]
    assert f"its head seq {recorded['seq']} {recorded['hash'][:16]}" in exchanges[-1]
    own = next(line for line in text if "global from-laptop" in line)
    assert "sync from" not in own  # a local write is not marked as synced
    status = laptop.ok("--url", rig.url, "sync", "status", env={"CAIRN_TOKEN": laptop.token})
    assert status["peer"]["peer_head"] == head and status["heads"]["server"]["seq"] >= head["seq"]


def test_no_token_names_the_variable_read_and_status_still_shows_the_record(rig: Rig) -> None:
    laptop = rig.laptop("no-token")
    laptop.ok("write", "global", "one", "A lesson to give the exchange something to record.")
    laptop.sync()
    recorded = laptop.ok("--url", rig.url, "sync", "status", env={"CAIRN_TOKEN": ""})
    assert recorded["reachable"] is False and recorded["reason"]["code"] == "UNAUTHENTICATED"
    assert recorded["peer"]["pushed_cursor"] > 0 and recorded["peer"]["peer_head"]["seq"] > 0
    text = _text(laptop, "--url", rig.url, "sync", "status", env={"CAIRN_TOKEN": ""})
    assert text.returncode == 0 and "last recorded: pulled to" in text.stdout and "CAIRN_TOKEN" in text.stdout
    # The sync itself needs the token: refused, naming the variable, nothing changed.
    before = laptop.versions()
    refused = envelope(laptop.run("--url", rig.url, "sync", env={"CAIRN_TOKEN": ""}))
    assert refused["reason"]["code"] == "UNAUTHENTICATED"
    assert "$CAIRN_TOKEN" in refused["reason"]["message"] and "token_env" in refused["reason"]["message"]
    # With [sync] token_env, the message names that variable (the one a user exported by mistake
    # under the other name is not read).
    (laptop.home / "config.toml").write_text('[sync]\ntoken_env = "CAIRN_SYNC_TOKEN"\n', encoding="utf-8")
    other = envelope(laptop.run("--url", rig.url, "sync", env={"CAIRN_TOKEN": laptop.token}))
    assert other["reason"]["code"] == "UNAUTHENTICATED"
    assert "$CAIRN_SYNC_TOKEN" in other["reason"]["message"]
    assert other["reason"]["data"]["token_env"] == "CAIRN_SYNC_TOKEN"
    assert laptop.token not in other["reason"]["message"]
    assert laptop.versions() == before
    ok = laptop.sync(env={"CAIRN_SYNC_TOKEN": laptop.token})
    assert ok["server_store"] == recorded["server_store"]


def test_a_conflict_is_marked_in_the_review_text(rig: Rig) -> None:
    a, b = rig.laptop("a"), rig.laptop("b")
    a.ok("write", "global", "timeouts", "Client timeouts are 30 s.")
    a.sync()
    b.sync()
    a.ok("write", "global", "timeouts", "Client timeouts are 10 s, the gateway cuts at 15.")
    b.ok("write", "global", "timeouts", "Client timeouts are 60 s for the batch jobs.")
    a.sync()
    b.sync()
    text = _text(b, "review", env={})
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    notes = _notes(lines, "timeouts")
    assert any(n.startswith("conflict:") and "cairn history global timeouts" in n for n in notes), lines
    # A lesson that is only a candidate (no conflict) carries no such line.
    b.ok("write", "global", "plain", "A plain candidate with no conflict.")
    lines = _text(b, "review", env={}).stdout.splitlines()
    assert not any(n.startswith("conflict:") for n in _notes(lines, "plain")), lines
    # The history shows the two versions as siblings on v1, both tips, the rule's pick current, on
    # both laptops alike; the first version's end is when the first sibling was recorded.
    a.sync()
    for laptop in (a, b):
        versions = laptop.ok("history", "global", "timeouts")["versions"]
        assert [v["parents"] for v in versions] == [[], [1], [1]]
        assert [v["tip"] for v in versions] == [False, True, True]
        assert sum(v["current"] for v in versions) == 1
        assert versions[0]["recorded_until"] == min(versions[1]["recorded_at"], versions[2]["recorded_at"])
        assert versions[1]["recorded_until"] is None and versions[2]["recorded_until"] is None
    current = next(v for v in b.ok("history", "global", "timeouts")["versions"] if v["current"])
    assert b.ok("read", "global", "timeouts")["lesson"]["value"] == current["value"]
    shown = _text(b, "history", "global", "timeouts", env={}).stdout.splitlines()
    assert "2 versions written beside each other" in shown[0]
    rows = [line for line in shown if line.startswith("v")]
    assert "(on v1 · " in rows[1] and "(on v1 · " in rows[2]
    assert sum("current)" in r for r in rows) == 1 and sum("tip)" in r for r in rows) == 1
    # A write on top joins the histories: one tip, and the text is a line again.
    b.ok("write", "global", "timeouts", "Client timeouts are 30 s; batch jobs set their own.")
    versions = b.ok("history", "global", "timeouts")["versions"]
    assert versions[-1]["parents"] == [2, 3] and [v["tip"] for v in versions] == [False, False, False, True]
    assert "beside each other" not in _text(b, "history", "global", "timeouts", env={}).stdout.splitlines()[0]


def _notes(lines: list[str], key: str) -> list[str]:
    """The indented lines under one review entry (held, contradicts, conflict)."""
    entry = next(i for i, line in enumerate(lines) if line.startswith("- ") and f") {key} " in line)
    notes = []
    for line in lines[entry + 1 :]:
        if not line.startswith("  "):
            break
        notes.append(line.strip())
    return notes


def test_pull_only_says_the_push_did_not_run_and_a_read_only_status_says_why_nothing_is_sent(rig: Rig) -> None:
    laptop = rig.laptop("pull-only")
    laptop.ok("write", "global", "waits", "A lesson that waits on the laptop for a full sync.")
    before = rig.server_versions()
    result = laptop.sync("--pull-only")
    assert "pull only" in result["pushed"]["not_run"] and result["pushed"]["events"] == 0
    assert rig.server_versions() == before
    text = _text(laptop, "--url", rig.url, "sync", "--pull-only", env={"CAIRN_TOKEN": laptop.token}).stdout
    assert "pushed: not run (pull only was asked" in text
    status = laptop.ok("--url", rig.url, "sync", "status", env={"CAIRN_TOKEN": laptop.token})
    assert status["pending"]["push"] >= 1 and "push_blocked" not in status["pending"]
    # With a read-only token what waits here is never sent: the status says so.
    reader = rig.svc.token_create(rig.alice, perm="read")["token"]
    blocked = laptop.ok("--url", rig.url, "sync", "status", env={"CAIRN_TOKEN": reader})
    assert blocked["pending"]["push"] >= 1 and "read-only" in blocked["pending"]["push_blocked"]
    shown = _text(laptop, "--url", rig.url, "sync", "status", env={"CAIRN_TOKEN": reader}).stdout
    assert "waiting (the token is read-only" in shown
    # A full sync then sends it.
    assert laptop.sync()["pushed"]["applied"] >= 1
    assert ("global", "waits") in rig.server_versions()
