"""One BLAS thread for a one-command process, the user's choice kept, and none of it passed to a daemon."""

from __future__ import annotations

import pytest

from cairn.runtime import threads


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv(threads.BLAS_THREADS, raising=False)
    monkeypatch.setattr(threads, "_set_here", [])
    return monkeypatch


def test_one_thread_for_a_one_command_process_and_not_for_its_daemon(
    fresh: pytest.MonkeyPatch,
) -> None:
    import os

    threads.one_blas_thread()
    assert os.environ[threads.BLAS_THREADS] == "1"
    env = threads.daemon_env({**os.environ, "CAIRN_HOME": "/h"})
    assert threads.BLAS_THREADS not in env and env["CAIRN_HOME"] == "/h"


def test_the_users_thread_count_is_kept_and_passed_on(fresh: pytest.MonkeyPatch) -> None:
    import os

    fresh.setenv(threads.BLAS_THREADS, "4")
    threads.one_blas_thread()
    assert os.environ[threads.BLAS_THREADS] == "4"
    assert threads.daemon_env(dict(os.environ))[threads.BLAS_THREADS] == "4"
