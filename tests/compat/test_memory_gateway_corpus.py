"""The corpus layout's pure parts: identity, front matter, the index line, wikilinks, slugs."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.compat.memory_gateway import corpus as layout
from cairn.compat.memory_gateway.envelope import GatewayError
from cairn.compat.memory_gateway.mirror import address, slug_of


def test_normalize_is_the_peers_identity_form() -> None:
    assert layout.normalize("My Profile") == "my-profile"
    assert layout.normalize("  MY__PROFILE!! ") == "my-profile"
    assert layout.normalize("café au lait") == "caf-au-lait"  # non-ASCII is not [a-z0-9], as in the peer
    assert layout.slug_for("user", "My Cool Topic") == "user/my-cool-topic"
    with pytest.raises(GatewayError) as e:
        layout.slug_for("user", "!!!")
    assert e.value.code == "USAGE"


def test_render_and_parse_round_trip() -> None:
    data = layout.render("Merge Preference", "git default", "user", "Body line\n\n")
    assert data == b"---\nname: Merge Preference\ndescription: git default\ntype: user\n---\nBody line\n"
    topic = layout.parse("user/merge-preference", data)
    assert (topic.name, topic.description, topic.type, topic.body) == (
        "Merge Preference", "git default", "user", "Body line\n",
    )  # fmt: skip
    assert layout.render("x", "", "user", "b").startswith(b"---\nname: x\ndescription:\ntype: user\n")


def test_a_file_without_front_matter_is_named_after_itself() -> None:
    topic = layout.parse("reference/plain", b"just text\n")
    assert (topic.name, topic.description, topic.body) == ("plain", "", "just text\n")
    unterminated = layout.parse("reference/odd", b"---\nname: never closed\n")
    assert unterminated.name == "odd"


def test_index_line_and_wikilinks() -> None:
    topic = layout.Topic("user/a", "user", "A [draft]", "desc", "b")
    assert layout.index_line(topic) == "- [A (draft)](user/a.md) — desc"
    assert layout.index_line(layout.Topic("user/a", "user", "a", "", "b")) == "- [a](user/a.md)"
    body = "see [[reference/x]], [[user/y|alias]] and [[reference/x]] again, [[project/z.md]]"
    assert layout.wikilinks(body) == ["reference/x", "user/y", "project/z"]


def test_slugs_that_leave_the_corpus_are_boundary_refusals() -> None:
    for slug in ("../x", "user/../../etc", "/etc/passwd", "user/./x", "user\\x"):
        with pytest.raises(GatewayError) as e:
            layout.parse_slug(slug)
        assert e.value.code == "BOUNDARY", slug
    assert layout.parse_slug("user/profile.md") == ("user", "profile")
    with pytest.raises(GatewayError) as e:
        layout.parse_slug("user")
    assert e.value.code == "USAGE"


def test_symlinks_out_of_the_corpus_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "user").symlink_to(outside)
    c = layout.Corpus(str(root))
    with pytest.raises(GatewayError) as e:
        c.live_path("user/x")
    assert e.value.code == "BOUNDARY"
    assert c.live_slugs("user") == []


def test_store_addresses() -> None:
    assert address("user/profile") == ("project::user.profile", "user::profile")
    scope, key = address("reference/" + "x" * 150)
    assert len(scope) <= len("project::") + 100 and key == "reference::" + "x" * 150
    assert slug_of("user::profile") == "user/profile"
    assert slug_of("loop::x") is None
