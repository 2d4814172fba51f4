"""How many threads numpy's BLAS starts in a one-command process.

numpy's bundled OpenBLAS starts a pool of worker threads when numpy is imported, one per core, and
they spin while they wait for work: in a process that runs one command and exits (a hook's session
start) that start-up costs more CPU than the ranking's few small products it could speed up
(bench/README.md, cold start). Such a process asks for one thread, through the variable OpenBLAS
reads at load, unless the user set it. The daemon and ``cairn mcp`` keep the default pool (they
serve searches over the whole index), so a daemon started on demand does not inherit what was set
here.
"""

from __future__ import annotations

import os

BLAS_THREADS = "OPENBLAS_NUM_THREADS"
_set_here: list[str] = []  # the variable, once this process set it (not the user)


def one_blas_thread() -> None:
    """Before numpy loads: one BLAS thread, unless the user chose a number."""
    if BLAS_THREADS not in os.environ:
        os.environ[BLAS_THREADS] = "1"
        _set_here.append(BLAS_THREADS)


def daemon_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a daemon this process starts: without the thread count this process chose for itself."""
    return {k: v for k, v in env.items() if k not in _set_here}
