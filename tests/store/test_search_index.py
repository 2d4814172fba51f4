"""The search index's pure parts: full-text queries compiled per database, vector table names."""

from __future__ import annotations

from cairn.store import search_index as ix


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
