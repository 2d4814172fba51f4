"""The search index: full-text queries compiled per database, vector table names, and the full-text arm's
answers on a real store."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select

from cairn.core.principal import Principal
from cairn.core.timeparse import utcnow
from cairn.store import search_index as ix
from cairn.store.schema import lessons


def test_one_query_tree_compiles_to_fts5_and_to_tsquery() -> None:
    q = ix.fts_any([ix.fts_all([ix.fts_phrase("cache"), ix.fts_phrase("warm")]), ix.fts_phrase("FROB_GRACE_MS")])
    assert ix._fts5(q) == '(("cache" AND "warm") OR "FROB_GRACE_MS")'
    assert ix._tsquery(q) == "((('cache') & ('warm')) | ('frob' <-> 'grace' <-> 'ms'))"


def test_user_text_in_a_term_is_never_query_syntax() -> None:
    nasty = 'a\'b & c | !d :* <-> (e) "f" \\ g'
    assert ix._fts5(ix.fts_phrase(nasty)) == '"' + nasty.replace('"', '""') + '"'
    assert ix._tsquery(ix.fts_phrase(nasty)) == "('a' <-> 'b' <-> 'c' <-> 'd' <-> 'e' <-> 'f' <-> 'g')"


def test_a_term_without_words_matches_nothing_on_postgres() -> None:
    empty = ix.fts_phrase("--- ::: ___")
    assert ix._tsquery(empty) is None
    assert ix._tsquery(ix.fts_all([empty, ix.fts_phrase("x")])) is None  # every term must match
    assert ix._tsquery(ix.fts_any([empty, ix.fts_phrase("x")])) == "(('x'))"  # any term may


def test_text_is_folded_as_fts5_unicode61_folds_it() -> None:
    assert ix._fts_words("Café_Crème sqlite3.OperationalError v1.4 naïve-ÉCOLE") == (
        "cafe creme sqlite3 operationalerror v1 4 naive ecole"
    )


def test_vector_table_names_fit_postgres_identifiers() -> None:
    assert ix.vec_table("all-MiniLM-L6-v2", 384) == "vec_all_minilm_l6_v2_384"
    long_a, long_b = ix.vec_table("org/" + "m" * 80 + "-a", 1024), ix.vec_table("org/" + "m" * 80 + "-b", 1024)
    assert long_a != long_b
    assert all(len(n) + len("_hnsw") <= 63 for n in (long_a, long_b))


# -- fts_search on a real store: the index's best matches first, the filters asked afterwards ------


def _fts(svc: Any, me: Principal, term: str, scopes: list[str] | None, limit: int) -> list[int]:
    match = ix.fts_any([ix.fts_phrase(term)])
    return [
        i
        for i, _ in svc.store.run(
            lambda c: ix.fts_search(c, me.tenant_id, match, scopes, utcnow(), limit), write=False, tenant=me.tenant_id
        )
    ]


def _ids(svc: Any, me: Principal, scope: str) -> dict[str, int]:
    q = select(lessons.c.key, lessons.c.id).where(lessons.c.tenant_id == me.tenant_id, lessons.c.scope == scope)
    return {k: i for k, i in svc.store.run(lambda c: c.execute(q).all(), write=False, tenant=me.tenant_id)}


@pytest.fixture
def crowded(svc: Any, me: Principal) -> Any:
    """300 short lessons dense in 'quokka' in one repo (they rank first), five longer ones elsewhere."""
    lines = [
        json.dumps({"scope": "repo::a/loud", "key": f"loud-{n}", "value": f"quokka quokka note {n}"})
        for n in range(300)
    ]
    filler = " ".join(f"word{n}" for n in range(60))
    lines += [
        json.dumps(
            {"scope": "repo::a/quiet", "key": f"quiet-{n}", "value": f"one quokka among many words {filler} {n}"}
        )
        for n in range(5)
    ]
    assert svc.import_lines(me, lines)["created"] == 305
    return svc


def test_a_scope_below_the_best_matches_still_gets_its_own(crowded: Any, me: Principal) -> None:
    quiet = set(_ids(crowded, me, "repo::a/quiet").values())
    unscoped = _fts(crowded, me, "quokka", None, 50)
    assert len(unscoped) == 50 and not quiet & set(unscoped)  # precondition: the five rank below 300 others
    assert set(_fts(crowded, me, "quokka", ["repo::a/quiet"], 5)) == quiet
    assert set(_fts(crowded, me, "quokka", ["repo::a/quiet"], 50)) == quiet


def test_archived_best_matches_are_never_returned(crowded: Any, me: Principal) -> None:
    before = _fts(crowded, me, "quokka", ["repo::a/loud"], 10)
    loud = {v: k for k, v in _ids(crowded, me, "repo::a/loud").items()}
    for i in before[:4]:
        crowded.archive(me, "repo::a/loud", loud[i])
    after = _fts(crowded, me, "quokka", ["repo::a/loud"], 10)
    assert len(after) == 10 and not set(before[:4]) & set(after)
    assert after[:6] == before[4:]  # the rest keep their order


def test_the_joined_query_and_the_best_first_read_agree(crowded: Any, me: Principal, monkeypatch: Any) -> None:
    """A store where the index's best matches are not enough (a narrow scope) takes the joined query;
    forcing it everywhere gives the same answers, in the same order (score, then id)."""
    cases = [(None, 50), (["repo::a/quiet"], 5), (["repo::a/loud"], 20), (["repo::a/loud", "repo::a/quiet"], 400)]
    fast = [_fts(crowded, me, "quokka", s, n) for s, n in cases]
    monkeypatch.setattr(ix, "_FTS_TOP_MAX", 0)  # no best-first read: the joined query answers
    assert [_fts(crowded, me, "quokka", s, n) for s, n in cases] == fast
    assert len(fast[3]) == 305
