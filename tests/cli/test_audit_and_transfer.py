"""The audit chain through the CLI, tampering detection, export/import round trips and purge."""

from __future__ import annotations

import json
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3

from tests.cli.conftest import Cli


def _db(cli: Cli) -> sqlite3.Connection:
    return sqlite3.connect(str(cli.home / "cairn.db"), isolation_level=None)


def test_audit_verify_detects_an_edited_row(cli: Cli) -> None:
    cli.ok("write", "global", "a", "First lesson.")
    cli.ok("write", "global", "a", "First lesson, edited.")
    cli.ok("write", "global", "b", "Second lesson.")
    ok = cli.ok("audit", "verify")
    assert ok["ok"] is True and ok["checked"] == 3
    assert cli("audit", "verify").returncode == 0

    db = _db(cli)
    try:
        # The database itself refuses edits to the ledger...
        try:
            db.execute("UPDATE audit_log SET actor = 'mallory' WHERE seq = 2")
            raise AssertionError("the audit_log UPDATE trigger did not fire")
        except sqlite3.DatabaseError as exc:
            assert "append-only" in str(exc)
        # ...so a tamperer has to drop the trigger first; verify still catches the edit.
        db.execute("DROP TRIGGER audit_log_no_update")
        db.execute("UPDATE audit_log SET actor = 'mallory' WHERE seq = 2")
    finally:
        db.close()

    reason = cli.refused("AUDIT_BROKEN", "audit", "verify")
    assert "row 2" in reason["message"]
    assert reason["data"]["broken_at"]["seq"] == 2 and reason["data"]["checked"] == 1
    proc = cli("audit", "verify")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("cairn: AUDIT_BROKEN: ")


def test_audit_verify_detects_a_removed_row(cli: Cli) -> None:
    for i in range(3):
        cli.ok("write", "global", f"k{i}", f"Lesson {i}.")
    db = _db(cli)
    try:
        db.execute("DROP TRIGGER audit_log_no_delete")
        db.execute("DELETE FROM audit_log WHERE seq = 2")
    finally:
        db.close()
    reason = cli.refused("AUDIT_BROKEN", "audit", "verify")
    assert reason["data"]["broken_at"]["seq"] == 3


def test_audit_lists_versions_before_and_after(cli: Cli) -> None:
    cli.ok("write", "global", "a", "Version one.")
    cli.ok("write", "global", "a", "Version two.")
    entries = cli.ok("audit", "--lesson", "global", "a")["entries"]
    assert [(e["action"], e["version_before"], e["version_after"]) for e in entries] == [
        ("create", None, 1),
        ("update", 1, 2),
    ]
    assert entries[1]["hash_before"] == entries[0]["hash_after"]
    text = cli("audit").stdout
    assert "create" in text and "v1->v2" in text
    assert cli.ok("audit", "--since", "2999-01-01")["entries"] == []


def _export_lines(cli: Cli) -> list[dict]:
    proc = cli("export")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines[0]["type"] == "header"
    lines[0].pop("exported_at")
    return lines


def test_export_import_round_trip_into_a_fresh_home(cli: Cli, make_cli, tmp_path: Path) -> None:
    t1 = {"CAIRN_FAKE_NOW": "2025-03-01T09:00:00Z"}
    cli.ok("write", "repo::acme/widget", "build", "Run make build.", "--tag", "ci", "--tag", "build", env=t1)
    cli.ok("write", "repo::acme/widget", "build", "Run make build -j4.", "--session", "s1")
    cli.ok("write", "repo::acme/widget", "build", "Run make build -j4.", "--session", "s2")
    cli.ok("write", "global", "python", "Use uv.", "--by-human", "--kind", "preference", "--valid-from", "2024-01-01")
    cli.ok("write", "global", "temp", "Staging is down this week.", "--ttl", "7d", "--source-agent", "claude")
    cli.ok("write", "project::shop", "old", "Deploy with fabric.")
    cli.ok("supersede", "project::shop", "new", "Deploy with the pipeline.", "--supersedes", "project::shop", "old")
    cli.ok("write", "global", "wrong", "Force-push to main when CI is slow.")
    cli.ok("forget", "global", "wrong", "--reason", "never force-push main")
    cli.ok("write", "global", "archived", "An archived lesson.")
    cli.ok("archive", "global", "archived")
    cli.ok("link", "repo::acme/widget", "build", "global", "python", "--rel", "related")
    cli.ok("feedback", "global", "python", "helped")

    dump = tmp_path / "backup.jsonl"
    exported = cli.ok("export", str(dump))
    assert exported["lines"] == len(dump.read_text().splitlines())
    assert not dump.with_name(dump.name + ".partial").exists()

    fresh = make_cli("fresh")
    result = fresh.ok("import", "--restore", str(dump))  # the operator's exact restore
    assert result["restore"] is True
    assert result["refused"] == []
    assert result["created"] == 7 and result["tombstones"] == 1
    assert _export_lines(fresh) == _export_lines(cli)
    assert fresh.ok("audit", "verify")["ok"] is True

    # What the imported store holds behaves like the original.
    assert fresh.ok("read", "global", "python")["lesson"]["trust"] == "verified"
    fresh.refused("NOT_FOUND", "read", "project::shop", "old")
    fresh.refused("TOMBSTONED", "write", "project::x", "y", "force-push to MAIN when ci is slow")
    assert len(fresh.ok("history", "repo::acme/widget", "build")["versions"]) == 3

    # Importing the same file again changes nothing.
    before = _export_lines(fresh)
    audit_before = len(fresh.ok("audit", "--limit", "10000")["entries"])
    again = fresh.ok("import", "--restore", str(dump))
    assert (again["created"], again["updated"], again["tombstones"], again["links"]) == (0, 0, 0, 0)
    assert _export_lines(fresh) == before
    assert len(fresh.ok("audit", "--limit", "10000")["entries"]) == audit_before


