import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cairn.core.scope import FORMS, ladder, scope_kind, scope_matches, validate_scope
from cairn.errors import CairnError

NAME = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,20}", fullmatch=True)
BRANCH = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,10}(/[A-Za-z0-9_][A-Za-z0-9_-]{0,10}){0,3}", fullmatch=True)
VALID_SCOPES = st.one_of(
    st.just("global"),
    NAME.map(lambda n: f"project::{n}"),
    st.tuples(NAME, NAME).map(lambda t: f"repo::{t[0]}/{t[1]}"),
    st.tuples(NAME, NAME, BRANCH).map(lambda t: f"branch::{t[0]}/{t[1]}::{t[2]}"),
)
# Text drawn mostly from the characters the grammar cares about, so the fuzzing reaches deep paths.
SCOPEISH = st.text(alphabet="globaprjectnhmiwdg:/.-_ @{}\\AZ09\t", max_size=40)


def refuse(raw):
    with pytest.raises(CairnError) as info:
        validate_scope(raw)
    assert info.value.code == "INVALID_SCOPE"
    assert info.value.data["scope"] == raw
    return info.value


# --- accepted -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("global", "global"),
        ("  GLOBAL\n", "global"),
        ("project::foo", "project::foo"),
        ("Project::Foo.Bar_baz-1", "project::foo.bar_baz-1"),
        ("repo::acme/widget", "repo::acme/widget"),
        ("Repo::Acme/Widget", "repo::acme/widget"),
        ("branch::acme/widget::main", "branch::acme/widget::main"),
        ("BRANCH::Acme/Widget::Feature/Login-V2", "branch::acme/widget::Feature/Login-V2"),
        ("branch::acme/widget::release/1.2.x", "branch::acme/widget::release/1.2.x"),
        ("branch::acme/widget::dependabot/npm_and_yarn/lodash-4.17.21", None),
    ],
)
def test_accepts_and_canonicalizes(raw, canonical):
    assert validate_scope(raw) == (canonical or raw)


def test_branch_case_is_preserved_but_the_rest_is_lowercased():
    assert validate_scope("branch::ACME/W::Main") == "branch::acme/w::Main"
    assert validate_scope("branch::acme/w::main") != validate_scope("branch::acme/w::Main")


def test_length_limits():
    validate_scope("project::" + "a" * 100)
    refuse("project::" + "a" * 101)
    validate_scope("branch::a/b::" + "x" * 200)
    refuse("branch::a/b::" + "x" * 201)
    long_scope = "branch::" + "o" * 100 + "/" + "r" * 100 + "::" + "b" * 100
    assert len(long_scope) > 300
    error = refuse(long_scope)
    assert "300" in error.message


# --- corrected forms ------------------------------------------------------------------------------


def test_single_colon_separator_is_corrected():
    error = refuse("repo:acme/widget")
    assert 'use "::" as the separator, not ":". Example: "repo::acme/widget"' in error.message
    assert error.data["corrected"] == "repo::acme/widget"


@pytest.mark.parametrize(
    ("raw", "corrected"),
    [
        ("project:foo", "project::foo"),
        ("branch:acme/w:main", "branch::acme/w::main"),
        ("Repo:Acme/Widget", "repo::acme/widget"),
        ("repo:::acme/widget", "repo::acme/widget"),
        ("repo :: acme/widget", "repo::acme/widget"),
        ("branch::acme/w:Main", "branch::acme/w::Main"),
        ("repo::acme/w::main", "branch::acme/w::main"),
        ("acme/widget", "repo::acme/widget"),
    ],
)
def test_derivable_mistakes_carry_the_corrected_form(raw, corrected):
    error = refuse(raw)
    assert error.data["corrected"] == corrected
    assert f'Example: "{corrected}"' in error.message
    assert validate_scope(corrected) == corrected


