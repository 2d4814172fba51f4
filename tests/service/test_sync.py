"""Sync between two real stores (two SQLite files; SQLite and Postgres): the feed, the idempotent
apply, merged histories and the conflict rule, forgetting wins, trust, tenancy and scopes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cairn.core import sync as models
from cairn.core.principal import ADMIN, READ, WRITE, Principal
from cairn.errors import CairnError
from cairn.runtime.local import local_principal
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.conftest import human, new_store_url
from tests.contract import rows

S = "repo::acme/widget"
OTHER = "repo::acme/other"


class Side:
    """One store in a test: its service and the principal acting in it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.svc = Cairn(store)
        self.me = local_principal()
        self.svc.ensure_tenant(self.me)

    @property
    def id(self) -> str:
        return self.svc.sync_store_id(self.me)

    def pull_from(self, other: Side, *, by: Principal | None = None, limit: int = 500) -> models.ApplyResult:
        """Everything ``other`` has after what this side already received from it, in pages."""
        total = None
        while True:
            since = self.svc.sync_peer_state(self.me, other.id).pulled_cursor
            batch = other.svc.sync_feed(other.me, since=since, limit=limit, exclude_origin=self.id)
            result = self.svc.sync_apply(by or self.me, batch)
            total = (
                result
                if total is None
                else total.model_copy(
                    update={
                        "applied": total.applied + result.applied,
                        "skipped": total.skipped + result.skipped,
                        "conflicts": total.conflicts + result.conflicts,
                        "refused": total.refused + result.refused,
                        "head": result.head,
                    }
                )
            )
            if not batch.more:
                return total

    def versions(self) -> dict[tuple[str, str], set[str]]:
        got: dict[tuple[str, str], set[str]] = {}
        for r in rows(self.store, "SELECT scope, key, uid FROM lesson_versions"):
            got.setdefault((r["scope"], r["key"]), set()).add(r["uid"])
        return got

    def value(self, scope: str, key: str) -> str:
        return self.svc.read(self.me, scope, key)["lesson"]["value"]

    def active(self, value: str) -> bool:
        found = rows(self.store, "SELECT value, trust, archived_at FROM lessons")
        return any(r["value"] == value and r["trust"] != "rejected" for r in found)


