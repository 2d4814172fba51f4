"""Export and import: a lossless round trip, idempotent re-import, plain records, all-or-nothing parsing."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from cairn.service.api import Cairn
from tests.conftest import human, session
from tests.contract import at, counts, export_records, refused, rows, snapshot

S = "repo::acme/widget"


def build_rich_store(svc: Cairn, me, clock) -> dict[str, int]:
    """Every kind of state the export must carry."""
    clock("2025-01-01T00:00:00Z")
    svc.write(session(me, "s1"), S, "multi", "first wording", tags=["ci"], kind="fact", source_agent="claude")
    clock("2025-01-02T00:00:00Z")
    svc.write(session(me, "s2"), S, "multi", "second wording", valid_from=at("2024-01-01"), valid_to=at("2026-01-01"))
    svc.feedback(me, S, "multi", "helped")
    svc.write(human(me), "global", "verified", "A person checked this.", trigger="review")
    # Promotion by sessions.
    for name in ("a", "b", "c"):
        svc.write(session(me, name), "project::cairn", "promoted", "Recurring advice.")
    # Rejected with a live tombstone.
    svc.write(me, S, "rejected", "Bad advice.")
    live = svc.forget(me, S, "rejected", "it breaks the build")["tombstone_id"]
    # Rejected, then the tombstone lifted (the lesson stays rejected).
    svc.write(me, S, "lifted", "Advice later found fine.")
    lifted = svc.forget(me, S, "lifted", "looked wrong")["tombstone_id"]
    svc.unforget(me, lifted, "was fine after all")
    # Archived, expiring, linked, superseded.
    svc.write(me, S, "archived", "Old news.")
    svc.archive(me, S, "archived")
    svc.write(me, S, "ttl", "Short lived.", ttl=timedelta(days=2))
    svc.write(me, S, "old-way", "Build with make.")
    svc.supersede(me, S, "new-way", "Build with just.", supersedes=(S, "old-way"))
    svc.link(me, S, "new-way", "global", "verified", "related")
    svc.link(me, S, "multi", S, "new-way", "derived_from")
    clock("2025-01-10T00:00:00Z")  # the ttl lesson is expired by now
    return {"live": live, "lifted": lifted}


def export_all(svc: Cairn, me, **kwargs) -> list[dict]:
    return export_records(svc.export(me, **kwargs))


def test_round_trip_into_an_empty_store_is_lossless(svc: Cairn, me, second_store, clock) -> None:
    build_rich_store(svc, me, clock)
    original = list(svc.export(me))
    target = Cairn(second_store)
    target.ensure_tenant(me)
    result = target.import_lines(me, original, restore=True)
    assert result["refused"] == []
    assert result["created"] == 9
    assert result["tombstones"] == 2
    assert result["links"] == 3
    assert export_records(target.export(me)) == export_records(original)


def test_round_trip_preserves_what_readers_see(svc: Cairn, me, second_store, clock) -> None:
    ids = build_rich_store(svc, me, clock)
    target = Cairn(second_store)
    target.ensure_tenant(me)
    target.import_lines(me, svc.export(me), restore=True)
    # Versions with values, record times and actors.
    a, b = svc.history(me, S, "multi"), target.history(me, S, "multi")
    assert a == b
    assert [v["value"] for v in b["versions"]] == ["first wording", "second wording", "second wording"]
    assert b["versions"][0]["recorded_at"] == "2025-01-01T00:00:00Z"
    assert [v["session"] for v in b["versions"]] == ["s1", "s2", None]
    # Trust, including verified-by-sessions and rejected.
    assert target.read(me, "project::cairn", "promoted")["lesson"]["trust"] == "verified"
    assert target.read(me, "global", "verified")["lesson"]["trust"] == "verified"
    refused("NOT_FOUND", target.read, me, S, "rejected")
    assert rows(second_store, "SELECT trust FROM lessons WHERE key = 'lifted'")[0]["trust"] == "rejected"
    # Tombstones: the live one still refuses, the lifted one does not.
    err = refused("TOMBSTONED", target.write, me, "global", "again", "bad advice!")
    assert "it breaks the build" in err.message
    assert target.write(me, "global", "fine", "Advice later found fine.")["action"] == "created"
    lifted = [t for t in target.tombstones(me, include_lifted=True)["tombstones"] if t["lifted_at"]]
    assert [(t["key"], t["lift_reason"]) for t in lifted] == [("lifted", "was fine after all")]
    assert ids["live"] != ids["lifted"]
    # Superseded state and its link.
    refused("NOT_FOUND", target.read, me, S, "old-way")
    hood = target.neighborhood(me, S, "new-way", depth=1)
    assert sorted((n["key"], n["rel"]) for n in hood["nodes"]) == [
        ("multi", "derived_from"),
        ("old-way", "supersedes"),
        ("verified", "related"),
    ]
    # Archived and expired stay so.
    assert [x["key"] for x in target.list(me, S, archived=True)["lessons"]] == ["archived"]
    assert refused("NOT_FOUND", target.read, me, S, "ttl").data["status"] == "expired"
    # The importing store's own ledger recorded the arrivals and verifies.
    assert target.audit_verify(me)["ok"] is True


def test_importing_the_same_export_twice_changes_nothing(svc: Cairn, me, second_store, clock) -> None:
    build_rich_store(svc, me, clock)
    lines = list(svc.export(me))
    target = Cairn(second_store)
    target.ensure_tenant(me)
    target.import_lines(me, lines, restore=True)
    before_counts, before = counts(second_store), snapshot(second_store)
    again = target.import_lines(me, lines, restore=True)
    assert (again["created"], again["updated"], again["tombstones"], again["links"]) == (0, 0, 0, 0)
    assert again["refused"] == []
    assert again["unchanged"] == again["records"] == len(lines) - 1  # every record but the header
    assert counts(second_store) == before_counts
    assert snapshot(second_store) == before


def test_importing_an_export_into_its_own_store_changes_nothing(svc: Cairn, me, store, clock) -> None:
    build_rich_store(svc, me, clock)
    before = snapshot(store)
    out = svc.import_lines(me, list(svc.export(me)))
    assert out["created"] == 0 and out["refused"] == []
    assert snapshot(store) == before


def test_plain_records_import(svc: Cairn, me, store) -> None:
    lines = [
        json.dumps({"scope": S, "key": "One", "value": "first plain lesson", "tags": ["a"], "kind": "fact"}),
        "",
        json.dumps({"scope": "global", "key": "two", "value": "second plain lesson", "ttl": "7d"}),
        json.dumps({"scope": "project::x", "key": "three", "value": "third", "valid_from": "2024-01-01"}),
    ]
    out = svc.import_lines(me, lines)
    assert (out["created"], out["records"], out["refused"]) == (3, 3, [])
    one = svc.read(me, S, "one")["lesson"]
    assert (one["value"], one["tags"], one["kind"], one["origin"], one["trust"]) == (
        "first plain lesson",
        ["a"],
        "fact",
        "import",
        "candidate",
    )
    assert svc.read(me, "global", "two")["lesson"]["expires_at"] is not None
    assert svc.read(me, "project::x", "three")["lesson"]["valid_from"] == "2024-01-01T00:00:00Z"
    before = snapshot(store)
    again = svc.import_lines(me, lines)
    assert (again["created"], again["unchanged"]) == (0, 3)
    assert snapshot(store) == before


def test_plain_record_with_new_content_at_an_existing_address_updates(svc: Cairn, me) -> None:
    svc.import_lines(me, [json.dumps({"scope": S, "key": "k", "value": "old"})])
    out = svc.import_lines(me, [json.dumps({"scope": S, "key": "k", "value": "new"})])
    assert out["updated"] == 1
    assert svc.read(me, S, "k")["lesson"]["value"] == "new"


def test_invalid_lines_are_listed_and_nothing_is_written(svc: Cairn, me, store) -> None:
    svc.write(me, S, "existing", "already here")
    before = snapshot(store)
    lines = [
        json.dumps({"scope": S, "key": "good", "value": "a fine record"}),
        "{not json",
        json.dumps({"scope": "repo:acme/widget", "key": "k", "value": "bad scope"}),
        json.dumps({"scope": S, "key": "good2", "value": "another fine record"}),
        json.dumps(["a", "list"]),
        json.dumps({"scope": S, "key": "", "value": "empty key"}),
        json.dumps({"scope": S, "key": "k", "value": "x" * 70_000}),
        json.dumps({"type": "mystery"}),
        json.dumps({"scope": S, "key": "k"}),
    ]
    err = refused("INVALID_INPUT", svc.import_lines, me, lines)
    assert [e["line"] for e in err.data["errors"]] == [2, 3, 5, 6, 7, 8, 9]
    for n in (2, 3, 5, 6, 7, 8, 9):
        assert f"line {n}:" in err.message
    assert "nothing was imported" in err.message
    assert snapshot(store) == before


def test_a_tombstoned_plain_record_is_refused_and_the_rest_import(svc: Cairn, me, store) -> None:
    svc.write(me, S, "bad", "Never use --force here.")
    tid = svc.forget(me, S, "bad", "destroys history")["tombstone_id"]
    lines = [
        json.dumps({"scope": "global", "key": "a", "value": "fine one"}),
        json.dumps({"scope": "project::p", "key": "sneaky", "value": "never use force here"}),
        json.dumps({"scope": S, "key": "bad", "value": "different text, tombstoned address"}),
        json.dumps({"scope": "global", "key": "b", "value": "fine two"}),
    ]
    out = svc.import_lines(me, lines)
    assert out["created"] == 2
    assert [(r["line"], r["code"]) for r in out["refused"]] == [(2, "TOMBSTONED"), (3, "TOMBSTONED")]
    assert str(tid) in out["refused"][0]["message"]
    assert svc.read(me, "global", "a")["lesson"]["value"] == "fine one"
    assert svc.read(me, "global", "b")["lesson"]["value"] == "fine two"
    refused("NOT_FOUND", svc.read, me, "project::p", "sneaky")


def test_a_lesson_record_with_another_history_is_refused_not_merged(svc: Cairn, me, second_store) -> None:
    svc.write(me, S, "k", "source store value")
    target = Cairn(second_store)
    target.ensure_tenant(me)
    target.write(me, S, "k", "a different value")
    before = snapshot(second_store)
    out = target.import_lines(me, svc.export(me))
    assert [r["code"] for r in out["refused"]] == ["CONFLICT"]
    assert target.read(me, S, "k")["lesson"]["value"] == "a different value"
    # Only the importer's ledger grew? No: a refused record writes nothing at all.
    assert snapshot(second_store) == before


def test_progress_is_reported(svc: Cairn, me) -> None:
    seen: list[tuple[int, int]] = []
    lines = [json.dumps({"scope": S, "key": f"k{i}", "value": f"value {i}"}) for i in range(3)]
    svc.import_lines(me, lines, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (3, 3)


def test_export_of_one_scope(svc: Cairn, me) -> None:
    svc.write(me, S, "a", "in scope")
    svc.write(me, "global", "b", "out of scope")
    recs = export_all(svc, me, scope=S)
    assert [(r["scope"], r["key"]) for r in recs if r["type"] == "lesson"] == [(S, "a")]


def test_export_header_and_shape(svc: Cairn, me) -> None:
    svc.write(me, S, "a", "value")
    lines = list(svc.export(me))
    header = json.loads(lines[0])
    assert (header["type"], header["format"], header["version"]) == ("header", "cairn-export", 1)
    assert "exported_at" in header
    lesson = json.loads(lines[1])
    assert lesson["type"] == "lesson"
    assert [v["value"] for v in lesson["versions"]] == ["value"]


@pytest.mark.parametrize("bad_header", [{"type": "header", "format": "other", "version": 1}])
def test_unknown_export_format_is_refused(svc: Cairn, me, store, bad_header) -> None:
    before = snapshot(store)
    err = refused("INVALID_INPUT", svc.import_lines, me, [json.dumps(bad_header)])
    assert err.data["errors"][0]["line"] == 1
    assert snapshot(store) == before


def _table_by_address(store, table: str) -> list[dict]:
    """Rows of ``lessons`` or ``lesson_versions`` with store-local ids replaced by addresses."""
    addr = {r["id"]: (r["scope"], r["key"]) for r in rows(store, "SELECT id, scope, key FROM lessons")}
    out = []
    for r in rows(store, f"SELECT * FROM {table}"):
        r = dict(r)
        r.pop("id")
        if "lesson_id" in r:
            r["lesson_id"] = addr[r["lesson_id"]]
        if r.get("superseded_by") is not None:
            r["superseded_by"] = addr[r["superseded_by"]]
        out.append(r)
    return sorted(out, key=repr)


def test_round_trip_reproduces_the_tables(svc: Cairn, me, store, second_store, clock) -> None:
    build_rich_store(svc, me, clock)
    target = Cairn(second_store)
    target.ensure_tenant(me)
    target.import_lines(me, svc.export(me), restore=True)
    for table in ("lessons", "lesson_versions"):
        assert _table_by_address(second_store, table) == _table_by_address(store, table), table
    tags = "SELECT l.scope, l.key, t.tag FROM lesson_tags t JOIN lessons l ON l.id = t.lesson_id ORDER BY 1, 2, 3"
    assert rows(second_store, tags) == rows(store, tags)
    tomb = (
        "SELECT content_hash, scope, key, reason, created_at, created_by, lifted_at, lifted_by, lift_reason "
        "FROM tombstones ORDER BY id"
    )
    assert rows(second_store, tomb) == rows(store, tomb)


# -- an import carries data, not authority -----------------------------------------------------------


def _writer(me):
    from dataclasses import replace

    from cairn.core.principal import READ, WRITE

    return replace(me, actor="importer", permissions=frozenset({READ, WRITE}))


def test_a_write_token_import_lands_candidates_and_keeps_the_claims_as_claims(
    svc: Cairn, me, second_store, clock
) -> None:
    build_rich_store(svc, me, clock)
    target = Cairn(second_store)
    target.ensure_tenant(me)
    writer = _writer(me)
    lines = list(svc.export(me))
    out = target.import_lines(writer, lines)
    assert out["restore"] is False
    # The rejected lessons are not brought back; their tombstones are.
    rejected = [n for n, r in enumerate(export_records(lines), 1) if r.get("key") in ("rejected", "lifted")]
    rejected = [n for n in rejected if json.loads(lines[n - 1])["type"] == "lesson"]
    assert len(rejected) == 2
    assert sorted((r["line"], r["code"]) for r in out["refused"]) == [(n, "FORBIDDEN") for n in rejected]
    assert out["tombstones"] == 2
    lesson = target.read(me, "global", "verified")["lesson"]
    assert (lesson["trust"], lesson["origin"], lesson["author"], lesson["created_by"]) == (
        "candidate",
        "import",
        "importer",
        "importer",
    )
    assert lesson["claimed"]["trust"] == "verified"
    assert lesson["claimed"]["origin"] == "human"
    assert lesson["claimed"]["created_by"] == "agent-a"
    assert lesson["claimed"]["created_at"] == "2025-01-02T00:00:00Z"
    promoted = target.read(me, "project::cairn", "promoted")["lesson"]
    assert (promoted["trust"], promoted["seen_count"]) == ("candidate", 1)
    assert promoted["claimed"]["seen_count"] == 3 and promoted["claimed"]["trust"] == "verified"
    multi = target.read(me, S, "multi")["lesson"]
    assert (multi["helped_count"], multi["claimed"]["helped_count"]) == (0, 1)
    assert multi["value"] == "second wording" and multi["tags"] == ["ci"]  # data arrives as it was
    # One version, by the importer, now; not the exporter's history.
    history = target.history(me, S, "multi")["versions"]
    assert [(v["action"], v["actor"]) for v in history] == [("import", "importer")]
    # Every lesson waits in review; nothing arrived verified.
    assert {r["trust"] for r in rows(second_store, "SELECT trust FROM lessons")} == {"candidate"}
    # State stays out of reads: archived stays archived, superseded stays superseded.
    assert [x["key"] for x in target.list(me, S, archived=True)["lessons"]] == ["archived"]
    refused("NOT_FOUND", target.read, me, S, "old-way")
    refused("TOMBSTONED", target.write, me, "global", "again", "bad advice!")
    # The ledger says what happened: imports with claims, not restores.
    entries = [json.loads(r["detail"]) for r in rows(second_store, "SELECT * FROM audit_log WHERE action = 'import'")]
    assert entries and all(d.get("claimed") is True and "restore" not in d for d in entries)
    assert target.audit_verify(me)["ok"] is True
    # The claims travel with the lesson: an export carries them, a restore keeps them.
    exported = [r for r in export_records(target.export(me)) if r.get("key") == "verified"][0]
    assert exported["claimed"]["trust"] == "verified"
    before = snapshot(second_store)
    again = target.import_lines(writer, svc.export(me))
    assert again["created"] == 0 and again["tombstones"] == 0 and again["links"] == 0
    assert snapshot(second_store) == before


def test_restore_is_an_admins_and_is_audited_as_a_restore(svc: Cairn, me, second_store, clock) -> None:
    build_rich_store(svc, me, clock)
    lines = list(svc.export(me))
    target = Cairn(second_store)
    target.ensure_tenant(me)
    before = snapshot(second_store)
    err = refused("FORBIDDEN", target.import_lines, _writer(me), lines, restore=True)
    assert "admin" in err.message
    assert snapshot(second_store) == before
    out = target.import_lines(me, lines, restore=True)
    assert out["restore"] is True and out["refused"] == []
    assert target.read(me, "global", "verified")["lesson"]["trust"] == "verified"
    assert target.read(me, "global", "verified")["lesson"]["claimed"] is None
    entries = [json.loads(r["detail"]) for r in rows(second_store, "SELECT * FROM audit_log WHERE action = 'import'")]
    assert len(entries) == 9 and all(d["restore"] is True for d in entries)


def test_a_plain_records_author_is_a_claim_unless_restored(svc: Cairn, me, store) -> None:
    line = json.dumps({"scope": S, "key": "k", "value": "Someone else wrote this.", "author": "alice"})
    lesson = svc.import_lines(human(me), [line]) and svc.read(me, S, "k")["lesson"]
    # A person importing a file does not vouch for it: a candidate, authored by the importer.
    assert (lesson["trust"], lesson["author"], lesson["claimed"]) == ("candidate", "agent-a", {"author": "alice"})
    line2 = json.dumps({"scope": S, "key": "k2", "value": "Restored authorship.", "author": "alice"})
    svc.import_lines(me, [line2], restore=True)
    lesson2 = svc.read(me, S, "k2")["lesson"]
    assert (lesson2["author"], lesson2["claimed"]) == ("alice", None)


def test_import_applies_the_write_paths_types_all_or_nothing(svc: Cairn, me, store) -> None:
    export_line = export_all(svc, me)  # header only
    assert export_line[0]["type"] == "header"
    svc.write(me, S, "existing", "already here")
    svc.write(me, S, "lesson", "an exported lesson")
    good = [r for r in export_records(svc.export(me)) if r.get("key") == "lesson"][0]
    as_string = dict(good, key="as-string", versions=[dict(good["versions"][0], tags="ci")])
    counted = dict(good, key="counted", versions=[dict(good["versions"][0], seen_count="5")])
    flag = dict(good, key="flag", versions=[dict(good["versions"][0], archived="yes")])
    agent = dict(good, key="agent", versions=[dict(good["versions"][0], source_agent=5)])
    long_agent = dict(good, key="long", versions=[dict(good["versions"][0], source_agent="x" * 501)])
    big_claims = dict(good, key="claims", claimed={"author": "x" * 9000})
    before = snapshot(store)
    lines = [
        json.dumps({"scope": S, "key": "fine", "value": "a fine record"}),
        json.dumps({"scope": S, "key": "plain", "value": "tags as a string", "tags": "deploy"}),
        json.dumps(as_string),
        json.dumps(counted),
        json.dumps(flag),
        json.dumps(agent),
        json.dumps(long_agent),
        json.dumps({"scope": S, "key": "n", "value": "tags of numbers", "tags": [1, 2]}),
        json.dumps(big_claims),
    ]
    for restore in (False, True):
        err = refused("INVALID_INPUT", svc.import_lines, me, lines, restore=restore)
        assert [e["line"] for e in err.data["errors"]] == [2, 3, 4, 5, 6, 7, 8, 9]
        assert "tags must be a list of strings" in err.data["errors"][0]["message"]
        assert '["deploy"]' in err.data["errors"][0]["message"]  # the corrected form
        assert "nothing was imported" in err.message
        assert snapshot(store) == before
    # Not split into characters by any path.
    assert rows(store, "SELECT tag FROM lesson_tags WHERE tag IN ('d', 'c', 'i')") == []


def test_an_exported_lesson_whose_content_was_forgotten_here_is_refused(svc: Cairn, me, second_store) -> None:
    svc.write(me, S, "k", "Pin the compiler to version 12.")
    target = Cairn(second_store)
    target.ensure_tenant(me)
    target.write(me, "global", "orig", "Pin the compiler to version 12.")
    target.forget(me, "global", "orig", "wrong")
    before = snapshot(second_store)
    for restore in (False, True):
        out = target.import_lines(me, svc.export(me), restore=restore)
        assert [r["code"] for r in out["refused"]] == ["TOMBSTONED"]
        assert snapshot(second_store) == before


def test_a_restore_batch_creates_the_new_lessons_in_file_order_and_sends_the_rest_down_the_general_path(
    svc: Cairn, me, second_store
) -> None:
    """New lessons are written together; a held address, a forgotten content and a rejected lesson
    are each answered as one at a time would answer them, and the ledger proves every row."""
    for key, value in (("one", "First."), ("held", "Held here."), ("two", "Second."), ("gone", "Forgotten text.")):
        svc.write(me, S, key, value, tags=["ci"])
    svc.write(me, S, "bad", "Rejected advice.")
    svc.forget(me, S, "bad", "wrong")
    svc.write(me, S, "three", "Third.")
    lines = list(svc.export(me, active_only=False))
    target = Cairn(second_store)
    target.ensure_tenant(me)
    held = [ln for ln in lines if json.loads(ln).get("key") == "held"]
    target.import_lines(me, [lines[0], *held], restore=True)
    target.write(me, "global", "x", "Forgotten text.")
    target.forget(me, "global", "x", "forgotten here")
    out = target.import_lines(me, lines, restore=True)
    assert (out["created"], out["unchanged"]) == (4, 1)  # one, two, bad (rejected, as restored), three
    assert [(r["code"], "Forgotten" in r["message"] or "tombstone" in r["message"]) for r in out["refused"]] == [
        ("TOMBSTONED", True)
    ]
    refused("NOT_FOUND", target.read, me, S, "gone")
    created = rows(second_store, "SELECT key FROM audit_log WHERE action = 'import' ORDER BY seq")
    assert [r["key"] for r in created] == ["held", "one", "two", "bad", "three"]
    assert target.history(me, S, "two") == svc.history(me, S, "two")
    assert target.audit_verify(me)["ok"] is True
    assert target.import_lines(me, lines, restore=True)["created"] == 0


def test_a_tombstone_record_refuses_a_lesson_after_it_in_the_same_batch(svc: Cairn, me, second_store) -> None:
    from cairn.core.content import content_hash, content_identity

    svc.write(me, S, "k", "Pin the compiler to version 12.")
    header, lesson = list(svc.export(me))[:2]
    text = "Pin the compiler to version 12."
    tomb = {
        "type": "tombstone", "content_hash": content_hash(text), "identity": content_identity(text),
        "scope": "global", "key": "elsewhere", "reason": "wrong", "created_at": "2025-01-01T00:00:00Z",
        "created_by": "someone", "lifted_at": None, "lifted_by": None, "lift_reason": None,
    }  # fmt: skip
    target = Cairn(second_store)
    target.ensure_tenant(me)
    out = target.import_lines(me, [header, json.dumps(tomb), lesson], restore=True)
    assert out["tombstones"] == 1 and out["created"] == 0
    assert [r["code"] for r in out["refused"]] == ["TOMBSTONED"]
    assert rows(second_store, "SELECT key FROM lessons") == []
