"""``cairn import --from lorekit DIR``: LoreKit's local Markdown store (either tier) into Cairn,
every field LoreKit keeps carried over, idempotent, what Cairn cannot hold named and skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store, sqlite_url
from tests.conftest import run_cli

ENV = {"CAIRN_NO_DAEMON": "1", "CAIRN_EMBED_MODEL": "hash-test-64"}
FIELDS = [
    "scope",
    "key",
    "tags",
    "source_agent",
    "trigger",
    "created",
    "updated",
    "archived_at",
    "origin_repo",
    "origin_branch",
    "origin_commit",
    "origin_pr",
    "expires_at",
    "seen_count",
]  # fmt: skip  (LoreKit's front matter columns, in its order)


def put(tier: Path, rel: str, value: str, **meta: Any) -> None:
    """A memory file as LoreKit's local store writes it: JSON scalars in front matter, then the value."""
    path = tier / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    fm = "\n".join(f"{k}: {json.dumps(meta.get(k))}" for k in FIELDS)
    path.write_text(f"---\n{fm}\n---\n{value}\n", encoding="utf-8")


def lessons(home: Path) -> dict[tuple[str, str], dict[str, Any]]:
    store = Store(sqlite_url(home))
    try:
        svc = Cairn(store, Settings())
        lines = [json.loads(x) for x in svc.export(local_principal())]
    finally:
        store.dispose()
    return {(r["scope"], r["key"]): r for r in lines if r["type"] == "lesson"}


def test_both_tiers_import_losslessly_and_idempotently(cairn_home: Path, tmp_path: Path) -> None:
    home_tier = tmp_path / "dot-lorekit"
    put(home_tier, "global/run-linter.md", "always run the linter before committing", scope="global",
        key="run-linter", tags=["ci", "loop::claude-lessons"], source_agent="claude", trigger="lint failed",
        created="2026-03-01T10:00:00.000Z", updated="2026-04-02T11:30:00.000Z", seen_count=4,
        origin_repo="acme/widget", origin_branch="main", origin_commit="abcdef1", origin_pr=12)  # fmt: skip
    put(home_tier, "repo/acme/widget/old-flag.md", "the --legacy flag is gone", scope="repo::acme/widget",
        key="old-flag", tags=[], created="2026-01-01T00:00:00Z", updated="2026-01-02T00:00:00Z",
        archived_at="2026-02-01T00:00:00Z", seen_count=1)  # fmt: skip
    put(home_tier, "branch/acme/widget/feat/x/expiring.md", "the feature flag expires soon",
        scope="branch::acme/widget::feat/x", key="Expiring Note", tags=["Has Space"],
        created="2026-01-01T00:00:00Z", updated="2026-01-01T00:00:00Z", expires_at="2099-01-01T00:00:00Z")  # fmt: skip
    put(home_tier, "_other/bad.md", "unreadable scope", scope="team:core", key="k")
    (home_tier / "config.json").write_text("{}")
    repo = tmp_path / "repo"
    put(repo / ".lorekit", "project/widget/setup.md", "run make setup first", scope="project::widget", key="setup",
        created="2026-05-01T00:00:00Z", updated="2026-05-01T00:00:00Z", seen_count=2)  # fmt: skip

    r = run_cli(cairn_home, "--json", "import", "--from", "lorekit", str(home_tier), "--no-embed", env=ENV)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)["data"]
    assert (data["created"], data["files"], data["skipped"]) == (3, 4, 1)
    assert "team:core" in data["notes"][0] and "_other/bad.md" in data["notes"][0]
    r = run_cli(cairn_home, "--json", "import", "--from", "lorekit", str(repo), "--no-embed", env=ENV)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["data"]["created"] == 1

    got = lessons(cairn_home)
    lint = got[("global", "run-linter")]
    v = lint["versions"][-1]
    assert v["value"] == "always run the linter before committing"
    assert (
        v["tags"] == ["ci", "loop::claude-lessons"] and v["source_agent"] == "claude" and v["trigger"] == "lint failed"
    )
    assert v["seen_count"] == 4 and v["trust"] == "candidate"
    assert lint["created_at"].startswith("2026-03-01T10:00:00") and v["recorded_at"].startswith("2026-04-02T11:30:00")
    claims = lint["claimed"]["lorekit"]
    assert claims["origin_repo"] == "acme/widget" and claims["origin_pr"] == 12 and claims["origin_commit"] == "abcdef1"
    assert claims["origin_branch"] == "main" and claims["file"] == "global/run-linter.md"
    old = got[("repo::acme/widget", "old-flag")]
    assert old["archived_at"].startswith("2026-02-01") and old["versions"][-1]["archived"] is True
    exp = got[("branch::acme/widget::feat/x", "expiring-note")]
    assert exp["versions"][-1]["expires_at"].startswith("2099-01-01")
    assert exp["claimed"]["lorekit"]["key"] == "Expiring Note" and exp["claimed"]["lorekit"]["tags"] == ["Has Space"]
    assert got[("project::widget", "setup")]["versions"][-1]["seen_count"] == 2

    again = run_cli(cairn_home, "--json", "import", "--from", "lorekit", str(home_tier), "--no-embed", env=ENV)
    d = json.loads(again.stdout)["data"]
    assert (d["created"], d["updated"], d["unchanged"], d["refused"]) == (0, 0, 3, [])
    assert lessons(cairn_home) == got


def test_nothing_to_import_is_refused(cairn_home: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_cli(cairn_home, "--json", "import", "--from", "lorekit", str(empty), env=ENV)
    assert r.returncode != 0 and json.loads(r.stdout)["reason"]["code"] == "INVALID_INPUT"
    r = run_cli(cairn_home, "--json", "import", "--from", "lorekit", str(tmp_path / "absent"), env=ENV)
    assert r.returncode != 0 and json.loads(r.stdout)["reason"]["code"] == "INVALID_INPUT"
    r = run_cli(cairn_home, "--json", "import", "--from", "lorekit", str(empty), "--scope", "global", env=ENV)
    assert r.returncode != 0 and "--scope" in json.loads(r.stdout)["reason"]["message"]
