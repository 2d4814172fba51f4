import hashlib
import re
import unicodedata

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cairn.core import confusables
from cairn.core.content import (
    MAX_VALUE_BYTES,
    content_hash,
    first_line,
    identity_form,
    normalize_content,
    validate_value,
)
from cairn.errors import CairnError

WORD = st.from_regex(r"[A-Za-z0-9]{1,10}", fullmatch=True)
# Runs that identity must ignore between words: whitespace, punctuation, symbols, invisible marks.
NOISE = st.text(alphabet=" \t\n\r\u00a0\u3000.,;:!?-_—–/\\()[]{}<>\"'`*#@$%^&+=~|§©°€", min_size=1, max_size=5)
INVISIBLE = st.sampled_from(["\u200b", "\u200c", "\u200d", "\ufeff", "\u2060", "\u00ad"])


def refuse(text, code):
    with pytest.raises(CairnError) as info:
        validate_value(text)
    assert info.value.code == code
    return info.value


# --- validate_value -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("hello", "hello"),
        ("hello  \n\n\t", "hello"),
        ("    indented code\n  kept", "    indented code\n  kept"),
        ("a\n\n\nb", "a\n\n\nb"),
        ("x" * MAX_VALUE_BYTES, "x" * MAX_VALUE_BYTES),
    ],
)
def test_validate_value_accepts(text, stored):
    assert validate_value(text) == stored


@pytest.mark.parametrize("text", ["", " ", "\n\t  \r\n", "\u3000"])
def test_validate_value_refuses_empty(text):
    refuse(text, "INVALID_VALUE")


def test_validate_value_refuses_nul():
    error = refuse("abc\x00def", "INVALID_VALUE")
    assert "NUL" in error.message
    assert error.data["offset"] == 3


def test_validate_value_refuses_lone_surrogates():
    refuse("abc\ud800", "INVALID_VALUE")


def test_validate_value_refuses_non_string():
    refuse(None, "INVALID_VALUE")


def test_validate_value_too_large_gives_size_and_limit():
    text = "é" * (MAX_VALUE_BYTES // 2 + 1)  # two bytes each in UTF-8
    error = refuse(text, "VALUE_TOO_LARGE")
    size = len(text.encode("utf-8"))
    assert str(size) in error.message
    assert str(MAX_VALUE_BYTES) in error.message
    assert error.data == {"size": size, "limit": MAX_VALUE_BYTES}


def test_validate_value_limit_is_on_the_stored_form():
    assert validate_value("x" * MAX_VALUE_BYTES + "   \n") == "x" * MAX_VALUE_BYTES
    refuse("x" * (MAX_VALUE_BYTES + 1), "VALUE_TOO_LARGE")


# --- normalize_content / content_hash -------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Use  --no-cache!", "use no cache"),
        ("Run `pytest -x`.", "run pytest x"),
        ("HELLO\n\n  World", "hello world"),
        ("ﬁle ＦＵＬＬ", "file full"),
        ("Stra\u00dfe", "STRASSE"),
        ("zero\u200bwidth", "zerowidth"),
        ("price: $5 + 10%", "price 5 10"),
    ],
)
def test_same_content(a, b):
    assert normalize_content(a) == normalize_content(b)
    assert content_hash(a) == content_hash(b)


def test_normalize_content_example():
    assert normalize_content("Use  --no-cache!") == "use no cache"


def test_different_content_differs():
    assert content_hash("use no cache") != content_hash("use the cache")
    assert content_hash("café") != content_hash("cafe")


def test_content_hash_is_sha256_of_the_normal_form():
    text = "Use  --no-cache!"
    expected = hashlib.sha256(normalize_content(text).encode("utf-8")).hexdigest()
    assert content_hash(text) == expected
    assert re.fullmatch(r"[0-9a-f]{64}", expected)


def test_content_hash_survives_lone_surrogates():
    assert content_hash("a\ud800b") == content_hash("ab")


@given(st.text())
@example("e\u200b\u0301")
@example("\u0345")
@example("a\u00b4")
def test_normalize_content_idempotent(text):
    normal = normalize_content(text)
    assert normalize_content(normal) == normal
    assert normal == normal.strip()
    assert "  " not in normal