@pytest.fixture(params=["sqlite-sqlite", "sqlite-postgres"])
def pair(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A laptop (SQLite) and a server (SQLite or Postgres), both empty and migrated."""
    second = request.param.split("-")[1]
    stores = [
        Store(new_store_url(request, "sqlite", tmp_path / "laptop")),
        Store(new_store_url(request, second, tmp_path / "server")),
    ]
    for s in stores:
        s.ensure_schema()
    yield Side(stores[0]), Side(stores[1])
    for s in stores:
        s.dispose()


def test_a_store_id_is_made_once_and_kept(pair) -> None:
    laptop, server = pair
    assert laptop.id == laptop.id
    assert laptop.id != server.id
    assert len(laptop.id) == 32


def test_both_sides_end_with_the_same_versions(pair) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "uv", "Install with uv.")
    laptop.svc.write(laptop.me, S, "uv", "Install with uv, not pip.")
    laptop.svc.feedback(laptop.me, S, "uv", "helped")
    server.svc.write(server.me, "global", "tabs", "Indent with spaces.", tags=["style"])
    server.svc.archive(server.me, "global", "tabs")
    server.pull_from(laptop)
    laptop.pull_from(server)
    assert laptop.versions() == server.versions()
    assert server.value(S, "uv") == "Install with uv, not pip."
    assert server.svc.read(server.me, S, "uv")["lesson"]["helped_count"] == 1
    with pytest.raises(CairnError) as err:  # archived travels: hidden from reads on the laptop too
        laptop.svc.read(laptop.me, "global", "tabs")
    assert "archived" in err.value.message
    # Each store's own chain, and its state, still verify after applying the other's events.
    assert laptop.svc.audit_verify(laptop.me)["ok"]
    assert server.svc.audit_verify(server.me)["ok"]


def test_a_replayed_batch_changes_nothing(pair) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "a", "First lesson.")
    laptop.svc.write(laptop.me, S, "b", "Second lesson.")
    batch = laptop.svc.sync_feed(laptop.me, since=0)
    first = server.svc.sync_apply(server.me, batch)
    assert first.applied == 2
    tables = {t: rows(server.store, f"SELECT * FROM {t} ORDER BY 1, 2") for t in ("lessons", "lesson_versions")}
    head = first.head
    again = server.svc.sync_apply(server.me, batch)
    assert (again.applied, again.skipped, again.refused) == (0, 2, [])
    assert again.head == head  # not even an audit row
    assert {t: rows(server.store, f"SELECT * FROM {t} ORDER BY 1, 2") for t in tables} == tables


def test_a_cut_sync_resumes_where_it_stopped(pair) -> None:
    laptop, server = pair
    for n in range(7):
        laptop.svc.write(laptop.me, S, f"k{n}", f"Lesson number {n}.")
    page = laptop.svc.sync_feed(laptop.me, since=0, limit=3)
    assert page.more and len(page.events) == 3
    server.svc.sync_apply(server.me, page)
    assert server.svc.sync_peer_state(server.me, laptop.id).pulled_cursor == page.cursor
    result = server.pull_from(laptop, limit=3)  # continues from the recorded cursor
    assert result.applied == 4 and result.skipped == 0
    assert len(rows(server.store, "SELECT id FROM lessons")) == 7


def test_echo_is_not_fed_back_and_own_events_are_skipped(pair) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "a", "From the laptop.")
    server.pull_from(laptop)
    back = server.svc.sync_feed(server.me, since=0, exclude_origin=laptop.id)
    assert back.events == []
    everything = server.svc.sync_feed(server.me, since=0)
    assert [e.origin_store for e in everything.events] == [laptop.id]
    result = laptop.svc.sync_apply(laptop.me, everything)
    assert (result.applied, result.skipped) == (0, 1)


def test_the_same_address_changed_on_both_sides_is_a_reviewed_conflict(pair, clock) -> None:
    laptop, server = pair
    clock("2025-01-01T00:00:00Z")
    laptop.svc.write(laptop.me, S, "build", "Build with make.")
    server.pull_from(laptop)
    clock("2025-01-02T00:00:00Z")
    laptop.svc.write(laptop.me, S, "build", "Build with just.")
    clock("2025-01-03T00:00:00Z")
    server.svc.write(server.me, S, "build", "Build with bazel.")
    assert server.pull_from(laptop).conflicts == 1
    assert laptop.pull_from(server).conflicts == 1
    # Both versions kept on both sides; the same current value (the later record time).
    assert laptop.versions() == server.versions()
    assert len(laptop.versions()[(S, "build")]) == 3
    assert laptop.value(S, "build") == server.value(S, "build") == "Build with bazel."
    for side in (laptop, server):
        queue = side.svc.review_queue(side.me)["candidates"]
        assert [(c["key"], c.get("conflict")) for c in queue] == [("build", True)]
        assert side.svc.audit_verify(side.me)["ok"]


def test_a_persons_write_wins_a_conflict_over_a_later_agents(pair, clock) -> None:
    laptop, server = pair
    clock("2025-01-01T00:00:00Z")
    laptop.svc.write(laptop.me, S, "db", "Use SQLite.")
    server.pull_from(laptop)
    clock("2025-01-02T00:00:00Z")
    laptop.svc.write(human(laptop.me), S, "db", "Use Postgres.")
    clock("2025-01-05T00:00:00Z")
    server.svc.write(server.me, S, "db", "Use MySQL.")
    server.pull_from(laptop)
    laptop.pull_from(server)
    assert laptop.value(S, "db") == server.value(S, "db") == "Use Postgres."


def test_a_resolution_by_a_person_leaves_the_review_queue_on_both_sides(pair, clock) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "x", "One.")
    server.pull_from(laptop)
    laptop.svc.write(laptop.me, S, "x", "Two.")
    server.svc.write(server.me, S, "x", "Three.")
    server.pull_from(laptop)
    laptop.pull_from(server)
    laptop.svc.write(human(laptop.me), S, "x", "Three, decided.")
    server.pull_from(laptop)
    for side in (laptop, server):
        assert side.value(S, "x") == "Three, decided."
        assert side.svc.review_queue(side.me)["candidates"] == []
    assert laptop.versions() == server.versions()


# -- forgetting wins ------------------------------------------------------------------------------


def test_a_tombstone_travels_and_forgets_the_content_under_any_key(pair) -> None:
    laptop, server = pair
    server.svc.write(server.me, S, "token", "The deploy token is hunter2.")
    laptop.pull_from(server)
    # Offline, the laptop copies the same content under a new key; the server forgets it meanwhile.
    laptop.svc.write(laptop.me, OTHER, "copy", "The deploy token is hunter2.")
    server.svc.forget(server.me, S, "token", "a secret")
    laptop.pull_from(server)
    assert not laptop.active("The deploy token is hunter2.")
    with pytest.raises(CairnError) as err:
        laptop.svc.write(laptop.me, "global", "again", "The deploy token is hunter2.")
    assert err.value.code == "TOMBSTONED"


def test_a_forgotten_content_pushed_under_a_new_key_stays_inactive(pair) -> None:
    laptop, server = pair
    server.svc.write(server.me, S, "token", "The deploy token is hunter2.")
    laptop.pull_from(server)
    server.svc.forget(server.me, S, "token", "a secret")
    # The stale laptop writes the content again (a recurrence, and a copy under a new key), then pushes first.
    laptop.svc.write(laptop.me, S, "token", "The deploy token is hunter2.")
    laptop.svc.write(laptop.me, OTHER, "copy", "The deploy token is hunter2.")
    result = server.pull_from(laptop)
    assert {r.code for r in result.refused} == {"TOMBSTONED"}
    assert result.applied == 0
    assert not server.active("The deploy token is hunter2.")
    actions = [e["action"] for e in server.svc.audit(server.me)["entries"]]
    assert "sync-refused" in actions
    # And once the laptop pulls, it holds the content nowhere as active either.
    laptop.pull_from(server)
    assert not laptop.active("The deploy token is hunter2.")
    assert server.svc.audit_verify(server.me)["ok"] and laptop.svc.audit_verify(laptop.me)["ok"]


def test_forgotten_text_never_leaves_a_store(pair) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "leak", "password=swordfish")
    laptop.svc.forget(laptop.me, S, "leak", "a secret")
    batch = laptop.svc.sync_feed(laptop.me, since=0)
    assert [e.kind for e in batch.events] == ["tombstone"]
    assert "swordfish" not in batch.model_dump_json()
    server.svc.sync_apply(server.me, batch)
    with pytest.raises(CairnError) as err:
        server.svc.write(server.me, "global", "leak2", "password=swordfish")
    assert err.value.code == "TOMBSTONED"


def test_a_purge_erases_the_content_and_says_so(pair) -> None:
    laptop, server = pair
    server.svc.write(server.me, S, "old", "Rotate keys monthly.")
    laptop.pull_from(server)
    server.svc.forget(server.me, S, "old", "wrong")
    server.svc.erase_forgotten(server.me, S, "old")
    laptop.pull_from(server)
    assert rows(laptop.store, "SELECT id FROM lessons WHERE value = 'Rotate keys monthly.'") == []
    assert rows(laptop.store, "SELECT id FROM lesson_versions WHERE value = 'Rotate keys monthly.'") == []
    purges = [e for e in laptop.svc.audit(laptop.me)["entries"] if e["action"] == "purge"]
    assert purges and purges[-1]["detail"]["sweep"] == "sync"
    assert purges[-1]["detail"]["sync"]["peer"] == server.id
    assert laptop.svc.audit_verify(laptop.me)["ok"]


def test_only_an_unforget_lifts_a_tombstone_and_it_travels(pair) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "t", "Tabs are fine here.")
    tomb = laptop.svc.forget(laptop.me, S, "t", "looked wrong")["tombstone_id"]
    server.pull_from(laptop)
    laptop.svc.unforget(human(laptop.me), tomb, "it was right")
    server.pull_from(laptop)
    assert server.svc.tombstones(server.me)["tombstones"] == []
    server.svc.write(server.me, "global", "t2", "Tabs are fine here.")  # no longer refused
    assert server.svc.audit_verify(server.me)["ok"]


def test_an_unforget_needs_the_right_to_unforget_where_it_lands(pair) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "t", "Tabs are fine here.")
    tomb = laptop.svc.forget(laptop.me, S, "t", "looked wrong")["tombstone_id"]
    server.pull_from(laptop)
    laptop.svc.unforget(laptop.me, tomb, "it was right")
    writer = replace(server.me, permissions=frozenset({READ, WRITE}))
    result = server.pull_from(laptop, by=writer)
    assert [r.code for r in result.refused] == ["FORBIDDEN"]
    assert len(server.svc.tombstones(server.me)["tombstones"]) == 1


# -- trust ----------------------------------------------------------------------------------------


def test_verified_does_not_travel_upward_by_itself(pair) -> None:
    laptop, server = pair
    laptop.svc.write(human(laptop.me), S, "v", "Checked by a person.")
    writer = replace(server.me, permissions=frozenset({READ, WRITE}))  # a member's token, not an admin's
    server.pull_from(laptop, by=writer)
    lesson = server.svc.read(server.me, S, "v")["lesson"]
    assert lesson["trust"] == "candidate"
    assert lesson["claimed"]["trust"] == "verified"


def test_an_admin_may_carry_verified(pair) -> None:
    laptop, server = pair
    laptop.svc.write(human(laptop.me), S, "v", "Checked by a person.")
    server.pull_from(laptop)  # the server's own admin applies
    assert server.svc.read(server.me, S, "v")["lesson"]["trust"] == "verified"


# -- tenancy and scopes ----------------------------------------------------------------------------


def test_a_read_only_principal_may_pull_but_never_apply(pair) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "a", "A lesson.")
    reader = replace(server.me, permissions=frozenset({READ}))
    batch = laptop.svc.sync_feed(replace(laptop.me, permissions=frozenset({READ})), since=0)
    assert len(batch.events) == 1
    with pytest.raises(CairnError) as err:
        server.svc.sync_apply(reader, batch)
    assert err.value.code == "FORBIDDEN"
    assert rows(server.store, "SELECT id FROM lessons") == []
    assert server.svc.sync_peer_state(server.me, laptop.id).pulled_cursor == 0


def test_another_tenant_sees_and_changes_nothing(pair) -> None:
    laptop, server = pair
    server.svc.write(server.me, S, "mine", "The local tenant's lesson.")
    stranger = Principal("acme", "eve", permissions=frozenset({READ, WRITE, ADMIN}))
    server.svc.ensure_tenant(stranger)
    assert server.svc.sync_feed(stranger, since=0).events == []
    laptop.svc.write(laptop.me, S, "mine", "Pushed into acme.")
    server.svc.sync_apply(stranger, laptop.svc.sync_feed(laptop.me, since=0))
    assert server.value(S, "mine") == "The local tenant's lesson."
    assert server.svc.sync_peer_state(server.me, laptop.id).pulled_cursor == 0
    assert server.svc.sync_store_id(stranger) != server.id


def test_a_scope_limited_feed_holds_only_its_scopes_and_its_apply_refuses_others(pair) -> None:
    laptop, server = pair
    server.svc.write(server.me, S, "in", "Inside the scope.")
    server.svc.write(server.me, OTHER, "out", "Outside the scope.")
    server.svc.link(server.me, S, "in", OTHER, "out", "related")
    limited = replace(server.me, scope_patterns=(S,))
    batch = server.svc.sync_feed(limited, since=0)
    assert {e.body.get("scope") for e in batch.events} == {S}
    assert [e.kind for e in batch.events] == ["version"]
    assert "Outside" not in batch.model_dump_json()
    laptop.svc.write(laptop.me, S, "in2", "Pushed inside.")
    laptop.svc.write(laptop.me, OTHER, "out2", "Pushed outside.")
    result = server.svc.sync_apply(limited, laptop.svc.sync_feed(laptop.me, since=0))
    assert result.applied == 1
    assert [(r.code, r.scope) for r in result.refused] == [("FORBIDDEN", OTHER)]
    assert not server.active("Pushed outside.")


def test_bad_input_is_refused_with_a_code(pair) -> None:
    laptop, server = pair
    with pytest.raises(CairnError) as err:
        server.svc.sync_feed(server.me, since=-1)
    assert err.value.code == "INVALID_INPUT"
    with pytest.raises(CairnError):
        server.svc.sync_peer_state(server.me, "not-a-store")
    own = server.svc.sync_feed(server.me, since=0)
    with pytest.raises(CairnError) as err:
        server.svc.sync_apply(server.me, own)
    assert err.value.code == "INVALID_INPUT"
    laptop.svc.write(laptop.me, S, "a", "A lesson.")
    batch = laptop.svc.sync_feed(laptop.me, since=0)
    forged = batch.model_copy(deep=True)
    forged.events[0].body["value"] = "Something else entirely."
    result = server.svc.sync_apply(server.me, forged)
    assert [r.code for r in result.refused] == ["INVALID_INPUT"]
    assert rows(server.store, "SELECT id FROM lessons") == []


def test_record_pushed_and_peer_state(pair) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "a", "A lesson.")
    batch = laptop.svc.sync_feed(laptop.me, since=0, exclude_origin=server.id)
    result = server.svc.sync_apply(server.me, batch)
    laptop.svc.sync_record_pushed(laptop.me, server.id, batch.cursor, result.head)
    state = laptop.svc.sync_peer_state(laptop.me, server.id)
    assert state.pushed_cursor == batch.cursor and state.peer_head == result.head
    assert state.last_pushed_at is not None
    theirs = server.svc.sync_peer_state(server.me, laptop.id)
    assert theirs.pulled_cursor == batch.cursor and theirs.peer_head == batch.head
    # The peer's head is in this store's own chain too.
    exchange = [e for e in server.svc.audit(server.me)["entries"] if e["action"] == "sync-exchange"]
    assert exchange[-1]["detail"]["peer_head"]["hash"] == batch.head.hash


def test_a_person_verifying_a_conflicted_lesson_settles_it_on_both_sides(pair) -> None:
    laptop, server = pair
    laptop.svc.write(human(laptop.me), S, "x", "One.")
    server.pull_from(laptop)
    laptop.svc.write(human(laptop.me), S, "x", "Two.")
    server.svc.write(human(server.me), S, "x", "Three.")
    server.pull_from(laptop)
    laptop.pull_from(server)
    current = laptop.svc.read(laptop.me, S, "x")["lesson"]
    assert current["trust"] == "verified"
    assert laptop.svc.verify(human(laptop.me), S, "x")["changed"] is True  # not "already verified"
    server.pull_from(laptop)
    for side in (laptop, server):
        assert side.svc.review_queue(side.me)["candidates"] == []
        assert side.value(S, "x") == current["value"]
    assert laptop.versions() == server.versions()


def test_a_batch_from_the_wire_is_checked(pair) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "a", "A lesson.")
    wire = laptop.svc.sync_feed(laptop.me, since=0).model_dump(mode="json")
    assert server.svc.sync_apply(server.me, wire).applied == 1  # the parsed JSON is accepted as is
    too_many = {**wire, "events": wire["events"] * (models.MAX_BATCH + 1)}
    for bad in (too_many, {**wire, "store_id": "x"}, {**wire, "cursor": -1}, {**wire, "surprise": 1}):
        with pytest.raises(CairnError) as err:
            server.svc.sync_apply(server.me, bad)
        assert err.value.code == "INVALID_INPUT"
    with pytest.raises(CairnError) as err:
        laptop.svc.sync_record_pushed(laptop.me, server.id, 1, {"seq": 1, "hash": "nope"})
    assert err.value.code == "INVALID_INPUT"


# -- two laptops and a server ------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def trio(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Laptops A and B (SQLite) and a server (SQLite or Postgres)."""
    urls = [
        new_store_url(request, "sqlite", tmp_path / "a"),
        new_store_url(request, "sqlite", tmp_path / "b"),
        new_store_url(request, request.param, tmp_path / "server"),
    ]
    stores = [Store(u) for u in urls]
    for s in stores:
        s.ensure_schema()
    yield tuple(Side(s) for s in stores)
    for s in stores:
        s.dispose()


def sync(laptop: Side, server: Side) -> None:
    """What `cairn sync` does for one laptop: pull, then push (each resumable)."""
    laptop.pull_from(server)
    server.pull_from(laptop)


def test_offline_writes_on_two_laptops_converge_through_the_server(trio) -> None:
    a, b, server = trio
    a.svc.write(a.me, S, "from-a", "Written on laptop A offline.")
    b.svc.write(b.me, S, "from-b", "Written on laptop B offline.")
    b.svc.write(b.me, "global", "shared", "Both laptops link here.")
    b.svc.link(b.me, S, "from-b", "global", "shared", "related")
    for _ in range(2):
        sync(a, server)
        sync(b, server)
    assert a.versions() == b.versions() == server.versions()
    assert a.value(S, "from-b") == "Written on laptop B offline."
    assert b.value(S, "from-a") == "Written on laptop A offline."
    linked = a.svc.neighborhood(a.me, S, "from-b")["nodes"]
    assert [(n["key"], n["rel"]) for n in linked] == [("shared", "related")]  # links travel too
    # Nothing is applied twice, nothing echoes: one more round changes no chain.
    heads = [s.svc.sync_feed(s.me, since=0, limit=1).head for s in (a, b, server)]
    sync(a, server)
    sync(b, server)
    assert [s.svc.sync_feed(s.me, since=0, limit=1).head for s in (a, b, server)] == heads
    for side in (a, b, server):
        assert side.svc.audit_verify(side.me)["ok"]


def test_forgotten_on_one_laptop_is_active_nowhere_after_the_stale_one_syncs(trio) -> None:
    a, b, server = trio
    a.svc.write(a.me, S, "token", "The deploy token is hunter2.")
    sync(a, server)
    sync(b, server)
    b.svc.forget(b.me, S, "token", "a secret")  # while A is offline
    sync(b, server)
    # A, stale, writes a recurrence and the same content under a new key, then syncs.
    a.svc.write(a.me, S, "token", "The deploy token is hunter2.")
    a.svc.write(a.me, OTHER, "copy", "The deploy token is hunter2.")
    sync(a, server)
    sync(b, server)
    for side in (a, b, server):
        assert not side.active("The deploy token is hunter2."), side.store.url
        assert side.svc.audit_verify(side.me)["ok"]


def test_a_restored_backup_holds_the_same_versions_and_syncs_as_them(pair) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "a", "First.")
    laptop.svc.write(laptop.me, S, "a", "Second.")
    laptop.svc.feedback(laptop.me, S, "a", "helped")
    server.svc.import_lines(server.me, laptop.svc.export(laptop.me), restore=True)
    assert server.versions() == laptop.versions()  # the export carries each version's identity
    result = server.pull_from(laptop)
    assert (result.applied, result.conflicts, result.refused) == (0, 0, [])
    assert server.value(S, "a") == "Second."
    # History restored from a file pages through the feed whole.
    fed = server.svc.sync_feed(server.me, since=0).events
    assert sorted(e.uid for e in fed if e.kind == "version") == sorted(laptop.versions()[(S, "a")])


