"""`cairn consolidate` end to end through the real entry point: every proposed action printed with its
reason, the JSON envelope, a stored plan applied by run id, runs/show/undo, and stable refusals."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli

API = "repo::acme/api"
OLD, NOW = {"CAIRN_FAKE_NOW": "2025-01-01T00:00:00Z"}, {"CAIRN_FAKE_NOW": "2025-06-01T00:00:00Z"}


@pytest.fixture(autouse=True)
def _real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAIRN_EMBED_MODEL", raising=False)
    monkeypatch.setenv("CAIRN_NO_DAEMON", "1")


@pytest.fixture
def store(cli: Cli) -> Cli:
    cli.ok("write", API, "pin-pytest", "Pin pytest to 8.x because the plugin breaks on pytest 9", env=OLD)
    cli.ok("write", API, "pytest-pin", "Pin pytest to 8.x since the plugin breaks on pytest 9", env=NOW)
    cli.ok("write", "repo::acme/web", "old-note", "The staging bucket was renamed to assets-old", env=OLD)
    return cli


def test_dry_run_prints_every_action_with_its_reason_and_changes_nothing(store: Cli) -> None:
    out = store("consolidate", "--dry-run", env=NOW)
    assert out.returncode == 0
    text = out.stdout
    assert "dry run: nothing stored" in text
    assert "1. merge" in text and "keeping pytest-pin" in text and "keep repo::acme/api pytest-pin (v1)" in text
    assert "2. archive-stale" in text and "151 days" in text
    assert store.ok("consolidate", "runs", env=NOW)["runs"] == []
    assert store.ok("read", API, "pin-pytest")["lesson"]["status"] == "active"


def test_plan_then_apply_by_run_id_then_undo(store: Cli) -> None:
    planned = store.ok("consolidate", "--plan", env=NOW)
    run = planned["run"]["id"]
    assert [a["kind"] for a in planned["actions"]] == ["merge", "archive-stale"]
    applied = store.ok("consolidate", "apply", str(run), "--action", "1", env=NOW)
    assert [a["status"] for a in applied["actions"]] == ["applied", "planned"]
    shown = store("consolidate", "show", str(run), env=NOW).stdout
    assert "applied" in shown and "pin-pytest (v1 → v2)" in shown
    undone = store.ok("consolidate", "undo", str(run), env=NOW)
    assert undone["reversed"] == 1 and undone["run"]["status"] == "undone"
    # What the undone run still had planned can never apply: it is dropped, saying why.
    assert [(a["status"], a["status_reason"]) for a in undone["actions"]][1] == ("dropped", "the run was undone")
    assert store.ok("read", API, "pin-pytest")["lesson"]["status"] == "active"
    store.refused("CONFLICT", "consolidate", "apply", str(run), env=NOW)
    assert "undone" in store("consolidate", "runs", env=NOW).stdout
    assert store.ok("audit", "verify")["checked"] > 0


def test_undo_names_a_lesson_changed_since_by_its_address(store: Cli) -> None:
    run = str(store.ok("consolidate", "--scope", API, env=NOW)["run"]["id"])
    store.ok("write", API, "pytest-pin", "Pin pytest to 8.x; the plugin is broken on pytest 9 and 10", env=NOW)
    text = store("consolidate", "undo", run, env=NOW).stdout
    assert f"left as it is: {API} pytest-pin (action 1): changed since (version" in text


def test_consolidate_applies_at_once_and_resume_has_nothing_left(store: Cli) -> None:
    data = store.ok("consolidate", "--scope", API, env=NOW)
    assert data["run"]["status"] == "finished" and [a["status"] for a in data["actions"]] == ["applied"]
    assert store.ok("consolidate", "--resume", env=NOW)["run"] is None
    history = store.ok("history", API, "pin-pytest")
    assert [v["action"] for v in history["versions"]] == ["create", "superseded"]
    # The audit trail names the run and action that wrote a row (its reason: consolidate show RUN).
    create, merged = store("audit", "--lesson", API, "pin-pytest").stdout.strip().splitlines()
    assert "consolidation run" not in create
    assert "superseded" in merged and merged.endswith(f"(consolidation run {data['run']['id']}, action 1)")


def test_bad_input_is_refused_with_a_stable_code(store: Cli) -> None:
    assert "repo::acme/api" in store.refused("INVALID_SCOPE", "consolidate", "--scope", "repo:acme/api")["message"]
    store.refused("NOT_FOUND", "consolidate", "show", "99")
    store.refused("NOT_FOUND", "consolidate", "undo", "99")
    store.refused("INVALID_INPUT", "consolidate", "show", "abc")
    store.refused("INVALID_INPUT", "consolidate", "--dry-run", "--resume")
    store.refused("INVALID_INPUT", "consolidate", "--stale-days", "0")
    run = str(store.ok("consolidate", "--plan", env=NOW)["run"]["id"])
    # A plan that applied nothing has nothing to undo: refused, pointing at drop; the run stays open.
    nothing = store.refused("CONFLICT", "consolidate", "undo", run, env=NOW)
    assert "applied nothing" in nothing["message"] and f"cairn consolidate drop {run}" in nothing["message"]
    store.refused("NOT_FOUND", "consolidate", "apply", run, "--action", "9", env=NOW)
    store.ok("consolidate", "drop", run, "--action", "1", env=NOW)
    # A dropped action says so (not "not found"), and applying or dropping it again changes nothing.
    for verb in ("apply", "drop"):
        refused = store.refused("CONFLICT", "consolidate", verb, run, "--action", "1", env=NOW)
        assert "action 1 is dropped (dropped by" in refused["message"]
    assert store.ok("read", API, "pin-pytest")["lesson"]["status"] == "active"
    assert [a["status"] for a in store.ok("consolidate", "show", run, env=NOW)["actions"]] == ["dropped", "planned"]
