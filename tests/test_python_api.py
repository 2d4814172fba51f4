"""The Python API (``import cairn``; docs/python-api.md): a real store in a temporary home, on both
databases, the same lessons the ``cairn`` command sees, the same refusals with the same codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cairn
from tests.conftest import run_cli

REPO = "repo::acme/widget"
HEAVY = ("sqlalchemy", "numpy", "onnxruntime", "typer", "alembic", "tokenizers", "cairn.service", "cairn.store")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The tiny deterministic embedder; nothing from the caller's environment chooses the store or the account."""
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")
    for name in ("CAIRN_TOKEN", "CAIRN_DATABASE_URL", "CAIRN_SESSION", "CAIRN_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))


def _modules_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(sorted(m for m in sys.modules if m.startswith({HEAVY!r})))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.replace("'", '"'))


def test_import_cairn_loads_nothing_heavy() -> None:
    """The CLI and the hooks import the package first: the API must cost them nothing."""
    assert _modules_after("import cairn") == []
    # Naming the API loads its module, still not the database or the model: that happens on open().
    assert _modules_after("import cairn; cairn.open; cairn.Memory; cairn.CairnError") == []
    assert "sqlalchemy" in _modules_after("import cairn, tempfile; cairn.open(tempfile.mkdtemp()).close()")


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'opn'"):
        cairn.opn  # noqa: B018
    assert {"open", "Memory", "CairnError", "__version__"} <= set(dir(cairn))
    assert cairn.__version__.count(".") == 2