def test_a_supersession_travels(pair) -> None:
    laptop, server = pair
    laptop.svc.write(laptop.me, S, "old-way", "Build with make.")
    laptop.svc.supersede(laptop.me, S, "new-way", "Build with just.", supersedes=(S, "old-way"))
    server.pull_from(laptop)
    with pytest.raises(CairnError) as err:
        server.svc.read(server.me, S, "old-way")
    assert err.value.data.get("superseded_by") == {"scope": S, "key": "new-way"}
    walk = server.svc.neighborhood(server.me, S, "new-way")["nodes"]
    assert [(n["key"], n["rel"]) for n in walk] == [("old-way", "supersedes")]
    assert server.svc.audit_verify(server.me)["ok"]


def test_concurrent_feedback_merges_without_a_review(pair, clock) -> None:
    laptop, server = pair
    clock("2025-01-01T00:00:00Z")
    laptop.svc.write(laptop.me, S, "f", "Pin the toolchain.")
    server.pull_from(laptop)
    clock("2025-01-02T00:00:00Z")
    laptop.svc.feedback(laptop.me, S, "f", "helped")
    clock("2025-01-03T00:00:00Z")
    server.svc.feedback(server.me, S, "f", "not-helped")
    assert server.pull_from(laptop).conflicts == 0
    assert laptop.pull_from(server).conflicts == 0
    assert laptop.versions() == server.versions()
    for side in (laptop, server):
        assert side.svc.review_queue(side.me)["candidates"][0].get("conflict") is None  # a candidate, no conflict
        lesson = side.svc.read(side.me, S, "f")["lesson"]
        assert (lesson["helped_count"], lesson["not_helped_count"]) == (0, 1)  # the later version stands
    # The next write joins the two histories: one tip again.
    laptop.svc.feedback(laptop.me, S, "f", "helped")
    tips = rows(laptop.store, "SELECT tips FROM lessons WHERE key = 'f'")[0]["tips"]
    assert len(json.loads(tips)) == 1


