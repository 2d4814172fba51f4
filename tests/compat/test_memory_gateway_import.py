"""``cairn import --from memory-gateway``: a corpus into an ordinary Cairn store, idempotently."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import cairn.library
from tests.compat.gateway_helpers import Result

GW = Callable[..., Result]


def _cairn(home: Path, env: dict[str, str], *args: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "--json", *args],
        capture_output=True, env=env, check=False,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout)


def test_import_brings_versions_supersessions_archive_and_links(
    gw: GW, corpus: Path, tmp_path: Path, gw_env: dict[str, str]
) -> None:
    gw("create", "a", "--type", "user", "--description", "about a", body="a one")
    gw("update", "--supersede", "--type", "user", "--name", "a", body="a two")
    gw("create", "b", "--type", "project", body="b links [[user/a]]")
    gw("create", "c", "--type", "reference", body="c text")
    gw("update", "--supersede", "--type", "reference", "--name", "d", "--supersedes", "reference/c", body="d text")
    gw("create", "e", "--type", "feedback", body="e text")
    gw("archive", "feedback/e")
    (corpus / "user" / "planted.md").write_text("planted by hand\n")
    home = tmp_path / "home"
    rc, first = _cairn(home, gw_env, "import", "--from", "memory-gateway", str(corpus), "--scope", "project::mem")
    assert rc == 0, first
    data = first["data"]
    assert (data["created"], data["links"], data["refused"], data["scope"]) == (6, 2, [], "project::mem")
    rc, again = _cairn(home, gw_env, "import", "--from", "memory-gateway", str(corpus), "--scope", "project::mem")
    assert rc == 0 and (again["data"]["created"], again["data"]["unchanged"], again["data"]["links"]) == (0, 8, 0)
    m = cairn.library.open(home=home, token="")
    try:
        a = m.history("project::mem", "user::a")
        assert [v["value"] for v in a["versions"]] == ["a one", "a two"]
        assert m.read("project::mem", "user::a")["lesson"]["kind"] == "preference"
        assert m.read("project::mem", "user::a")["lesson"]["trigger"] == "about a"
        assert m.history("project::mem", "reference::c")["status"] == "superseded"
        assert m.history("project::mem", "feedback::e")["status"] == "archived"
        assert m.read("project::mem", "user::planted")["lesson"]["value"] == "planted by hand"
        exported = [json.loads(line) for line in m.service.export(m.principal)]
        rels = sorted((r["rel"], r["src"]["key"], r["dst"]["key"]) for r in exported if r["type"] == "link")
        assert rels == [("related", "project::b", "user::a"), ("supersedes", "reference::d", "reference::c")]
    finally:
        m.close()


def test_import_needs_a_known_source_and_a_corpus(tmp_path: Path, gw_env: dict[str, str]) -> None:
    home = tmp_path / "home"
    rc, bad = _cairn(home, gw_env, "import", "--from", "kiwi-mem", str(tmp_path))
    assert (rc, bad["reason"]["code"]) == (1, "INVALID_INPUT") and "memory-gateway" in bad["reason"]["message"]
    rc, missing = _cairn(home, gw_env, "import", "--from", "memory-gateway", str(tmp_path / "nope"))
    assert (rc, missing["reason"]["code"]) == (1, "INVALID_INPUT")
    rc, bad_scope = _cairn(home, gw_env, "import", "--from", "memory-gateway", str(tmp_path), "--scope", "Nope")
    assert (rc, bad_scope["reason"]["code"]) == (1, "INVALID_SCOPE")