def test_an_import_without_restore_shows_the_files_claims_as_claims(cli: Cli, make_cli, tmp_path: Path) -> None:
    cli.ok("write", "global", "python", "Use uv.", "--by-human")
    dump = tmp_path / "backup.jsonl"
    cli.ok("export", str(dump))
    other = make_cli("other")
    other.ok("write", "global", "seed", "A lesson so the store exists.")
    token = other.ok("token", "create", "--perm", "write")["token"]
    writer = {"CAIRN_TOKEN": token}
    # A write token may not restore; the store is unchanged.
    other.refused("FORBIDDEN", "import", "--restore", str(dump), env=writer)
    other.refused("NOT_FOUND", "read", "global", "python")
    landed = other.ok("import", str(dump), env=writer)
    assert (landed["created"], landed["restore"]) == (1, False)
    lesson = other.ok("read", "global", "python")["lesson"]
    assert (lesson["trust"], lesson["origin"]) == ("candidate", "import")
    assert lesson["claimed"]["trust"] == "verified" and lesson["claimed"]["origin"] == "human"
    shown = other("read", "global", "python").stdout
    assert "claimed by the file, not granted" in shown and "trust verified" in shown
    # Tags as a string: refused with the line, nothing imported.
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"scope": "global", "key": "fine", "value": "A fine record."})
        + "\n"
        + json.dumps({"scope": "global", "key": "tagged", "value": "Tags as a string.", "tags": "deploy"})
        + "\n"
    )
    reason = other.refused("INVALID_INPUT", "import", str(bad))
    assert "line 2" in reason["message"] and "tags must be a list" in reason["message"]
    other.refused("NOT_FOUND", "read", "global", "fine")


def test_restore_and_verify_of_a_twin_of_forgotten_content_are_refused(cli: Cli) -> None:
    cli.ok("write", "project::twins", "archived", "Retry flaky tests three times.")
    cli.ok("archive", "project::twins", "archived")
    cli.ok("write", "project::twins", "candidate", "Retry flaky tests three tímes.")  # accent: the same text
    cli.ok("write", "global", "orig", "Retry flaky tests three times!")
    cli.ok("forget", "global", "orig", "--reason", "fix flaky tests instead")
    cli.refused("TOMBSTONED", "restore", "project::twins", "archived")
    cli.refused("TOMBSTONED", "review", "verify", "project::twins", "candidate")
    assert cli.ok("list", "project::twins", "--archived")["lessons"][0]["key"] == "archived"


def test_import_plain_records_from_stdin(cli: Cli) -> None:
    records = "\n".join(
        json.dumps(r)
        for r in [
            {"scope": "global", "key": "a", "value": "Plain record A.", "tags": ["x"]},
            {"scope": "repo::acme/widget", "key": "b", "value": "Plain record B.", "kind": "fact"},
        ]
    )
    result = cli.ok("import", "-", stdin=records + "\n")
    assert (result["records"], result["created"]) == (2, 2)
    assert cli.ok("read", "repo::acme/widget", "b")["lesson"]["kind"] == "fact"
    again = cli.ok("import", "-", stdin=records)
    assert (again["created"], again["unchanged"]) == (0, 2)
    text = cli("import", "-", stdin=records).stdout
    assert "imported 2 record(s)" in text


def test_export_active_leaves_out_what_reads_leave_out(cli: Cli) -> None:
    cli.ok("write", "global", "live", "A live lesson.")
    cli.ok("write", "global", "gone", "A rejected lesson.")
    cli.ok("forget", "global", "gone", "--reason", "wrong")
    cli.ok("write", "global", "shelved", "An archived lesson.")
    cli.ok("archive", "global", "shelved")
    lines = [json.loads(x) for x in cli("export", "--active").stdout.splitlines()]
    assert [x["key"] for x in lines if x["type"] == "lesson"] == ["live"]
    assert not [x for x in lines if x["type"] == "tombstone"]


