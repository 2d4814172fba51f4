"""The lifecycle predicates: the row form (``status``), the SQL clauses and the raw-SQL fragment agree
on real lessons in every state, on both databases; and no read returns a lesson that is not active."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import and_, select, text

from cairn.core.principal import Principal
from cairn.core.timeparse import utcnow
from cairn.service.api import Cairn
from cairn.store import predicates as P
from cairn.store.schema import lessons


@pytest.fixture
def every_state(svc: Cairn, me: Principal) -> dict[str, str]:
    """One lesson per state, by key -> the state it is in."""
    svc.write(me, "global", "is-active", "Still true.")
    svc.write(me, "global", "is-archived", "No longer needed.")
    svc.archive(me, "global", "is-archived")
    svc.write(me, "global", "is-rejected", "Wrong advice.")
    svc.forget(me, "global", "is-rejected", reason="wrong")
    svc.write(me, "global", "is-old", "Replaced advice.")
    svc.supersede(me, "global", "is-new", "The advice that replaced it.", supersedes=("global", "is-old"))
    svc.write(me, "global", "is-expired", "Ran out.", ttl=timedelta(seconds=1))
    # A restatement of forgotten text is held (service/paraphrase.py), and so is its archived copy.
    svc.write(me, "global", "forgotten-source", "The staging deploy key is stored in Vault at ops/deploy/staging.")
    svc.forget(me, "global", "forgotten-source", reason="leaked")
    svc.write(me, "global", "is-held", "The deploy key for staging is stored in Vault at ops/deploy/staging.")
    svc.write(me, "global", "is-held-archived", "Staging deploy key: stored in Vault, path ops/deploy/staging.")
    svc.archive(me, "global", "is-held-archived")
    return {"is-active": "active", "is-archived": "archived", "is-rejected": "rejected",
            "is-old": "superseded", "is-new": "active", "is-expired": "expired",
            "forgotten-source": "rejected", "is-held": "held", "is-held-archived": "held"}  # fmt: skip


def test_row_status_sql_clauses_and_the_raw_fragment_agree(svc: Cairn, every_state: dict[str, str]) -> None:
    now = utcnow() + timedelta(seconds=5)  # past the 1 s TTL
    with svc.store.engine.connect() as conn:
        rows = {r["key"]: dict(r) for r in conn.execute(select(lessons)).mappings()}
        assert {k: P.status(rows[k], now) for k in every_state} == every_state

        def keys(clause: object) -> set[str]:
            return set(conn.execute(select(lessons.c.key).where(clause)).scalars())  # type: ignore[arg-type]

        by_state = {s: {k for k, v in every_state.items() if v == s} for s in P.STATUSES}
        assert keys(P.active(now)) == by_state["active"]
        assert keys(P.archived()) == by_state["archived"]
        assert keys(P.expired(now)) == by_state["expired"]
        assert keys(and_(*P.unarchived())) == by_state["active"] | by_state["expired"]
        assert keys(P.held(now)) == {"is-held"}  # the review queue's: not archived
        raw = conn.execute(
            text("SELECT l.key FROM lessons l WHERE 1 = 1 AND " + P.active_sql("l", "at")), {"at": now}
        ).scalars()
        assert set(raw) == by_state["active"]


def test_no_read_returns_a_lesson_that_is_not_active(
    svc: Cairn, me: Principal, every_state: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_FAKE_NOW", (utcnow() + timedelta(seconds=5)).isoformat())
    active = {k for k, v in every_state.items() if v == "active"}
    assert {r["key"] for r in svc.list(me, "global")["lessons"]} == active
    found = svc.search(me, "advice true replaced ran wrong needed", scopes=["global"], mode="fts")["results"]
    assert {h["key"] for h in found} <= active
    found = svc.search(me, "staging deploy key vault", scopes=["global"], mode="fts")["results"]
    assert {h["key"] for h in found} <= active
    assert {r["key"] for r in svc.list(me, "global", archived=True)["lessons"]} == {"is-archived"}
