"""memory-gateway's contract, verb by verb, against the real command (a subprocess per call).

Each test also looks at the corpus files byte for byte (other tools read them) and at the Cairn
store beside the corpus (which must agree with the files).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import cairn.library
from tests.compat.gateway_helpers import Result, live_files


@pytest.fixture
def store(corpus: Path) -> Iterator[Callable[[], cairn.library.Memory]]:
    opened: list[cairn.library.Memory] = []

    def open_() -> cairn.library.Memory:
        m = cairn.library.open(home=corpus / ".gateway", db=f"sqlite:///{corpus / '.gateway' / 'cairn.db'}", token="")
        opened.append(m)
        return m

    yield open_
    for m in opened:
        m.close()


def history(store: Callable[[], cairn.library.Memory], slug: str) -> dict:
    type_, stem = slug.split("/")
    return store().history(f"project::{type_}.{stem}", f"{type_}::{stem}")


GW = Callable[..., Result]


def test_create_writes_the_peer_layout_and_the_store(gw: GW, corpus: Path, store) -> None:
    r = gw(
        "create", "Merge Preference", "--type", "user", "--description", "git merge default", body="Prefer squash.\n"
    )
    assert (r.rc, r.status, r.env["slug"], r.env["reason"]) == (0, "ok", "user/merge-preference", None)
    assert set(r.env) == {"status", "verb", "slug", "data", "reason"}
    assert r.err == ""
    assert (corpus / "user" / "merge-preference.md").read_bytes() == (
        b"---\nname: Merge Preference\ndescription: git merge default\ntype: user\n---\nPrefer squash.\n"
    )
    assert (corpus / "MEMORY.md").read_bytes() == (
        "- [Merge Preference](user/merge-preference.md) — git merge default\n".encode()
    )
    audit = [json.loads(line) for line in (corpus.parent / "audit" / "memory-gateway.jsonl").read_text().splitlines()]
    assert [(a["verb"], a["slug"]) for a in audit] == [("create", "user/merge-preference")]
    h = history(store, "user/merge-preference")
    assert h["status"] == "active"
    assert [v["value"] for v in h["versions"]] == ["Prefer squash."]


def test_read_returns_the_body_and_refuses_what_is_not_there(gw: GW) -> None:
    gw("create", "profile", "--type", "user", body="first line")
    r = gw("read", "user/profile")
    assert r.rc == 0 and r.data["content"] == "first line\n" and r.data["name"] == "profile"
    missing = gw("read", "user/ghost")
    assert (missing.rc, missing.status, missing.code) == (1, "refused", "NOT_FOUND")
    for slug in ("user/../../../etc/passwd", "/etc/passwd", "../x"):
        r = gw("read", slug)
        assert (r.rc, r.code) == (1, "BOUNDARY"), slug
    assert gw("read", "profile").code == "USAGE"


def test_identity_dedup_is_type_qualified_and_canonical(gw: GW) -> None:
    assert gw("create", "My Cool Topic", "--type", "user", body="a").env["slug"] == "user/my-cool-topic"
    dup = gw("create", "my-cool-topic", "--type", "user", body="b")
    assert (dup.rc, dup.code) == (1, "DEDUP_COLLISION")
    assert gw("create", "MY COOL TOPIC", "--type", "project", body="c").env["slug"] == "project/my-cool-topic"


def test_update_appends_and_the_store_keeps_both_versions(gw: GW, store) -> None:
    gw("create", "profile", "--type", "user", body="one")
    r = gw("update", "user/profile", body="two")
    assert r.rc == 0
    assert gw("read", "user/profile").data["content"] == "one\ntwo\n"
    assert [v["value"] for v in history(store, "user/profile")["versions"]] == ["one", "one\ntwo"]
    assert gw("update", "user/none", body="x").code == "NOT_FOUND"
    assert gw("update", "user/profile", body="").code == "USAGE"


def test_supersede_same_name_archives_the_old_file_and_versions_it(gw: GW, corpus: Path, store) -> None:
    gw("create", "profile", "--type", "user", "--description", "d", body="OLDKW fact")
    r = gw("update", "--supersede", "--type", "user", "--name", "profile", body="NEWKW fact")
    assert (r.rc, r.data["superseded"], r.data["archived"]) == (0, "user/profile", ".archive/user/profile/0001.md")
    archived = (corpus / ".archive/user/profile/0001.md").read_text()
    assert archived.startswith("---\nname: profile\ndescription: d\ntype: user\narchived: ")
    assert "superseded_by: user/profile\n---\nOLDKW fact\n" in archived
    assert gw("read", "user/profile").data["content"] == "NEWKW fact\n"
    assert gw("search", "OLDKW").data["matches"] == []
    assert [m["slug"] for m in gw("search", "NEWKW").data["matches"]] == ["user/profile"]
    assert len(gw("read", "user/profile", "--archived").data["archived"]) == 1
    versions = history(store, "user/profile")["versions"]
    assert [v["value"] for v in versions] == ["OLDKW fact", "NEWKW fact"]


def test_supersede_modes(gw: GW, corpus: Path) -> None:
    gw("create", "alpha", "--type", "user", body="ALPHA")
    r = gw("update", "--supersede", "--type", "user", "--name", "beta", "--supersedes", "user/alpha", body="BETA")
    assert (r.rc, r.data["superseded"]) == (0, "user/alpha")
    assert gw("read", "user/alpha").code == "NOT_FOUND"
    assert "- [beta](user/beta.md)" in (corpus / "MEMORY.md").read_text()
    assert "user/alpha.md" not in (corpus / "MEMORY.md").read_text()
    zero = gw("update", "--supersede", "--type", "user", "--name", "brandnew", body="NEW")
    assert (zero.rc, zero.data["superseded"]) == (0, None)
    same = gw("update", "--supersede", "--type", "user", "--name", "brandnew", body="NEW")
    assert (same.rc, same.data["superseded"]) == (0, None)
    assert not (corpus / ".archive/user/brandnew").exists()
    gw("create", "note", "--type", "reference", body="NOTE")
    occupied = gw(
        "update", "--supersede", "--type", "user", "--name", "beta", "--supersedes", "reference/note", body="X"
    )
    assert (occupied.rc, occupied.code) == (1, "NEW_SLUG_OCCUPIED")
    assert gw("read", "user/beta").data["content"] == "BETA\n"
    assert (corpus / "reference/note.md").exists()
    gone = gw("update", "--supersede", "--type", "user", "--name", "z", "--supersedes", "user/ghost", body="X")
    assert gone.code == "NOT_FOUND"


def test_files_planted_by_hand_are_topics(gw: GW, corpus: Path, store) -> None:
    (corpus / "user").mkdir()
    (corpus / "user/alpha.md").write_text("---\nname: Shared Thing\ntype: user\n---\nAAA\n")
    (corpus / "user/beta.md").write_text("---\nname: shared-thing\ntype: user\n---\nBBB\n")
    r = gw("update", "--supersede", "--type", "user", "--name", "Shared Thing", body="new")
    assert (r.rc, r.code, r.data["candidates"]) == (1, "SUPERSEDE_AMBIGUOUS", ["user/alpha", "user/beta"])
    assert not (corpus / ".archive").exists()
    # planted files were adopted into the store: search finds them
    assert [m["slug"] for m in gw("search", "AAA").data["matches"]] == ["user/alpha"]
    # a file without front matter is a topic named after its file
    (corpus / "reference").mkdir()
    (corpus / "reference/plain.md").write_text("just text PLAINKW\n")
    idx = gw("index")
    assert (idx.rc, idx.data["entries"]) == (0, 3)
    assert "- [plain](reference/plain.md)\n" in (corpus / "MEMORY.md").read_text()
    assert history(store, "reference/plain")["versions"][0]["value"] == "just text PLAINKW"


def test_divergent_occupant_is_archived_not_clobbered(gw: GW, corpus: Path) -> None:
    (corpus / "user").mkdir()
    (corpus / "user/profile.md").write_text("---\nname: not-profile\ntype: user\n---\nDIVERGENT\n")
    r = gw("update", "--supersede", "--type", "user", "--name", "profile", body="NEW")
    assert r.rc == 0 and r.data["superseded"] == "user/profile"
    assert "DIVERGENT" in (corpus / ".archive/user/profile/0001.md").read_text()
    assert gw("read", "user/profile").data["content"] == "NEW\n"


def test_archive_moves_the_file_and_retires_the_lesson(gw: GW, corpus: Path, store) -> None:
    gw("create", "doomed", "--type", "feedback", body="ARCHKW text")
    gw("create", "kept", "--type", "feedback", body="kept")
    r = gw("archive", "feedback/doomed")
    assert (r.rc, r.data["archived"]) == (0, ".archive/feedback/doomed/0001.md")
    assert live_files(corpus) == [".archive/feedback/doomed/0001.md", "MEMORY.md", "feedback/kept.md"]
    assert (corpus / "MEMORY.md").read_text() == "- [kept](feedback/kept.md)\n"
    assert gw("search", "ARCHKW").data["matches"] == []
    assert history(store, "feedback/doomed")["status"] == "archived"
    assert gw("archive", "feedback/doomed").code == "NOT_FOUND"
    # the name is free again: a new topic there is live in the files and in the store
    assert gw("create", "doomed", "--type", "feedback", body="second life").rc == 0
    assert history(store, "feedback/doomed")["status"] == "active"
    assert [m["slug"] for m in gw("search", "second life").data["matches"]] == ["feedback/doomed"]


def test_usage_refusals(gw: GW, corpus: Path, tmp_path: Path, gw_env: dict[str, str]) -> None:
    assert gw("create", "rogue", body="x").code == "USAGE"
    assert gw("create", "rogue", "--type", "nope", body="x").code == "USAGE"
    valueless = gw("create", "profile", "--type", body="x")
    assert (valueless.rc, valueless.code) == (1, "USAGE")
    assert gw("create", "a\nb", "--type", "user", body="x").code == "USAGE"
    assert gw("create", "ok", "--type", "user", "--description", "a\rb", body="x").code == "USAGE"
    assert gw("create", "empty", "--type", "user", body="").code == "USAGE"
    assert gw("create", "x", "--type", "user", "--bogus", body="x").code == "USAGE"
    unknown = gw("frobnicate")
    assert (unknown.rc, unknown.code) == (1, "UNKNOWN_VERB")
    none = gw("")
    assert (none.rc, none.code) == (1, "USAGE") and "usage" in none.err
    assert live_files(corpus) == []
    helped = gw("--help")
    assert (helped.rc, helped.out) == (0, "") and "usage" in helped.err
    from tests.compat.gateway_helpers import run

    missing = run(tmp_path / "no" / "such", "read", "user/x", env=gw_env)
    assert (missing.rc, missing.status, missing.code) == (2, "error", "SETUP")


def test_neighborhood_walks_wikilinks_with_depth_clamp_and_budget(gw: GW) -> None:
    gw("create", "c", "--type", "reference", body="leaf")
    gw("create", "b", "--type", "reference", body="to [[reference/c]]")
    gw("create", "a", "--type", "project", body="to [[reference/b]] and [[reference/missing]]")
    one = gw("neighborhood", "project/a", "--depth", "1")
    assert one.data["nodes"] == ["project/a", "reference/b"]
    deep = gw("neighborhood", "project/a", "--depth", "9")
    assert deep.data["depth"] == 3 and "clamped" in deep.err
    assert deep.data["nodes"] == ["project/a", "reference/b", "reference/c"]
    small = gw("neighborhood", "project/a", "--depth", "3", "--budget", "2")
    assert small.data["nodes"] == ["project/a", "reference/b"] and small.data["truncated"] is True
    assert gw("neighborhood", "project/a", "--depth", "0").code == "USAGE"


def test_history_and_forget(gw: GW, corpus: Path, store) -> None:
    gw("create", "secret", "--type", "project", body="the token is SECRETKW")
    gw("update", "--supersede", "--type", "project", "--name", "secret", body="the token is SECRETKW2")
    h = gw("history", "project/secret")
    assert h.rc == 0 and [v["value"] for v in h.data["versions"]] == ["the token is SECRETKW", "the token is SECRETKW2"]
    assert gw("forget", "project/secret").code == "USAGE"  # a reason is required
    f = gw("forget", "project/secret", "--reason", "leaked")
    assert f.rc == 0 and f.data["removed"] == ["project/secret.md", ".archive/project/secret/0001.md"]
    assert live_files(corpus) == ["MEMORY.md"]
    assert (corpus / "MEMORY.md").read_text() == ""
    # erased from the store too: no version holds the text; the tombstone (hashes only) stays
    assert gw("history", "project/secret").code == "NOT_FOUND"
    m = store()
    assert not [line for line in m.service.export(m.principal) if "SECRETKW" in line]
    assert [t["key"] for t in m.service.tombstones(m.principal)["tombstones"]] == ["project::secret"]
    again = gw("create", "other name", "--type", "user", body="the token is SECRETKW2")
    assert (again.rc, again.code) == (1, "TOMBSTONED")
    same_slug = gw("create", "secret", "--type", "project", body="something else")
    assert same_slug.code == "TOMBSTONED"
    assert live_files(corpus) == ["MEMORY.md"]
    assert gw("forget", "project/never", "--reason", "x").code == "NOT_FOUND"


def test_foreign_lock_is_refused_after_the_bound_and_a_dead_one_reclaimed(gw: GW, corpus: Path) -> None:
    gw("create", "x", "--type", "user", body="v")
    lock = corpus / ".gateway" / "lock.d"
    lock.mkdir()
    (lock / "pid").write_text(f"{os.getpid()}\n")  # alive: this test
    (lock / "ts").write_text(f"{int(__import__('time').time())}\n")
    r = gw("create", "y", "--type", "user", body="w", MEMORY_GATEWAY_WAIT="0.5")
    assert (r.rc, r.code) == (1, "CONCURRENT_WRITER")
    assert not (corpus / "user/y.md").exists()
    (lock / "pid").write_text("99999999\n")  # a pid no process can have
    assert gw("create", "y", "--type", "user", body="w").rc == 0
    assert not lock.exists()


def test_cairn_memory_gateway_is_the_same_command(corpus: Path, gw_env: dict[str, str]) -> None:
    def cairn(*args: str, body: str = "") -> dict:
        proc = subprocess.run(
            [sys.executable, "-m", "cairn.cli.main", "memory-gateway", "--corpus", str(corpus), *args],
            input=body.encode(), capture_output=True, env=gw_env, check=False,
        )  # fmt: skip
        return json.loads(proc.stdout)

    assert cairn("create", "profile", "--type", "user", "--description", "--json", body="b")["slug"] == "user/profile"
    assert cairn("read", "user/profile")["data"]["description"] == "--json"