@given(st.lists(WORD, min_size=1, max_size=8), st.data())
def test_case_whitespace_punctuation_and_invisibles_do_not_matter(words, data):
    plain = " ".join(words).lower()
    noisy = data.draw(NOISE) if data.draw(st.booleans()) else ""
    for i, word in enumerate(words):
        if data.draw(st.booleans()) and len(word) > 1:
            cut = data.draw(st.integers(1, len(word) - 1))
            word = word[:cut] + data.draw(INVISIBLE) + word[cut:]
        noisy += word.upper() if i % 2 else word.swapcase()
        noisy += data.draw(NOISE)
    assert normalize_content(noisy) == plain
    assert content_hash(noisy) == content_hash(plain)


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=60))
def test_ascii_case_insensitive(text):
    assert content_hash(text.upper()) == content_hash(text.lower()) == content_hash(text)


# --- first_line -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit", "line"),
    [
        ("title\nbody", 160, "title"),
        ("\n\n   \n  indented title  \nbody", 160, "indented title"),
        ("", 160, ""),
        ("   \n\t", 160, ""),
        ("abcdef", 6, "abcdef"),
        ("abcdefg", 6, "abcde…"),
        ("abcd efg", 6, "abcd…"),
        ("x\r\ny", 160, "x"),
    ],
)
def test_first_line(text, limit, line):
    assert first_line(text, limit) == line


def test_first_line_default_limit():
    line = first_line("y" * 500)
    assert len(line) == 160
    assert line.endswith("…")


def test_first_line_refuses_a_non_positive_limit():
    with pytest.raises(CairnError) as info:
        first_line("x", 0)
    assert info.value.code == "INVALID_INPUT"


@given(st.text(), st.integers(1, 300))
def test_first_line_respects_the_limit(text, limit):
    line = first_line(text, limit)
    assert len(line) <= limit
    assert "\n" not in line


# --- content_identity (the tombstone check's wider identity) ---------------------------------------

import sys  # noqa: E402

import regex  # noqa: E402

from cairn.core.content import content_identity  # noqa: E402

# Drawn from the property itself (regex's Unicode tables), not a list typed here: hypothesis picks
# among all of them, variation selectors, CGJ, Hangul fillers and tag characters included.
_DI = regex.compile(r"\p{Default_Ignorable_Code_Point}")
DEFAULT_IGNORABLES = [chr(cp) for cp in range(sys.maxunicode + 1) if _DI.match(chr(cp))]
FORGOTTEN = "Disable the flaky retry plugin with --no-retry in CI."


def test_the_ignorable_set_is_the_whole_property():
    # The property has thousands of members; these are the ones a hand-kept list used to miss.
    for ch in ("\u034f", "\ufe0f", "\U000e0100", "\u115f", "\u1160", "\u3164", "\uffa0", "\u180b", "\U000e0041"):
        assert ch in DEFAULT_IGNORABLES
    assert len(DEFAULT_IGNORABLES) > 4000
    assert not any(ch.isspace() for ch in DEFAULT_IGNORABLES)


INSERTIONS = st.tuples(st.integers(0, len(FORGOTTEN)), st.sampled_from(DEFAULT_IGNORABLES))


@given(st.lists(INSERTIONS, min_size=1, max_size=12))
@example([(1, "\u034f")])
@example([(3, "\U000e0100"), (9, "\u3164")])
def test_any_default_ignorable_anywhere_is_folded(insertions):
    text = FORGOTTEN
    for pos, ch in sorted(insertions, reverse=True):
        text = text[:pos] + ch + text[pos:]
    assert content_identity(text) == content_identity(FORGOTTEN)


@pytest.mark.parametrize(
    "variant",
    [
        "Dіsable the flaky retry plugin with --no-retry in CI.",  # Cyrillic і
        "Disable thе flаky retry plugin with --nо-retry in CI.",  # Cyrillic е а о
        "Disable the flaky retry plugin with --no-retry in CΙ.",  # Greek capital iota
        "Dısable the flaky retry plugın with --no-retry ın CI.",  # dotless i
        "Dísáble thé flàky rétry plügin wîth --nö-rétry in ÇI.",  # accents
        "Disable the flaky retry plugin with --no-retry in CI.".upper(),
        "Ｄｉｓａｂｌｅ the flaky retry plugin with --no-retry in CI.",  # fullwidth
        "D\u0131\u0307sable the flaky retry plugin with --no-retry in CI.",  # dotless i + dot above
    ],
)
def test_look_alikes_and_accents_share_the_identity(variant):
    assert content_identity(variant) == content_identity(FORGOTTEN)


@pytest.mark.parametrize(
    "other",
    [
        "Enable the flaky retry plugin with --retry in CI.",
        "Disable the flaky retry plugin with --no-retry locally.",
        "Disable the stable retry plugin with --no-retry in CI.",
        "Keep the flaky retry plugin in CI.",
    ],
)
def test_different_words_keep_different_identities(other):
    assert content_identity(other) != content_identity(FORGOTTEN)