def _statements(store: Store, fn) -> int:  # type: ignore[no-untyped-def]
    from sqlalchemy import event

    count = 0

    def seen(*_args: object) -> None:
        nonlocal count
        count += 1

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        fn()
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)
    return count


def test_a_feed_page_costs_the_same_few_queries_whatever_it_holds(pair) -> None:
    laptop, server = pair
    laptop.svc.import_lines(
        laptop.me, [f'{{"scope": "{S}", "key": "k{n}", "value": "Lesson {n}."}}' for n in range(300)]
    )
    laptop.svc.sync_store_id(laptop.me)
    small = _statements(laptop.store, lambda: laptop.svc.sync_feed(laptop.me, since=0, limit=10))
    large = _statements(laptop.store, lambda: laptop.svc.sync_feed(laptop.me, since=0, limit=300))
    assert large == small  # no query per lesson
    # An apply of new lessons: a fixed number of statements per batch, plus at most the one insert
    # per lesson that returns its id (SQLite's driver returns ids row by row, as for a bulk import).
    few = laptop.svc.sync_feed(laptop.me, since=0, limit=10)
    many = laptop.svc.sync_feed(laptop.me, since=10, limit=290)
    server.svc.sync_store_id(server.me)
    first = _statements(server.store, lambda: server.svc.sync_apply(server.me, few))
    second = _statements(server.store, lambda: server.svc.sync_apply(server.me, many))
    assert second - first <= (290 - 10) + 5


