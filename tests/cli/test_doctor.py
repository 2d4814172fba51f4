"""``cairn doctor`` on real homes: a fresh one, a sound store, and each kind of damage it must name.

Held to: healthy is exit 0 with an ok envelope; any problem is exit 1, ``UNHEALTHY``, with the whole
report in the reason's data and a ``fix`` for every finding that is not ok; doctor never creates the
store it checks; each check names what it saw (a damaged file, a schema from the future, a socket
directory others can enter, a hook pointing at a missing executable, two installs, a checkout without
a remote).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import inprocess
from tests.cli.conftest import envelope
from tests.cli.test_postgres_cli import pg_url  # noqa: F401 - the fixture: a fresh migrated Postgres database
from tests.conftest import run_cli
from tests.hosts.conftest import VENV_BIN, make_runner

ENV = {"CAIRN_EMBED_MODEL": "hash-test-64", "CAIRN_NO_DAEMON": "1"}
PATH = {"PATH": str(VENV_BIN) + os.pathsep + os.environ.get("PATH", "")}  # the hooks' cairn is found


def doctor(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], int]:
    proc = run_cli(home, "--json", "doctor", *args, env={**ENV, **(env or {})})
    env_ = envelope(proc)
    report = env_["data"] if env_["status"] == "ok" else env_["reason"]["data"]
    if env_["status"] != "ok":
        assert env_["reason"]["code"] == "UNHEALTHY", env_
    for check in report["checks"]:
        assert check["level"] in ("ok", "info", "warn", "problem")
        assert check["level"] == "ok" or check.get("fix") or check["name"] == "git", check
    return report, proc.returncode


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["checks"]}


def test_a_fresh_home_is_healthy_and_doctor_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    report, code = doctor(home)
    assert code == 0 and report["healthy"] and report["problems"] == []
    checks = by_name(report)
    assert set(checks) >= {"store", "daemon", "model", "hooks", "git"}
    assert checks["store"]["level"] == "info" and "no store yet" in checks["store"]["detail"]
    assert not (home / "cairn.db").exists()


def test_a_sound_store_and_its_schema(cairn_home: Path) -> None:
    assert run_cli(cairn_home, "write", "global", "k", "A lesson to open the store with.", env=ENV).returncode == 0
    checks = by_name(doctor(cairn_home)[0])
    assert checks["store"]["level"] == "ok" and "integrity quick check ok" in checks["store"]["detail"]
    assert checks["schema"]["level"] == "ok"
    assert checks["model"]["data"]["model"] == "hash-test-64"
    human = run_cli(cairn_home, "doctor", env=ENV)
    assert human.returncode == 0 and human.stdout.rstrip().endswith("healthy")


def test_a_damaged_store_is_a_problem_with_a_fix(cairn_home: Path) -> None:
    (cairn_home / "cairn.db").write_bytes(b"this is not a database" * 100)
    report, code = doctor(cairn_home)
    assert code == 1 and report["problems"] == ["store"]
    human = run_cli(cairn_home, "doctor", env=ENV)
    assert human.returncode == 1 and "problem  store" in human.stdout and "fix: " in human.stdout
    assert human.stderr.startswith("cairn: UNHEALTHY: 1 problem(s): store")
    assert "Traceback" not in human.stderr


def test_schema_behind_on_sqlite_is_fixed_by_itself_and_from_the_future_is_a_problem(cairn_home: Path) -> None:
    assert run_cli(cairn_home, "write", "global", "k", "A lesson to open the store with.", env=ENV).returncode == 0
    with sqlite3.connect(cairn_home / "cairn.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    report, code = doctor(cairn_home)
    assert code == 1 and by_name(report)["schema"]["level"] == "problem"
    assert "newer than this Cairn" in by_name(report)["schema"]["detail"]
    with sqlite3.connect(cairn_home / "cairn.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    report, code = doctor(cairn_home)
    schema = by_name(report)["schema"]
    assert code == 0 and schema["level"] == "info" and "cairn db upgrade" in schema["fix"]


def test_a_home_others_can_enter(cairn_home: Path) -> None:
    """Without a daemon it is a warning (serve tightens it first); under a running daemon, a problem."""
    from tests.daemon.test_daemon import start_daemon, stop_daemon

    os.chmod(cairn_home, 0o755)
    report, code = doctor(cairn_home)
    daemon = by_name(report)["daemon"]
    assert code == 0 and daemon["level"] == "warn" and daemon["fix"] == f"chmod 700 {cairn_home}"
    proc = start_daemon(cairn_home)
    try:
        report, code = doctor(cairn_home)
        assert code == 0 and by_name(report)["daemon"]["level"] == "ok"  # serve tightened the home
        os.chmod(cairn_home, 0o755)
        report, code = doctor(cairn_home)
        daemon = by_name(report)["daemon"]
        assert code == 1 and daemon["level"] == "problem" and daemon["fix"] == f"chmod 700 {cairn_home}"
    finally:
        stop_daemon(proc)


def test_an_unknown_embedding_model_is_a_problem(cairn_home: Path) -> None:
    report, code = doctor(cairn_home, env={"CAIRN_EMBED_MODEL": "no-such-model"})
    assert code == 1 and by_name(report)["model"]["level"] == "problem"


def test_hooks_installed_twice_or_pointing_nowhere(tmp_path: Path) -> None:
    r = make_runner(tmp_path)
    env = {**ENV, **PATH}
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    first = r("--json", "doctor", env=env, cwd=repo)
    none = json.loads(first.stdout)["data"]
    assert none is not None, first.stdout
    assert by_name(none)["hooks"]["level"] == "info"

    assert r("install", "claude-code", cwd=repo, env=PATH).returncode == 0
    one = json.loads(r("--json", "doctor", env=env, cwd=repo).stdout)["data"]
    hooks = by_name(one)["hooks"]
    assert hooks["level"] == "ok" and [e["scope"] for e in hooks["data"]["installed"]] == ["user"]

    assert r("install", "claude-code", "--project", cwd=repo, env=PATH).returncode == 0
    two = json.loads(r("--json", "doctor", env=env, cwd=repo).stdout)["data"]
    hooks = by_name(two)["hooks"]
    assert hooks["level"] == "warn" and "from 2 files" in hooks["detail"] and "--uninstall" in hooks["fix"]

    settings = repo / ".claude" / "settings.json"
    doc = json.loads(settings.read_text())
    for groups in doc["hooks"].values():
        for group in groups:
            for hook in group["hooks"]:
                hook["command"] = "/nonexistent/bin/cairn " + hook["command"].split(" ", 1)[1]
    settings.write_text(json.dumps(doc))
    proc = r("--json", "doctor", env=env, cwd=repo)
    assert proc.returncode == 1
    broken = json.loads(proc.stdout)["reason"]["data"]
    hooks = by_name(broken)["hooks"]
    assert hooks["level"] == "problem" and "/nonexistent/bin/cairn" in hooks["detail"]
    assert "cairn install claude-code --project" in hooks["fix"]


@pytest.mark.parametrize("remote", [None, "git@github.com:Acme/Widget.git"])
def test_git_detection_says_how(tmp_path: Path, remote: str | None) -> None:
    repo = tmp_path / "Widget"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    if remote:
        subprocess.run(["git", "remote", "add", "origin", remote], cwd=repo, check=True)
    proc = inprocess.run(["--json", "doctor"], cwd=repo, env={**ENV, "CAIRN_HOME": str(tmp_path / "home")})
    git = by_name(json.loads(proc.stdout)["data"])["git"]
    if remote:
        assert git["level"] == "ok" and git["data"]["repo"] == "acme/widget" and git["data"]["how"] == "origin"
    else:
        assert git["level"] == "info" and git["data"]["repo"] == "local/widget" and "no git remote" in git["detail"]
        assert git["data"]["ladder"][0] == "branch::local/widget::main"


def test_postgres_schema_behind_is_a_problem_the_owner_fixes(cairn_home: Path, pg_url: str) -> None:  # noqa: F811
    import psycopg

    report, code = doctor(cairn_home, "--db", pg_url)
    checks = by_name(report)
    assert code == 0 and checks["store"]["level"] == "ok" and checks["store"]["data"]["dialect"] == "postgresql"
    assert checks["schema"]["level"] == "ok"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    report, code = doctor(cairn_home, "--db", pg_url)
    schema = by_name(report)["schema"]
    assert code == 1 and report["problems"] == ["schema"]
    assert schema["level"] == "problem" and schema["fix"].startswith("cairn db upgrade")
