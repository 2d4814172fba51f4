import re
import unicodedata

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cairn.core.keys import MAX_KEY_CHARS, normalize_key
from cairn.errors import CairnError

ASCII_KEY_RE = re.compile(r"^([a-z0-9]+(-[a-z0-9]+)*::)?[a-z0-9]+(-[a-z0-9]+)*$")
WORD = st.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True)
SEPARATOR = st.from_regex(r"[\s\-_.,!?/*+=()\[\]'\"]{1,4}", fullmatch=True)


def refuse(raw):
    with pytest.raises(CairnError) as info:
        normalize_key(raw)
    assert info.value.code == "INVALID_KEY"
    return info.value


def is_word_char(ch):
    return ch.isalnum() or unicodedata.category(ch).startswith("M")


def well_formed_part(part):
    return (
        bool(part)
        and not part.startswith("-")
        and not part.endswith("-")
        and "--" not in part
        and all(ch == "-" or is_word_char(ch) for ch in part)
    )


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("My Key", "my-key"),
        ("my-key", "my-key"),
        ("MY  KEY!", "my-key"),
        ("  --my__key--  ", "my-key"),
        ("use pytest -x", "use-pytest-x"),
        ("Loop::PR 395", "loop::pr-395"),
        ("loop::pr-395", "loop::pr-395"),
        ("Loop :: PR 395", "loop::pr-395"),
        ("My NS::Some Key", "my-ns::some-key"),
        ("a:::b", "a::b"),
        ("loop:pr 395", "loop-pr-395"),
        ("Ｆｕｌｌｗｉｄｔｈ", "fullwidth"),
        ("Straße", "strasse"),
        ("Café Crème", "café-crème"),
        ("日本語 キー", "日本語-キー"),
        ("हिन्दी कुंजी", "हिन्दी-कुंजी"),
        ("x" * MAX_KEY_CHARS, "x" * MAX_KEY_CHARS),
    ],
)
def test_normalizes(raw, key):
    assert normalize_key(raw) == key


def test_spellings_of_one_key_are_one_address():
    assert normalize_key("My Key") == normalize_key("my-key") == normalize_key("MY  KEY!")


def test_empty_after_normalization():
    for raw in ["", "   ", "!!!", "---", "__"]:
        error = refuse(raw)
        assert "letter or digit" in error.message


def test_too_long_says_the_limit():
    error = refuse("x" * (MAX_KEY_CHARS + 1))
    assert str(MAX_KEY_CHARS) in error.message


def test_too_long_after_compatibility_expansion():
    # U+FDFA expands to 18 characters under NFKC.
    error = refuse("\ufdfa" * 12)
    assert str(MAX_KEY_CHARS) in error.message


@pytest.mark.parametrize("raw", ["a::b::c", "loop::x::y", "a::::b"])
def test_only_one_namespace(raw):
    error = refuse(raw)
    assert "namespace" in error.message


@pytest.mark.parametrize("raw", ["::x", "!!::x"])
def test_empty_namespace(raw):
    error = refuse(raw)
    assert "namespace" in error.message


@pytest.mark.parametrize("raw", ["loop::", "loop::!!!"])
def test_empty_body_after_namespace(raw):
    error = refuse(raw)
    assert "letter or digit" in error.message


def test_non_string():
    refuse(None)


@given(st.text(max_size=MAX_KEY_CHARS))
@example("İstanbul")
@example("a\u0345b")
@example("ǅ::ǆ")
def test_idempotent_and_well_formed(raw):
    try:
        key = normalize_key(raw)
    except CairnError as error:
        assert error.code == "INVALID_KEY"
        return
    assert normalize_key(key) == key
    namespace, sep, body = key.partition("::")
    parts = [namespace, body] if sep else [key]
    assert all(well_formed_part(part) for part in parts)


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=80))
def test_ascii_output_shape(raw):
    try:
        key = normalize_key(raw)
    except CairnError:
        return
    assert ASCII_KEY_RE.match(key)


@given(st.lists(WORD, min_size=1, max_size=6), st.data())
def test_case_and_separators_do_not_matter(words, data):
    separators = [data.draw(SEPARATOR) for _ in words]
    spelled = "".join(f"{word.upper() if i % 2 else word}{sep}" for i, (word, sep) in enumerate(zip(words, separators)))
    assert normalize_key(spelled) == "-".join(words).lower()