@pytest.mark.parametrize("seed", [1, 6, 10, 17])  # 6, 10, 17 once found a divergence
def test_random_offline_work_on_both_sides_converges(pair, clock, seed: int) -> None:
    """Whatever each side did offline and whichever side syncs first, both end with the same
    versions and the same current state for every lesson, and both ledgers verify."""
    import random

    rng = random.Random(seed)
    laptop, server = pair
    keys = ["a", "b", "c"]
    day = 0
    for _round in range(3):
        for side in (laptop, server):
            for _ in range(4):
                day += 1
                clock(f"2025-02-{day:02d}T00:00:00Z" if day < 29 else f"2025-03-{day - 28:02d}T00:00:00Z")
                key = rng.choice(keys)
                who = human(side.me) if rng.random() < 0.3 else side.me
                op = rng.choice(["write", "write", "feedback", "archive"])
                try:
                    if op == "write":
                        side.svc.write(who, S, key, f"{key} as {side.store.dialect} saw it on day {day}.")
                    elif op == "feedback":
                        side.svc.feedback(who, S, key, rng.choice(["helped", "not-helped"]))
                    else:
                        side.svc.archive(who, S, key)
                except CairnError as exc:
                    assert exc.code == "NOT_FOUND"  # no lesson there yet on this side
        first, second = (laptop, server) if rng.random() < 0.5 else (server, laptop)
        second.pull_from(first)
        first.pull_from(second)
    assert laptop.versions() == server.versions()
    state = "SELECT scope, key, value, trust, archived_at IS NOT NULL AS archived, helped_count FROM lessons"
    assert sorted(map(dict, rows(laptop.store, state)), key=repr) == sorted(
        map(dict, rows(server.store, state)), key=repr
    )
    assert laptop.svc.audit_verify(laptop.me)["ok"] and server.svc.audit_verify(server.me)["ok"]


