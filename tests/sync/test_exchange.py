"""Two laptops and a server converge through ``cairn sync``, on a SQLite and on a Postgres server.

Each laptop is a fresh home with its own SQLite store, written to while "offline" (no sync), then
synced with the server through the real ``cairn sync --url`` command (in this process). The checks
read each store's version rows: after the syncs, every lesson has the same versions (by uid and
content hash) on all three stores, a conflict keeps both versions and is in the review queue,
forgetting wins everywhere, a server purge leaves no byte of the content in a laptop's file.
"""

from __future__ import annotations

from tests.servers import EMBED_ENV as ENV_MODEL
from tests.sync.conftest import Laptop, Rig, envelope

A1 = "Pin the base image by digest; tags move under you."
A2 = "Run the migrations before the app starts, never from the app."
B1 = "Cap retries at three; the gateway times out at thirty seconds."
S1 = "The staging database is reset every Sunday at noon."


def _converged(rig: Rig, *laptops: Laptop) -> dict[tuple[str, str], set[tuple[str, str]]]:
    server = rig.server_versions()
    for laptop in laptops:
        assert laptop.versions() == server, laptop.name
    return server


def test_offline_writes_on_both_laptops_converge_with_the_server(rig: Rig) -> None:
    a, b = rig.laptop("a"), rig.laptop("b")
    a.ok("write", "repo::acme/api", "base-image", A1)
    a.ok("write", "repo::acme/api", "migrations", A2)
    a.ok("write", "repo::acme/api", "migrations", A2 + " Twice as important on Fridays.")  # a second version
    b.ok("write", "global", "retries", B1)
    rig.svc.write(rig.alice, "project::staging", "reset", S1)

    first = a.sync()
    assert first["pulled"]["applied"] >= 1 and first["pushed"]["applied"] >= 3
    b.sync()
    again = a.sync()  # now A has B's lesson too
    versions = _converged(rig, a, b)
    assert set(versions) == {
        ("repo::acme/api", "base-image"),
        ("repo::acme/api", "migrations"),
        ("global", "retries"),
        ("project::staging", "reset"),
    }
    assert len(versions[("repo::acme/api", "migrations")]) == 2
    assert again["pulled"]["applied"] >= 1
    # Nothing left to move: a sync now applies nothing on either side.
    quiet = a.sync()
    assert (quiet["pulled"]["applied"], quiet["pushed"]["applied"]) == (0, 0)
    assert rig.active_values() >= {A1, B1, S1}
    heads = quiet["heads"]
    assert heads["local"]["seq"] > 0 and heads["server"]["seq"] > 0 and len(heads["server"]["hash"]) == 64


def test_the_same_address_edited_on_both_sides_keeps_both_versions_and_is_reviewed(rig: Rig) -> None:
    a, b = rig.laptop("a"), rig.laptop("b")
    a.ok("write", "repo::acme/api", "timeouts", "Client timeouts are 30 s.")
    a.sync()
    b.sync()
    a.ok("write", "repo::acme/api", "timeouts", "Client timeouts are 20 s since the gateway change.")
    b.ok("write", "repo::acme/api", "timeouts", "Client timeouts are 45 s for the batch endpoints.")
    a.sync()
    second = b.sync()
    assert second["pulled"]["conflicts"] + second["pushed"]["conflicts"] >= 1
    a.sync()
    versions = _converged(rig, a, b)
    assert len(versions[("repo::acme/api", "timeouts")]) == 3  # the first, and both edits
    # The same current value everywhere, and a conflict in every store's review queue.
    current = {laptop.ok("read", "repo::acme/api", "timeouts")["lesson"]["value"] for laptop in (a, b)}
    current.add(rig.svc.read(rig.alice, "repo::acme/api", "timeouts")["lesson"]["value"])
    assert len(current) == 1
    for laptop in (a, b):
        queue = laptop.ok("review")
        assert [c.get("conflict") for c in queue["candidates"] if c["key"] == "timeouts"] == [True], queue
    queue = rig.svc.review_queue(rig.alice)
    assert [c.get("conflict") for c in queue["candidates"] if c["key"] == "timeouts"] == [True]
    # Before the edits met, nothing was a conflict: a lesson edited on one side only is not marked.
    assert all(not c.get("conflict") for c in queue["candidates"] if c["key"] != "timeouts")