def test_missing_repo_part_explains_the_shape():
    error = refuse("repo::acme")
    assert "repo::{owner}/{repo}" in error.message
    assert 'Example: "repo::owner/name"' in error.message
    assert error.data["corrected"] is None


def test_missing_repo_part_behind_a_bad_separator_explains_both():
    error = refuse("repo:acme")
    assert 'use "::" as the separator' in error.message
    assert 'Example: "repo::owner/name"' in error.message


def test_unknown_kind_lists_the_four_forms():
    error = refuse("team::x")
    assert FORMS in error.message
    for form in ("global", "project::{name}", "repo::{owner}/{repo}", "branch::{owner}/{repo}::{branch}"):
        assert form in error.message
    assert error.data["corrected"] is None


@pytest.mark.parametrize("raw", ["", "   ", "\n\t"])
def test_empty(raw):
    error = refuse(raw)
    assert error.message == "scope is empty"


# --- refused --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "global::x",
        "global::",
        "project::",
        "project::a::b",
        "project::-foo",
        "project::.hidden",
        "project::foo bar",
        "repo::",
        "repo::acme/",
        "repo::/widget",
        "repo::acme/widget/extra",
        "repo::../x",
        "repo::acme/../x",
        "repo::acme/..",
        "project::a..b",
        "/etc/passwd",
        "repo::/etc/passwd",
        "C:\\scopes\\x",
        "repo::acme\\widget",
        "repo::acme/wid\x00get",
        "repo::acme/wid\x7fget",
        "repo::acme/wïdget",
        "repo::\u212acme/x",  # Kelvin sign: lowercases to ASCII "k", must not sneak in
        "branch::acme/widget",
        "branch::acme/widget::",
        "branch::acme::main",
        "branch::acme/w::a..b",
        "branch::acme/w::/main",
        "branch::acme/w::-main",
        "branch::acme/w::main/",
        "branch::acme/w::main.",
        "branch::acme/w::main.lock",
        "branch::acme/w::a.lock/b",
        "branch::acme/w::a//b",
        "branch::acme/w::a@{1}",
        "branch::acme/w::a b",
        "branch::acme/w::a\tb",
        "branch::acme/w::a\\b",
        "branch::acme/w::feat/.x",
        "branch::acme/w::a~1",
        "branch::acme/w::a^b",
        "branch::acme/w::a?b",
        "team::x",
        "foo",
        "::",
        "repo::acme/widget::main::x",
    ],
)
def test_refused(raw):
    refuse(raw)


def test_non_string_is_refused_with_the_scope_code():
    with pytest.raises(CairnError) as info:
        validate_scope(None)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_SCOPE"


def test_control_characters_are_escaped_in_the_message():
    error = refuse("repo::acme/x\x1b[31m")
    assert "\x1b" not in error.message


# --- properties -----------------------------------------------------------------------------------


@given(VALID_SCOPES)
def test_generated_valid_scopes_are_accepted_unchanged(scope):
    assert validate_scope(scope) == scope


@given(st.one_of(SCOPEISH, st.text(max_size=60), VALID_SCOPES.map(str.upper)))
@example("repo::acme/../x")
@example("branch::a/b::..")
def test_accepted_scopes_are_canonical_and_safe(raw):
    try:
        scope = validate_scope(raw)
    except CairnError as error:
        assert error.code == "INVALID_SCOPE"
        corrected = error.data["corrected"]
        if corrected is not None:
            assert validate_scope(corrected) == corrected
        return
    assert validate_scope(scope) == scope
    assert ".." not in scope
    assert "\\" not in scope
    assert scope.isascii()
    assert len(scope) <= 300
    assert scope_kind(scope) in {"global", "project", "repo", "branch"}


# --- scope_kind -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "kind"),
    [
        ("global", "global"),
        ("project::x", "project"),
        ("repo::a/b", "repo"),
        ("branch::a/b::c", "branch"),
    ],
)
def test_scope_kind(scope, kind):
    assert scope_kind(scope) == kind