@pytest.mark.parametrize("seed", [2, 23, 29])
def test_random_work_on_two_laptops_and_a_server_converges_and_forgetting_holds(trio, clock, seed: int) -> None:
    """Writes, feedback, archives, links and forgets on three stores, synced in random order: every
    store ends with the same tombstones, no tombstoned content active anywhere, the same current state
    (except where a restatement of forgotten text was held, which stays on its store), and ledgers that
    verify."""
    import random

    rng = random.Random(seed)
    a, b, server = trio
    sides = (a, b, server)
    day = 0
    for _round in range(4):
        for n, side in enumerate(sides):
            for _ in range(3):
                day += 1
                clock(f"2025-{1 + day // 28:02d}-{1 + day % 28:02d}T00:00:00Z")
                key = rng.choice("abc")
                who = human(side.me) if rng.random() < 0.3 else side.me
                op = rng.choice(["write", "write", "feedback", "archive", "link", "forget"])
                try:
                    if op == "write":
                        side.svc.write(who, S, key, f"{key} by store {n} on day {day}.")
                    elif op == "feedback":
                        side.svc.feedback(who, S, key, rng.choice(["helped", "not-helped"]))
                    elif op == "link":
                        side.svc.link(who, S, key, S, rng.choice([k for k in "abc" if k != key]), "related")
                    elif op == "forget":
                        side.svc.forget(who, S, key, "wrong")
                    else:
                        side.svc.archive(who, S, key)
                except CairnError as exc:
                    assert exc.code in ("NOT_FOUND", "TOMBSTONED")
        for laptop in rng.sample([a, b], 2):
            if rng.random() < 0.8:
                sync(laptop, server)
    for _ in range(2):
        sync(a, server)
        sync(b, server)
    live = "SELECT scope, key, content_hash FROM tombstones WHERE lifted_at IS NULL"
    tombs = [{tuple(r.values()) for r in rows(x.store, live)} for x in sides]
    assert tombs[0] == tombs[1] == tombs[2]
    forgotten = {t[2] for t in tombs[0]}
    for x in sides:
        active = rows(x.store, "SELECT content_hash FROM lessons WHERE trust NOT IN ('rejected', 'held')")
        assert not [r for r in active if r["content_hash"] in forgotten]
        assert x.svc.audit_verify(x.me)["ok"]
    held = "SELECT l.key FROM lesson_versions v JOIN lessons l ON l.id = v.lesson_id WHERE v.trust = 'held'"
    skip = {r["key"] for x in sides for r in rows(x.store, held)}
    state = "SELECT key, value, trust, archived_at IS NOT NULL AS archived, helped_count FROM lessons"
    state += " WHERE trust != 'rejected'"  # what each store forgot differs; that it is forgotten does not
    got = [sorted((d for d in map(dict, rows(x.store, state)) if d["key"] not in skip), key=repr) for x in sides]
    assert got[0] == got[1] == got[2]
