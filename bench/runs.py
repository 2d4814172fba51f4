"""What every bench does at its end: print the table beside the previous run, keep the new figures,
and stop the server it started (a server that will not stop is killed, so no bench leaves one)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any


def keep(
    out: Path, result: dict[str, Any], report: Callable[[dict[str, Any], Any], str], say: Callable[[str], None]
) -> None:
    """Print ``report(result, previous)`` and write ``result`` to ``out`` for the next comparison."""
    previous = json.loads(out.read_text()) if out.is_file() else None
    print(report(result, previous))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    say(f"wrote {out}")


def stop(server: subprocess.Popen[Any] | None) -> None:
    if server is None:
        return
    server.terminate()
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
