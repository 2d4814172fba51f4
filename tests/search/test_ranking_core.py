"""cairn.core.ranking: error distillation, query terms, reciprocal rank fusion and snippets (pure, no I/O)."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cairn.core.ranking import (
    ERROR_NOISE,
    RRF_K,
    STOP_WORDS,
    clean_error,
    distill,
    query_terms,
    rrf,
    snippet,
    split_identifier,
)


def digits_free(terms: list[str]) -> bool:
    return not any(re.fullmatch(r"[\d.]+", t) for t in terms)


# ------------------------------------------------------------------------------------------- distill: drops


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ('File "/usr/lib/python3.11/site-packages/requests/adapters.py", line 519, in send', ["usr", "lib", "site"]),
        (r"C:\Users\bob\proj\src\app.py:17:3: undefined name", ["users", "bob", "proj", "src"]),
        ("cannot open ./build/tmp/cache-7/objects/pack.idx", ["build", "tmp", "cache", "objects"]),
        ("~/.config/gcloud/credentials.db is unreadable", ["config", "gcloud"]),
    ],
)
def test_distill_drops_paths(text: str, gone: list[str]) -> None:
    terms = distill(text)
    for word in gone:
        assert word not in terms, (word, terms)
    assert not any("/" in t or "\\" in t for t in terms)


def test_distill_keeps_path_stem() -> None:
    assert "adapters" in distill('File "/usr/lib/python3.11/site-packages/requests/adapters.py", line 519')
    assert "app" in distill(r"C:\Users\bob\proj\src\app.py:17:3: undefined name")


@pytest.mark.parametrize(
    "hex_id",
    [
        "3f2a9c1d8e7b",
        "3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39",
        "0x7f3a2b9c10",
        "0x1f",
        "0xdeadbeef",
        "0xff",
        "ab12cd34",
    ],
)
def test_distill_drops_hex_ids(hex_id: str) -> None:
    terms = distill(f"object {hex_id} missing from pack")
    assert terms == ["object", "missing", "pack"], terms


def test_distill_drops_uuids() -> None:
    terms = distill("request 550e8400-e29b-41d4-a716-446655440000 timed out")
    assert terms == ["request", "timed"]


@pytest.mark.parametrize(
    "text",
    [
        "worker exited with code 137 after 3 retries",
        "listen tcp 0.0.0.0:5432: bind: address in use",
        "version 1.2.3 requires 4.5.6",
    ],
)
def test_distill_drops_numbers(text: str) -> None:
    terms = distill(text)
    assert terms and digits_free(terms), terms
    assert not any(ch.isdigit() for t in terms for ch in t), terms


@pytest.mark.parametrize(
    "stamp",
    ["2024-05-01T12:34:56.789Z", "2024-05-01T12:34:56+02:00", "2024-05-01 12:34:56", "12:03:44", "2024-05-01"],
)
def test_distill_drops_timestamps(stamp: str) -> None:
    assert distill(f"[{stamp}] cache miss storm") == ["cache", "miss", "storm"]


def test_distill_drops_line_numbers() -> None:
    assert distill('  File "handler.py", line 42, in dispatch') == ["handler.py", "dispatch"]
    terms = distill("src/app/main.ts:42:17 - TS2345: Argument of type string")
    assert "main" in terms and "argument" in terms
    assert digits_free(terms) and "42" not in terms and "17" not in terms


@pytest.mark.parametrize(
    "url",
    [
        "https://docs.example.com/errors/E1234?lang=en#fix",
        "http://localhost:8080/api/v1/users",
        "postgres://app:secret@db.internal:5432/app",
        "git+ssh://git@github.com/acme/widget.git",
    ],
)
def test_distill_drops_urls(url: str) -> None:
    terms = distill(f"connection reset by {url} during upload")
    assert terms == ["connection", "reset", "upload"], terms


def test_distill_drops_stop_words_and_error_boilerplate() -> None:
    terms = distill("Traceback (most recent call last): Error: the widget is not in the registry and it failed")
    assert terms == ["widget", "registry"]
    for t in distill("This is an error that was raised during the handling of another exception"):
        assert t not in STOP_WORDS and t not in ERROR_NOISE


# ------------------------------------------------------------------------------------------- distill: keeps


@pytest.mark.parametrize(
    ("identifier", "parts"),
    [
        ("ModuleNotFoundError", ["module", "found"]),
        ("getUserById", ["user", "id"]),
        ("HTTPConnectionPool", ["http", "connection", "pool"]),
        ("JSONDecodeError", ["json", "decode"]),
        ("OSError", ["os"]),
        ("OOMKilled", ["oom", "killed"]),
        ("snake_case_name", ["snake", "case", "name"]),
        ("XMLParser", ["xml", "parser"]),
    ],
)
def test_distill_keeps_identifiers_and_splits_them(identifier: str, parts: list[str]) -> None:
    terms = distill(f"{identifier} raised")
    assert terms[0] == identifier.lower(), terms  # the exact spelling first: the most distinctive term
    for part in parts:
        assert part in terms, (part, terms)


def test_distill_keeps_dotted_identifiers() -> None:
    terms = distill("sqlite3.OperationalError: database is locked")
    assert terms[0] == "sqlite3.operationalerror"
    assert {"sqlite", "operational", "database", "locked"} <= set(terms)


def test_distill_keeps_short_error_codes() -> None:
    """Lint and error codes look a little like hex but are the most specific words in the message."""
    assert "e501" in distill("app.py:3:80: E501 line too long")
    assert "eresolve" in distill("npm ERR! code ERESOLVE unable to resolve dependency tree")


def test_distill_order_dedupe_and_cap() -> None:
    terms = distill("yaml yaml Yaml YAML missing yaml")
    assert terms == ["yaml", "missing"]
    many = " ".join(f"word{chr(97 + i)}x" for i in range(26)) + " " + " ".join(f"alpha{c}" for c in "bcdefghij")
    assert len(distill(many)) == 24
    assert len(distill(many, max_terms=5)) == 5


def test_distill_of_pure_noise_is_empty() -> None:
    assert distill("") == []
    assert distill("Error: 0x7f3a2b9c10 at 2024-05-01T12:34:56Z line 12 /tmp/x/ https://e.com/ 42") == []


def test_clean_error_keeps_the_words_for_the_vector_arm() -> None:
    cleaned = clean_error('2024-05-01 12:00:01 ERROR [pid 4521] File "/srv/app/db.py", line 88: database is locked')
    assert "database is locked" in cleaned and "ERROR" in cleaned and "db" in cleaned
    assert not re.search(r"\d", cleaned)
    assert "/srv" not in cleaned


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=10).filter(
    lambda w: w not in STOP_WORDS | ERROR_NOISE
)
_HEXID = st.text(alphabet="0123456789abcdef", min_size=7, max_size=40).filter(
    lambda h: re.search(r"\d", h) is not None and re.search(r"[a-f]", h) is not None
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_WORD, min_size=1, max_size=6), _HEXID, st.booleans())
@example(["pack"], "deadbeef1", True)
def test_distill_never_keeps_hex_ids(words: list[str], hexid: str, prefixed: bool) -> None:
    token = ("0x" if prefixed else "") + hexid
    terms = distill(" ".join(words[:1] + [token] + words[1:]))
    assert all(hexid not in t for t in terms), (token, terms)
    assert terms == list(dict.fromkeys(words)), terms


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_distill_invariants(text: str) -> None:
    terms = distill(text)
    assert len(terms) == len(set(terms)) <= 24
    for t in terms:
        assert t == t.lower() and len(t) > 1
        assert t not in STOP_WORDS and t not in ERROR_NOISE
        assert not t.isdigit()
        assert not re.search(r"\s", t)


def test_split_identifier() -> None:
    assert split_identifier("ModuleNotFoundError") == ["module", "not", "found", "error"]
    assert split_identifier("no_such-table.name") == ["no", "such", "table", "name"]
    assert split_identifier("HTTPServer") == ["http", "server"]


def test_query_terms() -> None:
    assert query_terms("How do I fix the Flaky flaky TESTS?") == ["fix", "flaky", "tests"]
    assert query_terms("the and of") == []
    assert query_terms("pre-commit hook's output") == ["pre-commit", "hook's", "output"]


# ------------------------------------------------------------------------------------------- rrf


def test_rrf_single_arm() -> None:
    scores = rrf([[7, 3, 9]])
    assert scores == {7: 1 / 61, 3: 1 / 62, 9: 1 / 63}
    assert RRF_K == 60


def test_rrf_sums_over_arms() -> None:
    scores = rrf([[1, 2], [2, 3]])
    assert scores[1] == pytest.approx(1 / 61)
    assert scores[2] == pytest.approx(1 / 62 + 1 / 61)
    assert scores[3] == pytest.approx(1 / 62)
    assert max(scores, key=scores.__getitem__) == 2


def test_rrf_agreement_beats_a_single_first_place() -> None:
    # Third in both arms beats first in one arm alone: 2/63 > 1/61.
    scores = rrf([[10, 11, 12], [20, 21, 12]])
    assert scores[12] > scores[10] and scores[12] > scores[20]


def test_rrf_k_and_empty_arms() -> None:
    assert rrf([]) == {}
    assert rrf([[], []]) == {}
    assert rrf([[], [5]]) == {5: 1 / 61}
    assert rrf([[1, 2]], k=0) == {1: 1.0, 2: 0.5}
    # Rank-based: only order matters, never the arms' raw scores.
    assert rrf([[4, 5]], k=1) == {4: 1 / 2, 5: 1 / 3}


@given(st.lists(st.lists(st.integers(0, 50), unique=True, max_size=20), max_size=4))
def test_rrf_properties(arms: list[list[int]]) -> None:
    scores = rrf(arms)
    assert set(scores) == {i for arm in arms for i in arm}
    for arm in arms:
        for better, worse in zip(arm, arm[1:], strict=False):
            # Within one arm, a higher rank never scores lower unless the other arms make up for it.
            others_b = sum(1 / (RRF_K + a.index(better) + 1) for a in arms if a is not arm and better in a)
            others_w = sum(1 / (RRF_K + a.index(worse) + 1) for a in arms if a is not arm and worse in a)
            if others_b >= others_w:
                assert scores[better] > scores[worse]
    for s in scores.values():
        assert 0 < s <= len(arms) / (RRF_K + 1) + 1e-12


# ------------------------------------------------------------------------------------------- snippet


def test_snippet_short_value_is_whole_and_flat() -> None:
    assert snippet("Run   the\nmigrations\tfirst.", ["migrations"]) == "Run the migrations first."


def test_snippet_windows_around_first_term() -> None:
    value = ("filler words here " * 30) + "the WAL journal mode keeps readers going " + ("more tail text " * 30)
    s = snippet(value, ["journal"], width=80)
    assert "journal" in s.lower()
    assert s.startswith("…") and s.endswith("…")
    assert len(s) <= 80 + 2
    body = s.strip("…")
    assert value.find(body) >= 0, "the window is a contiguous piece of the (flattened) value"
    assert value[value.find(body) - 1] == " ", "the window starts on a word boundary"


def test_snippet_term_near_start_has_no_leading_ellipsis() -> None:
    value = "Journal mode matters. " + "x " * 200
    s = snippet(value, ["journal"], width=60)
    assert s.startswith("Journal") and s.endswith("…")


def test_snippet_without_a_match_shows_the_start() -> None:
    value = "alpha " * 100
    s = snippet(value, ["zzz"], width=50)
    assert s.startswith("alpha") and s.endswith("…") and len(s) <= 51


def test_snippet_earliest_of_several_terms() -> None:
    value = ("a " * 100) + "second " + ("b " * 100) + "first " + ("c " * 100)
    s = snippet(value, ["first", "second"], width=40)
    assert "second" in s and "first" not in s


def test_snippet_tail_match_has_no_trailing_ellipsis() -> None:
    value = ("lead " * 100) + "the end"
    s = snippet(value, ["end"], width=40)
    assert s.startswith("…") and s.endswith("the end")