def test_a_forget_on_one_laptop_wins_over_a_stale_laptops_recurrence_and_copy(rig: Rig) -> None:
    a, b = rig.laptop("a"), rig.laptop("b")
    doomed = "Deploy with the --force flag whenever the pipeline is slow."
    a.ok("write", "repo::acme/ops", "deploy-fast", doomed)
    a.sync()
    b.sync()
    # B forgets it and syncs; A is offline meanwhile and writes the content again, twice.
    b.ok("forget", "repo::acme/ops", "deploy-fast", "--reason", "dangerous advice")
    b.sync()
    a.ok("write", "repo::acme/ops", "deploy-fast", doomed)  # a recurrence on A's side
    a.ok("write", "repo::acme/ops", "ship-it", doomed)  # the same content under a new key
    a.sync()
    b.sync()
    for laptop in (a, b):
        listed = laptop.ok("list", "--limit", "100")["lessons"]
        assert doomed not in {lesson["value"] for lesson in listed}, laptop.name
        found = laptop.ok("search", "deploy force flag pipeline")["results"]
        assert doomed not in {r["value"] for r in found}, laptop.name
    assert doomed not in rig.active_values()
    # A person's write of it anywhere is refused too: the tombstone holds on every store.
    refused = envelope(a.run("write", "global", "again", doomed))
    assert refused["reason"]["code"] == "TOMBSTONED"


def test_a_read_only_token_pulls_and_never_pushes(rig: Rig) -> None:
    reader = rig.svc.token_create(rig.alice, perm="read")["token"]
    rig.svc.write(rig.alice, "project::staging", "reset", S1)
    a = rig.laptop("a", token=reader)
    a.ok("write", "global", "laptop-only", A1)
    before = rig.server_versions()
    result = a.sync()
    assert result["pulled"]["applied"] >= 1 and "read-only" in result["pushed"]["not_run"]
    assert result["pushed"]["events"] == 0
    assert ("project::staging", "reset") in a.versions()
    assert rig.server_versions() == before  # nothing of the laptop's reached the server
    assert A1 not in rig.active_values()


def test_another_tenants_token_moves_nothing_of_this_tenant(rig: Rig) -> None:
    rig.svc.write(rig.alice, "project::staging", "reset", S1)
    a = rig.laptop("a")
    a.ok("write", "global", "laptop-only", A1)
    a.sync()
    alice_before = rig.server_versions()
    c = rig.laptop("c", token=rig.tenant.bob)
    c.ok("write", "global", "bobs-laptop", B1)
    c.sync()
    assert ("project::staging", "reset") not in c.versions()  # alice's lesson never reached bob's laptop
    assert rig.server_versions() == alice_before  # bob's laptop wrote nothing into alice's tenant
    assert set(rig.server_versions(rig.tenant.bob_name)) == {("global", "bobs-laptop")}


def test_a_scope_limited_token_moves_only_its_scopes(rig: Rig) -> None:
    limited = rig.svc.token_create(rig.alice, perm="write", scope_patterns=["repo::acme/*"])["token"]
    rig.svc.write(rig.alice, "repo::acme/api", "in-scope", S1)
    rig.svc.write(rig.alice, "project::secret", "out-of-scope", B1)
    a = rig.laptop("a", token=limited)
    a.ok("write", "repo::acme/web", "pushed", A1)
    a.ok("write", "global", "kept-here", A2)
    result = a.sync()
    got = set(a.versions())
    assert ("repo::acme/api", "in-scope") in got and ("project::secret", "out-of-scope") not in got
    on_server = set(rig.server_versions())
    assert ("repo::acme/web", "pushed") in on_server and ("global", "kept-here") not in on_server
    assert result["pushed"]["applied"] >= 1


def test_the_progress_counts_feed_rows_up_to_the_senders_chain_head(rig: Rig, monkeypatch) -> None:
    """The bar's total comes from each sender's chain head: it ends full, each direction, and never
    goes back."""
    from cairn.runtime.sync_client import exchange, open_sides

    for i in range(5):
        rig.svc.write(rig.alice, "project::staging", f"server-{i}", f"Server side lesson {i}.")
    a = rig.laptop("a")
    for i in range(3):
        a.ok("write", "global", f"laptop-{i}", f"Laptop side lesson {i}.")
    monkeypatch.setenv("CAIRN_TOKEN", a.token)
    monkeypatch.setenv(*ENV_MODEL)
    local, server = open_sides(a.home, url=rig.url)
    calls: list[tuple[str, int, int]] = []
    try:
        exchange(local, server, batch=2, progress=lambda *c: calls.append(c))
    finally:
        local.svc.store.dispose()
    for direction in ("pull", "push"):
        mine = [(done, total) for d, done, total in calls if d == direction]
        assert len(mine) >= 2, calls  # a batch of 2 rows: several pages each way
        assert mine[-1][0] == mine[-1][1] > 0, mine
        assert [done for done, _ in mine] == sorted(done for done, _ in mine)
