from hypothesis import given
from hypothesis import strategies as st

from cairn.core.diffing import NO_NEWLINE_MARKER, unified_diff

LINES = st.lists(st.sampled_from(["alpha", "beta", "gamma", "", "  indented", "x\fy"]), max_size=8)


def test_identical_is_empty():
    assert unified_diff("a\nb\n", "a\nb\n", "v1", "v2") == ""


def test_changed_line():
    diff = unified_diff("a\nb\nc\n", "a\nB\nc\n", "v1", "v2")
    assert diff == "--- v1\n+++ v2\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"


def test_labels_are_used():
    diff = unified_diff("x\n", "y\n", "my-key@3", "my-key@4")
    assert diff.startswith("--- my-key@3\n+++ my-key@4\n")


def test_missing_final_newline_is_marked_not_glued():
    diff = unified_diff("a\nb", "a\nc", "v1", "v2")
    assert diff == (f"--- v1\n+++ v2\n@@ -1,2 +1,2 @@\n a\n-b\n{NO_NEWLINE_MARKER}+c\n{NO_NEWLINE_MARKER}")


def test_adding_a_final_newline_shows_up():
    diff = unified_diff("a", "a\n", "v1", "v2")
    assert "-a\n" + NO_NEWLINE_MARKER in diff
    assert "+a\n" in diff


def test_only_newline_splits_lines():
    # A form feed or U+2028 inside a lesson is content, not a line break.
    diff = unified_diff("a\fb\u2028c\n", "a\fb\u2028C\n", "v1", "v2")
    assert "-a\fb\u2028c\n" in diff
    assert "+a\fb\u2028C\n" in diff


def test_from_and_to_empty():
    assert unified_diff("", "new\n", "v1", "v2") == "--- v1\n+++ v2\n@@ -0,0 +1 @@\n+new\n"
    assert unified_diff("old\n", "", "v1", "v2") == "--- v1\n+++ v2\n@@ -1 +0,0 @@\n-old\n"


@given(LINES, LINES, st.booleans(), st.booleans())
def test_properties(old_lines, new_lines, old_nl, new_nl):
    old = "\n".join(old_lines) + ("\n" if old_nl and old_lines else "")
    new = "\n".join(new_lines) + ("\n" if new_nl and new_lines else "")
    diff = unified_diff(old, new, "old", "new")
    assert (diff == "") == (old == new)
    assert diff == "" or diff.endswith("\n")
    if diff:
        assert diff.startswith("--- old\n+++ new\n")
        # Every removed and added line is a whole line of the side it comes from.
        removed = [ln[1:] for ln in diff.split("\n") if ln.startswith("-") and not ln.startswith("---")]
        added = [ln[1:] for ln in diff.split("\n") if ln.startswith("+") and not ln.startswith("+++")]
        assert all(line in old.split("\n") for line in removed)
        assert all(line in new.split("\n") for line in added)
