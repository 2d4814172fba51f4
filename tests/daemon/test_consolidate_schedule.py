"""`cairn serve` plans a consolidation on its schedule: by default the plan waits for a person (no
lesson changes); with ``auto_apply`` it is applied. The log counts actions and never shows text."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli_process
from tests.daemon.test_audit_schedule import serve_until

TEXT = "Pin pytest to 8.x because the plugin breaks on pytest 9"


def _store(home: Path) -> None:
    for key, value in (("a", TEXT), ("b", TEXT.replace("because", "since"))):
        assert run_cli_process(home, "write", "repo::acme/api", key, value).returncode == 0


def _runs(home: Path) -> list[dict]:
    out = run_cli_process(home, "--json", "consolidate", "runs", env={"CAIRN_NO_DAEMON": "1"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["data"]["runs"]


def test_the_daemon_plans_and_a_person_applies(cairn_home: Path, tmp_path: Path) -> None:
    _store(cairn_home)
    log = serve_until(cairn_home, "consolidation run 1", tmp_path / "plan.log")
    assert "consolidation run 1 (planned): 1 planned" in log and TEXT not in log
    (run,) = _runs(cairn_home)
    assert (run["mode"], run["status"], run["actor"]) == ("plan", "planned", "cairn-serve")
    listed = run_cli_process(cairn_home, "--json", "list", "repo::acme/api", env={"CAIRN_NO_DAEMON": "1"})
    assert len(json.loads(listed.stdout)["data"]["lessons"]) == 2  # nothing applied without a person
    # A restart within the interval plans nothing more: the ledger, not the process, keeps the time.
    serve_until(cairn_home, "audit verified", tmp_path / "again.log")
    assert len(_runs(cairn_home)) == 1


def test_auto_apply_applies_the_scheduled_plan(cairn_home: Path, tmp_path: Path) -> None:
    _store(cairn_home)
    (cairn_home / "config.toml").write_text('[consolidate]\nschedule = "hourly"\nauto_apply = 1\n')
    log = serve_until(cairn_home, "consolidation run 1", tmp_path / "apply.log")
    assert "consolidation run 1 (finished): 1 applied" in log
    assert _runs(cairn_home)[0]["mode"] == "apply"


def test_a_schedule_of_off_plans_nothing_and_a_bad_one_is_refused(cairn_home: Path, tmp_path: Path) -> None:
    _store(cairn_home)
    (cairn_home / "config.toml").write_text('[consolidate]\nschedule = "off"\n')
    serve_until(cairn_home, "audit verified", tmp_path / "off.log")
    assert _runs(cairn_home) == []
    (cairn_home / "config.toml").write_text('[consolidate]\nschedule = "sometimes"\n')
    bad = run_cli_process(cairn_home, "consolidate", "runs", env={"CAIRN_NO_DAEMON": "1"})
    assert bad.returncode == 2 and "consolidate.schedule" in bad.stderr and "sometimes" in bad.stderr
