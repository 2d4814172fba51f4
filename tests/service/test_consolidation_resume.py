"""kill -9 during a consolidation apply, then ``cairn consolidate --resume``: every action applied exactly
once, and the store ends where an uninterrupted run leaves it (both databases).

Two identical stores get the same plan. One is applied in this process, uninterrupted. The other is
applied by a real ``cairn consolidate apply RUN`` process that is SIGKILLed as soon as it has
committed more actions than at its start (the watcher reads the ledger through its own connection),
restarted with ``--resume`` and killed again, a few times, then resumed to the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from cairn.core.lesson import STATE_FIELDS
from cairn.core.principal import Principal
from cairn.core.timeparse import FAKE_NOW_ENV
from cairn.runtime.local import local_principal
from cairn.runtime.settings import Settings
from cairn.service.api import Cairn
from cairn.store.engine import Store
from cairn.store.schema import consolidation_actions, lesson_versions, lessons
from tests.conftest import ROOT, new_store_url

STALE = 120  # one-off candidates: an archive-stale action each
TWINS = 6  # the same text in two branches of one repository: a promotion each
KILLS = 4
THEN, NOW = "2025-01-01T00:00:00Z", "2025-06-01T00:00:00Z"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")  # fast; the plan needs no paraphrase here


def _fill(url: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Cairn, Principal, int]:
    store = Store(url)
    store.ensure_schema()
    svc = Cairn(store, Settings())
    p = local_principal(actor="agent-a")
    svc.ensure_tenant(p)
    monkeypatch.setenv(FAKE_NOW_ENV, THEN)
    for i in range(STALE):
        # One scope each: stale candidates are archived one action per scope.
        svc.write(p, f"repo::acme/r{i}", f"note-{i}", f"One-off note number {i} about step {i * 7}")
    for i in range(TWINS):
        for branch in ("feat-a", "feat-b"):
            svc.write(p, f"branch::acme/api::{branch}", f"rule-{i}", f"Rule {i}: always rebuild the cache {i} times")
    monkeypatch.setenv(FAKE_NOW_ENV, NOW)
    run = svc.consolidate_plan(p)["run"]["id"]
    return svc, p, run


def _applied(store: Store, p: Principal, run: int) -> int:
    def count(conn: Any) -> int:
        return conn.execute(
            select(func.count()).where(
                consolidation_actions.c.run_id == run, consolidation_actions.c.status != "planned"
            )
        ).scalar_one()

    return store.run(count, write=False, **p.db_vars)


def _final(svc: Cairn, p: Principal) -> dict[str, Any]:
    def read(conn: Any) -> dict[str, Any]:
        rows = {
            (r["scope"], r["key"]): {k: r[k] for k in STATE_FIELDS if k not in ("archived_at", "superseded_by")}
            | {"archived": r["archived_at"] is not None, "superseded": r["superseded_by"] is not None}
            for r in conn.execute(select(lessons)).mappings()
        }
        versions = Counter(
            (s, k, a)
            for s, k, a in conn.execute(
                select(lesson_versions.c.scope, lesson_versions.c.key, lesson_versions.c.action)
            )
        )
        statuses = sorted(
            conn.execute(
                select(consolidation_actions.c.position, consolidation_actions.c.kind, consolidation_actions.c.status)
            ).all()
        )
        return {"lessons": rows, "versions": versions, "actions": statuses}

    return svc.store.run(read, write=False, **p.db_vars)


def _cairn(url: str, home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CAIRN_HOME": str(home), "CAIRN_NO_DAEMON": "1", FAKE_NOW_ENV: NOW,
           "CAIRN_ACTOR": "agent-a", "PYTHONPATH": str(ROOT / "src")}  # fmt: skip
    env.pop("CAIRN_SESSION", None)
    return subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--db", url, "--json", "consolidate", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def test_kill_9_during_apply_then_resume_applies_each_action_once(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calm_svc, calm_p, calm_run = _fill(new_store_url(request, backend, tmp_path / "calm"), monkeypatch)
    url = new_store_url(request, backend, tmp_path / "killed")
    svc, p, run = _fill(url, monkeypatch)
    calm_svc.consolidate_apply(calm_p, calm_run)
    expected = _final(calm_svc, calm_p)
    total = len(expected["actions"])
    assert Counter(s for _, _, s in expected["actions"]) == {"applied": total}
    assert {k for _, k, _ in expected["actions"]} >= {"archive-stale", "promote"} and total > 50

    home = tmp_path / "home"
    home.mkdir()
    interrupted = 0
    args: tuple[str, ...] = ("apply", str(run))
    for _ in range(KILLS):
        start = _applied(svc.store, p, run)
        if start == total:
            break
        proc = _cairn(url, home, *args)
        while proc.poll() is None and _applied(svc.store, p, run) <= start:
            time.sleep(0.002)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            interrupted += _applied(svc.store, p, run) < total
        proc.wait(timeout=60)
        args = ("--resume",)
    assert interrupted >= 1  # at least one kill landed before the last action
    done = _cairn(url, home, "--resume")
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert _final(svc, p) == expected
    assert svc.consolidate_show(p, run)["run"]["status"] == "finished"
    svc.audit_verify(p)
