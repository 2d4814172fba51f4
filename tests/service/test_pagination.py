"""Cursor pagination of every list operation (both databases): whole, ordered, stable under writes."""

from __future__ import annotations

import pytest

from cairn.core import cursor as cursors
from cairn.core.principal import Principal
from cairn.errors import CairnError
from cairn.service.api import Cairn


def _walk(fetch, field: str, limit: int) -> list[list[dict]]:  # type: ignore[no-untyped-def]
    pages, after = [], None
    while True:
        out = fetch(limit=limit, cursor=after)
        pages.append(out[field])
        after = out["next_cursor"]
        if after is None:
            return pages
        assert len(pages) < 100, "the cursor never ended"


def test_lessons_page_through_every_row_once_in_order(svc: Cairn, me: Principal, clock) -> None:  # type: ignore[no-untyped-def]
    # Several lessons share one timestamp (the clock is pinned): the id breaks the tie.
    for i in range(7):
        clock(f"2025-01-01T00:00:0{i // 3}Z")
        svc.write(me, "repo::acme/api", f"k{i}", f"lesson number {i}")
    whole = svc.list(me, limit=100)
    assert whole["next_cursor"] is None and whole["truncated"] is False
    pages = _walk(lambda **kw: svc.list(me, **kw), "lessons", 3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [r["key"] for p in pages for r in p] == [r["key"] for r in whole["lessons"]]
    first = svc.list(me, limit=3)
    assert first["truncated"] is True and first["next_cursor"]


def test_a_write_between_pages_neither_repeats_nor_hides_rows(svc: Cairn, me: Principal, clock) -> None:  # type: ignore[no-untyped-def]
    for i in range(6):
        clock(f"2025-01-01T00:00:{i:02d}Z")
        svc.write(me, "global", f"k{i}", f"lesson {i}")
    page1 = svc.list(me, limit=3)
    clock("2025-01-01T00:01:00Z")
    svc.write(me, "global", "newest", "written while the reader was on page one")
    page2 = svc.list(me, limit=3, cursor=page1["next_cursor"])
    seen = [r["key"] for r in page1["lessons"] + page2["lessons"]]
    assert seen == ["k5", "k4", "k3", "k2", "k1", "k0"]  # an offset would have repeated k3
    assert page2["next_cursor"] is None


def test_review_audit_tombstones_tokens_and_members_page(svc: Cairn, me: Principal) -> None:
    for i in range(5):
        svc.write(me, "global", f"c{i}", f"candidate {i}")
    review = _walk(lambda **kw: svc.review_queue(me, **kw), "candidates", 2)
    assert [r["key"] for p in review for r in p] == [f"c{i}" for i in range(5)]

    audit_all = svc.audit(me, limit=1000)["entries"]
    audit_pages = _walk(lambda **kw: svc.audit(me, **kw), "entries", 2)
    # Pages go back in time; each page is oldest-first within itself.
    flat = [e["seq"] for p in reversed(audit_pages) for e in p]
    assert flat == [e["seq"] for e in audit_all]

    for i in range(3):
        svc.forget(me, "global", f"c{i}", "wrong")
    stones = _walk(lambda **kw: svc.tombstones(me, **kw), "tombstones", 2)
    assert [len(p) for p in stones] == [2, 1]
    assert len({t["id"] for p in stones for t in p}) == 3

    alice = svc.resolve_token(svc.create_user(me, "alice")["token"])
    for i in range(3):
        svc.token_create(alice, perm="read", name=f"t{i}")
    toks = _walk(lambda **kw: svc.token_list(alice, **kw), "tokens", 2)
    assert sum(len(p) for p in toks) == 4  # the first token and three more
    svc.org_create(alice, "acme")
    members = svc.org_members(alice, "acme", limit=1)
    assert [m["user"] for m in members["members"]] == ["alice"] and members["next_cursor"] is None


def test_a_scope_limited_reader_pages_only_through_its_scopes(svc: Cairn, me: Principal) -> None:
    for i in range(6):
        svc.write(me, "repo::acme/web" if i % 2 else "repo::acme/api", f"k{i}", f"lesson {i}")
    narrow = Principal(me.tenant_id, me.actor, scope_patterns=("repo::acme/web",), user_id=me.user_id)
    pages = _walk(lambda **kw: svc.list(narrow, **kw), "lessons", 2)
    scopes = {r["scope"] for p in pages for r in p}
    assert scopes == {"repo::acme/web"} and sum(len(p) for p in pages) == 3


def test_another_tenants_cursor_shows_nothing_of_its_tenant(svc: Cairn, me: Principal) -> None:
    for i in range(3):
        svc.write(me, "global", f"mine{i}", f"my lesson {i}")
    other = Principal("other", "o")
    svc.ensure_tenant(other)
    for i in range(3):
        svc.write(other, "global", f"theirs{i}", f"their lesson {i}")
    their_cursor = svc.list(other, limit=1)["next_cursor"]
    mine = svc.list(me, limit=10, cursor=their_cursor)  # a position, not a permission
    assert all(r["key"].startswith("mine") for r in mine["lessons"])


@pytest.mark.parametrize(
    "bad",
    ["", "not base64 !!", "x" * 600, cursors.encode("audit", 5), cursors.encode("lessons", "x", 1), "e30"],
)
def test_a_bad_cursor_is_refused_with_the_remedy(svc: Cairn, me: Principal, bad: str) -> None:
    svc.write(me, "global", "k", "a lesson")
    with pytest.raises(CairnError) as err:
        svc.list(me, cursor=bad) if bad else svc.list(me, cursor="=")
    assert err.value.code == "INVALID_INPUT"
    assert "next_cursor" in err.value.message
    assert svc.read(me, "global", "k")["lesson"]["value"] == "a lesson"  # nothing else changed


def test_limits_out_of_range_are_refused(svc: Cairn, me: Principal) -> None:
    for call in (
        lambda: svc.tombstones(me, limit=0),
        lambda: svc.review_queue(me, limit=10_001),
        lambda: svc.audit(me, limit=0),
        lambda: svc.list(me, limit=10_001),
    ):
        with pytest.raises(CairnError) as err:
            call()
        assert err.value.code == "INVALID_INPUT"