def test_purge_expired_with_fake_now(cli: Cli) -> None:
    t0 = {"CAIRN_FAKE_NOW": "2025-05-01T12:00:00Z"}
    later = {"CAIRN_FAKE_NOW": "2025-05-01T12:02:00Z"}
    cli.ok("write", "global", "short", "Short-lived: the cache is cold.", "--ttl", "90s", env=t0)
    cli.ok("write", "global", "long", "Long-lived lesson.", "--ttl", "30m", env=t0)
    cli.ok("write", "global", "forever", "No TTL at all.", env=t0)
    assert cli.ok("read", "global", "short", env=t0)["lesson"]["expires_at"].startswith("2025-05-01T12:01:30")
    # Expired: gone from reads before any purge.
    assert cli.refused("NOT_FOUND", "read", "global", "short", env=later)["data"]["status"] == "expired"
    assert {x["key"] for x in cli.ok("list", env=later)["lessons"]} == {"long", "forever"}

    purged = cli.ok("purge", "--expired", env=later)
    assert purged["purged"] == 1 and purged["lessons"] == [{"scope": "global", "key": "short"}]
    cli.refused("NOT_FOUND", "history", "global", "short", env=later)
    assert "Short-lived" not in (cli.home / "cairn.db").read_bytes().decode("latin-1")
    assert cli.ok("purge", "--expired", env=later)["purged"] == 0
    assert cli.ok("audit", "verify", env=later)["ok"] is True
    last = cli.ok("audit", env=later)["entries"][-1]
    assert last["action"] == "purge" and last["detail"]["sweep"] == "expired"
    assert cli("purge", "--expired", env=later).stdout.startswith("purged 0 expired")


def test_purge_archived_older_than(cli: Cli) -> None:
    cli.ok("write", "global", "old", "Archived long ago.", env={"CAIRN_FAKE_NOW": "2025-01-01T00:00:00Z"})
    cli.ok("archive", "global", "old", env={"CAIRN_FAKE_NOW": "2025-01-02T00:00:00Z"})
    cli.ok("write", "global", "recent", "Archived recently.", env={"CAIRN_FAKE_NOW": "2025-01-01T00:00:00Z"})
    cli.ok("archive", "global", "recent", env={"CAIRN_FAKE_NOW": "2025-01-20T00:00:00Z"})
    now = {"CAIRN_FAKE_NOW": "2025-01-25T00:00:00Z"}
    assert cli.ok("purge", "--archived", "--older-than", "10d", env=now)["lessons"] == [
        {"scope": "global", "key": "old"}
    ]
    assert [x["key"] for x in cli.ok("list", "--archived", env=now)["lessons"]] == ["recent"]
    cli.refused("INVALID_INPUT", "purge", "--expired", "--older-than", "10d", env=now)


def test_import_embeds_what_it_queued_unless_told_not_to(cli: Cli) -> None:
    hash_model = {"CAIRN_EMBED_MODEL": "hash-test-64", "CAIRN_NO_DAEMON": "1"}
    records = "".join(
        json.dumps({"scope": "global", "key": f"lesson-{i}", "value": f"Imported lesson number {i} about caching."})
        + "\n"
        for i in range(5)
    )
    later = "".join(
        json.dumps({"scope": "global", "key": f"later-{i}", "value": f"A later lesson {i} about retries."}) + "\n"
        for i in range(3)
    )

    def queued_and_vectors() -> tuple[int, int]:
        db = _db(cli)
        try:
            return (
                db.execute("SELECT count(*) FROM embed_queue").fetchone()[0],
                db.execute("SELECT count(*) FROM lesson_embeddings").fetchone()[0],
            )
        finally:
            db.close()

    # --no-embed returns with the lessons queued (searchable by text, not yet by meaning).
    skipped = cli.ok("import", "--no-embed", "-", stdin=later, env=hash_model)
    assert skipped["created"] == 3 and "embedded" not in skipped and skipped["pending_embeddings"] == 3
    assert queued_and_vectors() == (3, 0)
    # It says who embeds them: no daemon here (CAIRN_NO_DAEMON), so cairn serve or the searches.
    text = cli("import", "--no-embed", "-", stdin=later, env=hash_model).stdout
    assert "searchable by meaning" not in text
    assert "3 lesson(s) still queued for embedding" in text and "once cairn serve (or a slice per search)" in text
    # A search meanwhile answers at once and says what waits.
    assert cli.ok("search", "retries", env=hash_model)["pending_embeddings"] == 0  # its slice took all three
    # By default the import embeds its queue (and what was queued before) before it returns.
    done = cli.ok("import", "-", stdin=records, env=hash_model)
    assert (done["created"], done["embedded"], done["pending_embeddings"]) == (5, 5, 0)
    assert queued_and_vectors() == (0, 8)
    text = cli("import", "-", stdin=records, env=hash_model).stdout
    assert "5 unchanged" in text and "0 embedded: searchable by meaning" in text
    assert "still queued" not in text