def test_script_specific_marks_are_spelling_not_accents():
    # Devanagari vowel signs and virama, Arabic harakat and Thai tone marks make different words:
    # only positional diacritics (canonical combining class >= 200) are stripped.
    assert content_identity("कि") != content_identity("क")
    assert content_identity("क्") != content_identity("क")
    assert content_identity("ไม่") != content_identity("ไม")
    assert confusables.is_accent("\u0301") and confusables.is_accent("\u0327")
    assert not confusables.is_accent("\u093f") and not confusables.is_accent("\u094d")


def test_prototypes_come_from_unicode_data():
    table = confusables.prototypes()
    assert len(table) > 6000  # the whole confusables.txt, not a hand-picked few
    assert table["\u0430"] == "a" and table["\u0131"] == "i" and table["\u03bf"] == "o"


def test_one_character_look_up_agrees_with_the_whole_table():
    """``prototype`` finds one line in the file's bytes; the bulk table reads every line: the same answers."""
    table = confusables.prototypes()
    for ch, proto in table.items():
        assert confusables.prototype(ch) == proto
    unmapped = [chr(cp) for cp in range(0x20, 0x3000) if chr(cp) not in table]
    assert len(unmapped) > 5000
    for ch in unmapped:  # no mapping: the character itself (a prefix of a longer code, "\u1D40" vs U+1D400, too)
        assert confusables.prototype(ch) == ch
    assert confusables.prototype("\U0001d400") == "A" and confusables.prototype("\u1d40") == "\u1d40"


def test_the_latin1_table_is_the_whole_tables_latin1_part():
    """A Latin-1 text is skeletonized from the lines of its own range; any wider one from every line."""
    whole = confusables._translation()
    latin1 = confusables._latin1_translation()
    assert latin1 == {cp: proto for cp, proto in whole.items() if cp <= 0xFF}
    assert latin1[ord("m")] == "rn" and latin1[ord("0")] == "O"  # ASCII has look-alikes too
    assert confusables.skeleton_chars("m0 \xe9") == "m0 \xe9".translate(whole)
    assert confusables.skeleton_chars("m\u0430") == "rna"  # a Cyrillic a: the whole table


def test_identity_is_wider_than_the_stored_hash_but_storage_is_untouched():
    variant = "Dіsable thе flaky retry plugin with --no-retry in CI."
    assert content_hash(variant) != content_hash(FORGOTTEN)  # the stored hash is unchanged
    assert content_identity(variant) == content_identity(FORGOTTEN)


@given(st.text(max_size=80))
def test_identity_is_a_fixed_point_and_coarser_than_the_content_hash(text):
    form = identity_form(text)
    assert identity_form(form) == form
    # Whatever the narrow form equates, the wide one does too.
    assert identity_form(normalize_content(text)) == form


# --- the ASCII fast paths give what the per-character rules give --------------------------------


def _reference_normal(text):
    """``normalize_content`` written character by character, as the rules read (no fast path)."""
    kept = "".join(ch for ch in text if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", kept).casefold())
    return " ".join("".join(" " if unicodedata.category(ch)[0] in "PS" else ch for ch in folded).split())


def _reference_identity(text):
    """``identity_form`` without any fast path: the same rounds, a Python step per character."""
    table = confusables.prototypes()
    form = _reference_normal(confusables.strip_ignorable(text))
    for _ in range(4):
        plain = "".join(ch for ch in unicodedata.normalize("NFD", form) if not confusables.is_accent(ch))
        skeleton = unicodedata.normalize("NFD", "".join(table.get(ch, ch) for ch in plain))
        nxt = _reference_normal_fold("".join(ch for ch in skeleton if not confusables.is_accent(ch)))
        if nxt == form:
            break
        form = nxt
    return " ".join("".join(" " if unicodedata.category(ch)[0] in "PS" else ch for ch in form).split())


def _reference_normal_fold(text):
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def test_every_ascii_character_normalizes_as_the_rules_say():
    for code in range(128):
        text = f"Ab{chr(code)}cD"
        assert normalize_content(text) == _reference_normal(text), repr(text)
        assert identity_form(text) == _reference_identity(text), repr(text)


@given(st.one_of(st.text(alphabet=st.characters(codec="ascii"), max_size=60), st.text(max_size=40)))
@example("Ünïcödé — “quoted” ﬁle ０１ аpple")
@example("I|l 0O rn\u200bm")
def test_normal_and_identity_forms_match_the_per_character_rules(text):
    assert normalize_content(text) == _reference_normal(text)
    assert identity_form(text) == _reference_identity(text)
