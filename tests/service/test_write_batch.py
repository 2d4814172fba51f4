"""write_many: many lessons in one transaction per batch, each by write's own rules and rows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cairn.service import write_batch
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.conftest import human, session
from tests.contract import audit_rows, counts, refused, rows, snapshot

SCOPE = "repo::acme/widget"

# Creates, a recurrence of content written earlier in the same call (same scope, another key), an
# edit of an address written earlier in the call, a recurrence at the same address, tags, a kind.
ITEMS = [
    {"scope": SCOPE, "key": "cache", "value": "Clear the cache before a rebuild.", "tags": ["ci"]},
    {"scope": SCOPE, "key": "uv", "value": "Run uv sync --frozen in CI.", "kind": "fact"},
    {"scope": "global", "key": "tz", "value": "Timestamps in the audit log are UTC."},
    {"scope": SCOPE, "key": "cache-again", "value": "clear the cache, before a rebuild!"},
    {"scope": SCOPE, "key": "uv", "value": "Run uv sync --frozen in CI; never pip install."},
    {"scope": "global", "key": "tz", "value": "Timestamps in the audit log are UTC."},
    {"scope": "project::api", "key": "retry", "value": "Retry 429s with backoff and jitter.", "tags": ["api"]},
]


# How FTS5 lays out its segments depends on how many transactions wrote them (not what they hold);
# the account's rows were created by each store's fixture at its own time.
LAYOUT = ("lesson_fts_data", "lesson_fts_idx", "tenants", "users", "memberships")
# A version's global identity is random (sync tells stores apart by it), so two stores never share it.
RANDOM = ("uid", "parents", "tips")


def _rows(store: Store) -> dict[str, list[str]]:
    out = {}
    for table in snapshot(store):
        if table not in LAYOUT:
            found = rows(store, f'SELECT * FROM "{table}"')  # noqa: S608 - the store's own table names
            out[table] = sorted(repr({k: v for k, v in r.items() if k not in RANDOM}) for r in found)
    return out


def _one_by_one(svc: Cairn, principal, items) -> list[dict]:  # type: ignore[no-untyped-def]
    out = []
    for item in items:
        options = {k: v for k, v in item.items() if k not in ("scope", "key", "value")}
        out.append(svc.write(principal, item["scope"], item["key"], item["value"], **options))
    return out


@pytest.mark.parametrize("who", ["agent", "person"])
def test_the_store_holds_exactly_what_one_write_per_item_leaves(
    svc: Cairn, me, store: Store, second_store: Store, clock, who: str
) -> None:
    principal = human(me) if who == "person" else me
    other = Cairn(second_store, svc.settings)
    other.ensure_tenant(me)
    out = svc.write_many(principal, ITEMS)
    expected = _one_by_one(other, principal, ITEMS)
    # Same answers, same rows in every table, down to the audit chain's hashes (the clock is pinned).
    assert out["results"] == expected
    assert _rows(store) == _rows(second_store)
    assert [r["action"] for r in out["results"]] == [
        "created", "created", "created", "recurred", "updated", "recurred", "created",
    ]  # fmt: skip
    assert out["counts"] == {"created": 4, "recurred": 2, "updated": 1}
    assert out["results"][0]["lesson"]["trust"] == ("verified" if who == "person" else "candidate")
    assert len(audit_rows(store)) == len(ITEMS)  # one audit row per lesson written, none for the batch
    assert svc.audit_verify(me)["ok"]


def test_a_session_counts_sightings_and_promotes_as_write_does(
    svc: Cairn, me, store: Store, second_store: Store, clock
) -> None:
    svc = svc.with_settings(replace(svc.settings, promotion_threshold=2))
    items = [{"scope": SCOPE, "key": "k", "value": "Pin the lockfile hash in the CI cache key."}]
    other = Cairn(second_store, svc.settings)
    other.ensure_tenant(me)
    for name in ("s1", "s2"):
        assert svc.write_many(session(me, name), items)["results"] == _one_by_one(other, session(me, name), items)
    assert _rows(store) == _rows(second_store)
    assert svc.read(me, SCOPE, "k")["lesson"]["trust"] == "verified"


def test_forgotten_content_is_refused_in_its_place_and_the_rest_is_written(svc: Cairn, me, store: Store) -> None:
    svc.write(me, SCOPE, "secret", "The staging password is hunter2.")
    svc.forget(me, SCOPE, "secret", "a secret")
    before = len(audit_rows(store))
    out = svc.write_many(
        me,
        [
            {"scope": SCOPE, "key": "a", "value": "First lesson of the batch."},
            {"scope": "global", "key": "elsewhere", "value": "the staging PASSWORD is hunter2"},
            {"scope": SCOPE, "key": "b", "value": "Last lesson of the batch."},
        ],
    )
    actions = [r["action"] for r in out["results"]]
    assert actions == ["created", "refused", "created"]
    assert out["results"][1]["code"] == "TOMBSTONED"
    assert out["counts"] == {"created": 2, "refused": 1}
    assert [r["key"] for r in rows(store, "SELECT key FROM lessons WHERE scope = 'global'")] == []
    assert len(audit_rows(store)) == before + 2
    assert svc.audit_verify(me)["ok"]


def test_the_write_rate_limit_counts_every_lesson_of_the_batch(svc: Cairn, me, store: Store) -> None:
    svc.limits_set(me, "local", writes_per_minute=3)
    items = [{"scope": SCOPE, "key": f"k{i}", "value": f"Distinct lesson number {i}."} for i in range(5)]
    out = svc.write_many(me, items)
    assert [r["action"] for r in out["results"]] == ["created"] * 3 + ["refused"] * 2
    assert {r["code"] for r in out["results"][3:]} == {"LIMIT"}
    assert len(rows(store, "SELECT id FROM lessons")) == 3


def test_the_value_size_limit_refuses_only_the_large_lesson(svc: Cairn, me, store: Store) -> None:
    svc.limits_set(me, "local", max_value_bytes=40)
    out = svc.write_many(
        me,
        [
            {"scope": SCOPE, "key": "short", "value": "Short enough."},
            {"scope": SCOPE, "key": "long", "value": "This lesson is longer than forty bytes, by far."},
        ],
    )
    assert [r["action"] for r in out["results"]] == ["created", "refused"]
    assert out["results"][1]["data"]["limit"] == "max_value_bytes"
    assert [r["key"] for r in rows(store, "SELECT key FROM lessons")] == ["short"]


@pytest.mark.parametrize(
    ("item", "code"),
    [
        ({"scope": SCOPE, "key": "k"}, "INVALID_INPUT"),  # no value
        ({"scope": SCOPE, "key": "k", "value": "v", "colour": "red"}, "INVALID_INPUT"),  # unknown option
        ({"scope": SCOPE, "key": "k", "value": "v", "kind": "poem"}, "INVALID_INPUT"),
        ({"scope": "no-such-kind::x", "key": "k", "value": "v"}, "INVALID_SCOPE"),
        ("not a mapping", "INVALID_INPUT"),
    ],
)
def test_one_bad_item_refuses_the_call_before_anything_is_written(svc: Cairn, me, store: Store, item, code) -> None:
    before = counts(store)
    good = {"scope": SCOPE, "key": "good", "value": "A good lesson."}
    err = refused(code, svc.write_many, me, [good, item])
    assert err.data["index"] == 1
    assert "item 1" in err.message
    assert counts(store) == before


def test_batches_are_separate_transactions_in_order(
    svc: Cairn, me, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write_batch, "BATCH", 2)
    items = [{"scope": SCOPE, "key": f"k{i}", "value": f"Lesson {i} of five."} for i in range(5)]
    items.append({"scope": SCOPE, "key": "k0", "value": "Lesson 0 of five."})  # recurs across batches
    out = svc.write_many(me, items)
    assert out["counts"] == {"created": 5, "recurred": 1}
    assert [r["key"] for r in audit_rows(store)] == ["k0", "k1", "k2", "k3", "k4", "k0"]
    assert svc.audit_verify(me)["ok"]
