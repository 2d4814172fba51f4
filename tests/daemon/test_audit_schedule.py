"""`cairn serve` runs the full audit verify on its schedule and reports a broken state loudly, naming
the row but never the lesson's text."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3

from tests.conftest import run_cli_process
from tests.daemon.test_daemon import PING, _env, ask_daemon

SECRET = "hunter2-database-password"


def serve_until(home: Path, needle: str, log: Path) -> str:
    """Start the daemon with its log in a file, wait for ``needle`` in it, stop it; returns the log."""
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "serve", "--no-http", "--no-warm"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            env=_env(),
            cwd=home,
        )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and needle not in log.read_text():
            assert proc.poll() is None, log.read_text()
            time.sleep(0.2)
        assert ask_daemon(home, PING) is not None  # still serving after the report
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    return log.read_text()


def test_the_scheduled_verify_reports_a_direct_edit_without_its_content(cairn_home: Path, tmp_path: Path) -> None:
    wrote = run_cli_process(cairn_home, "write", "global", "db-password", "Rotate the database password.")
    assert wrote.returncode == 0
    assert run_cli_process(cairn_home, "write", "global", "other", "Another lesson.").returncode == 0
    clean = serve_until(cairn_home, "audit verified", tmp_path / "clean.log")
    assert "audit verified: 2 ledger row(s), 2 lesson(s)" in clean

    with sqlite3.connect(cairn_home / "cairn.db") as db:
        db.execute("UPDATE lessons SET value = ? WHERE key = 'db-password'", (SECRET,))
    text = serve_until(cairn_home, "AUDIT BROKEN", tmp_path / "broken.log")
    line = next(x for x in text.splitlines() if "AUDIT BROKEN" in x)
    assert "lessons id" in line and "global db-password" in line
    assert SECRET not in text and "Rotate the database" not in text