def test_write_read_list_search_context_history_forget(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with cairn.open(home=home) as memory:
        created = memory.write(REPO, "docker-cache", "Rebuild with --no-cache after lockfile changes", tags=["docker"])
        assert created["action"] == "created"
        assert (home / "cairn.db").is_file()
        lesson = memory.read(REPO, "docker-cache")["lesson"]
        assert (lesson["value"], lesson["tags"], lesson["trust"]) == (
            "Rebuild with --no-cache after lockfile changes",
            ["docker"],
            "candidate",
        )
        memory.write("global", "typecheck-first", "Run the typecheck before you claim a change is done.")
        assert [x["key"] for x in memory.list(REPO)["lessons"]] == ["docker-cache"]
        assert [x["key"] for x in memory.list(tag="docker")["lessons"]] == ["docker-cache"]

        found = memory.search("docker cache lockfile", repo="acme/widget")
        assert found["results"][0]["key"] == "docker-cache"

        block = memory.context(repo="acme/widget", branch="main")
        assert block["loaded"] == 2 and "docker-cache" in block["text"] and "typecheck-first" in block["text"]
        assert block["ladder"][-1] == "global" and "repo::acme/widget" in block["ladder"]

        memory.write(REPO, "docker-cache", "Rebuild with --no-cache after any lockfile change")
        assert [v["version"] for v in memory.history(REPO, "docker-cache")["versions"]] == [1, 2]

        memory.forget("global", "typecheck-first", "too generic")
        with pytest.raises(cairn.CairnError) as gone:
            memory.read("global", "typecheck-first")
        assert gone.value.code == "NOT_FOUND"
        # A rejection is remembered: the same content is refused under another key.
        with pytest.raises(cairn.CairnError) as again:
            memory.write("global", "typecheck", "Run the typecheck before you claim a change is done.")
        assert again.value.code == "TOMBSTONED"


def test_the_cli_and_the_api_share_one_store(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with cairn.open(home=home) as memory:
        memory.write(REPO, "from-python", "Written through the Python API.")
    env = {"CAIRN_EMBED_MODEL": "hash-test-64"}
    shown = json.loads(run_cli(home, "--json", "read", REPO, "from-python", env=env).stdout)
    assert shown["data"]["lesson"]["value"] == "Written through the Python API."
    run_cli(home, "write", REPO, "from-cli", "Written through the command line.", env=env)
    with cairn.open(home=home) as memory:
        assert {x["key"] for x in memory.list(REPO)["lessons"]} == {"from-python", "from-cli"}


def test_context_reads_the_checkout_of_cwd(tmp_path: Path) -> None:
    """``cwd`` fills in repo, branch and project from git, and its ``.cairn.toml`` applies."""
    checkout = tmp_path / "widget"
    checkout.mkdir()
    git = ["git", "-C", str(checkout), "-c", "init.defaultBranch=feat/docker"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "remote", "add", "origin", "git@github.com:acme/widget.git"], check=True)
    (checkout / ".cairn.toml").write_text("[context]\nmax_chars = 300\n", encoding="utf-8")
    with cairn.open(home=tmp_path / "home") as memory:
        memory.write(REPO, "docker-cache", "Rebuild with --no-cache after lockfile changes")
        block = memory.context(cwd=checkout)
        assert block["ladder"][:2] == ["branch::acme/widget::feat/docker", "repo::acme/widget"]
        assert block["budget"] == 300 and "docker-cache" in block["text"]
        # Outside any checkout only the global rung is left: the repository's lesson is not offered.
        elsewhere = memory.context(cwd=tmp_path)
        assert elsewhere["ladder"] == ["global"] and elsewhere["loaded"] == 0


def test_refusals_raise_cairn_error_with_the_stable_code_and_store_nothing(tmp_path: Path) -> None:
    with cairn.open(home=tmp_path / "home") as memory:
        with pytest.raises(cairn.CairnError) as bad_scope:
            memory.write("repo:acme/widget", "k", "a lesson")
        assert bad_scope.value.code == "INVALID_SCOPE"
        assert "repo::acme/widget" in bad_scope.value.message  # the corrected form
        with pytest.raises(cairn.CairnError) as empty:
            memory.search("   ")
        assert empty.value.code == "INVALID_INPUT"
        with pytest.raises(cairn.CairnError) as missing:
            memory.read(REPO, "nothing-here")
        assert missing.value.code == "NOT_FOUND"
        assert memory.list()["lessons"] == []


def test_write_many_writes_each_item_and_refuses_forgotten_content_in_its_place(tmp_path: Path) -> None:
    with cairn.open(home=tmp_path / "home") as memory:
        memory.write(REPO, "secret", "The deploy key is in the wiki.")
        memory.forget(REPO, "secret", "a secret")
        out = memory.write_many(
            [
                {"scope": REPO, "key": "a", "value": "Lesson a.", "tags": ["ci"]},
                {"scope": REPO, "key": "b", "value": "the deploy key is in the WIKI"},
                {"scope": REPO, "key": "a", "value": "Lesson a."},
            ]
        )
        assert [r["action"] for r in out["results"]] == ["created", "refused", "recurred"]
        assert out["results"][1]["code"] == "TOMBSTONED"
        assert [lesson["key"] for lesson in memory.list(REPO)["lessons"]] == ["a"]
        assert memory.read(REPO, "a")["lesson"]["tags"] == ["ci"]


def test_a_token_acts_as_its_account_and_a_bad_token_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with cairn.open(home=home) as operator:
        alice = operator.service.create_user(operator.principal, "alice")
        operator.write("global", "operator-note", "Written by the operator.")
    with cairn.open(home=home, token=alice["token"]) as memory:
        assert memory.principal.tenant_id == "alice"
        memory.write("global", "alice-note", "Written by alice.")
        assert [x["key"] for x in memory.list("global")["lessons"]] == ["alice-note"]  # not the operator's
    with pytest.raises(cairn.CairnError) as refused:
        cairn.open(home=home, token="cairn_not-a-real-token")
    assert refused.value.code == "UNAUTHENTICATED"


def test_session_and_human_are_carried_into_writes(tmp_path: Path) -> None:
    with cairn.open(home=tmp_path / "home", human=True, session="s-1") as memory:
        lesson = memory.write(REPO, "by-a-person", "A person wrote this.")["lesson"]
        assert (lesson["trust"], lesson["origin"]) == ("verified", "human")
        assert memory.principal.session == "s-1"
        assert "s-1" not in repr(memory) and "home" in repr(memory)


def test_both_databases(store_url: str, tmp_path: Path) -> None:
    """``db=`` opens any database Cairn supports; the same calls answer the same on both."""
    with cairn.open(home=tmp_path / "home", db=store_url) as memory:
        memory.write(REPO, "docker-cache", "Rebuild with --no-cache after lockfile changes")
        assert memory.read(REPO, "docker-cache")["lesson"]["version"] == 1
        assert memory.search("lockfile", repo="acme/widget")["results"][0]["key"] == "docker-cache"
        assert memory.context(repo="acme/widget")["loaded"] == 1
    if store_url.startswith("sqlite"):
        assert not (tmp_path / "home" / "cairn.db").exists()  # db= wins over the home's file


def test_the_environment_chooses_home_and_database_as_for_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "env-home"))
    with cairn.open() as memory:
        memory.write("global", "k", "Stored in the home the environment names.")
        assert memory.home == tmp_path / "env-home"
    assert (tmp_path / "env-home" / "cairn.db").is_file()
    assert not (Path(os.environ["HOME"]) / ".cairn").exists()