def test_scope_kind_refuses_invalid():
    with pytest.raises(CairnError) as info:
        scope_kind("team::x")
    assert info.value.code == "INVALID_SCOPE"


# --- ladder ---------------------------------------------------------------------------------------


def test_ladder_full():
    assert ladder(repo="Acme/Widget", branch="Feature/X", project="Platform") == [
        "branch::acme/widget::Feature/X",
        "repo::acme/widget",
        "project::platform",
        "global",
    ]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, ["global"]),
        ({"repo": "acme/widget"}, ["repo::acme/widget", "global"]),
        ({"branch": "main"}, ["global"]),
        ({"project": "p"}, ["project::p", "global"]),
        ({"repo": "", "branch": "", "project": ""}, ["global"]),
        ({"repo": "acme/widget", "branch": "main"}, ["branch::acme/widget::main", "repo::acme/widget", "global"]),
    ],
)
def test_ladder_partial(kwargs, expected):
    assert ladder(**kwargs) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"repo": "acme"},
        {"repo": "../etc"},
        {"repo": "acme/widget", "branch": "a..b"},
        {"repo": "acme/widget", "branch": "x::y"},
        {"project": "a/b"},
    ],
)
def test_ladder_refuses_invalid_input(kwargs):
    with pytest.raises(CairnError) as info:
        ladder(**kwargs)
    assert info.value.code == "INVALID_SCOPE"


@given(NAME, NAME, BRANCH, NAME)
def test_ladder_has_no_duplicates_and_ends_at_global(owner, repo, branch, project):
    rungs = ladder(repo=f"{owner}/{repo}", branch=branch, project=project)
    assert len(rungs) == len(set(rungs)) == 4
    assert rungs[-1] == "global"
    assert [scope_kind(s) for s in rungs] == ["branch", "repo", "project", "global"]


# --- scope_matches --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "pattern", "expected"),
    [
        ("repo::acme/widget", "repo::acme/*", True),
        ("repo::acme/widget", "repo::*", True),
        ("repo::acme/widget", "repo::other/*", False),
        ("branch::acme/widget::main", "repo::acme/*", False),
        ("branch::acme/widget::main", "branch::acme/*::*", True),
        ("branch::acme/widget::main", "branch::acme/widget::*", True),
        ("branch::acme/widget::main", "branch::*", False),
        ("branch::acme/widget::feat/x", "branch::acme/widget::feat/*", True),
        ("branch::acme/widget::Main", "branch::acme/widget::main", False),
        ("branch::acme/widget::Main", "BRANCH::Acme/Widget::Main", True),
        ("repo::acme/widget", "Repo::ACME/*", True),
        ("project::foo", "project::f*", True),
        ("global", "global", True),
        ("global", "*", True),
        ("branch::acme/widget::main", "*", True),
        ("global", "", False),
        ("repo::acme/widget", "repo:*", False),
        ("repo::acme/widget", "repo::acme/widge?", False),
    ],
)
def test_scope_matches(scope, pattern, expected):
    assert scope_matches(scope, pattern) is expected


def test_scope_matches_refuses_an_invalid_scope_instead_of_matching_it():
    with pytest.raises(CairnError) as info:
        scope_matches("repo::acme/../secret", "repo::acme/*")
    assert info.value.code == "INVALID_SCOPE"


@given(VALID_SCOPES)
def test_every_scope_matches_star_and_itself(scope):
    assert scope_matches(scope, "*")
    assert scope_matches(scope, scope)


@given(st.tuples(NAME, NAME, BRANCH))
def test_star_never_crosses_the_separator(parts):
    owner, repo, branch = parts
    scope = f"branch::{owner}/{repo}::{branch}"
    assert not scope_matches(scope, f"branch::{owner}/*")
    assert not scope_matches(scope, "branch::*")
    assert scope_matches(scope, f"branch::{owner}/*::*")
