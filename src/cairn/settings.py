"""Settings the service needs, with their defaults and where each value came from.

Read from ``$CAIRN_HOME/config.toml`` and ``CAIRN_*`` environment variables (the environment wins).
Surfaces load settings once and hand them to the service; the service never reads files.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.errors import CairnError


@dataclass(frozen=True)
class Settings:
    promotion_threshold: int = 3  # distinct sessions before a recurring candidate is verified
    archive_retention_days: int = 30
    sources: dict[str, str] = field(default_factory=dict)


def default_home() -> Path:
    return Path(os.environ.get("CAIRN_HOME") or Path.home() / ".cairn").expanduser()


def load(home: Path) -> Settings:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    path = home / "config.toml"
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise CairnError("SETUP", f"{path} is not valid TOML: {exc}") from exc
        trust = data.get("trust", {})
        if "promotion_threshold" in trust:
            values["promotion_threshold"] = trust["promotion_threshold"]
            sources["promotion_threshold"] = str(path)
        purge = data.get("purge", {})
        if "archive_retention_days" in purge:
            values["archive_retention_days"] = purge["archive_retention_days"]
            sources["archive_retention_days"] = str(path)
    for name, env in (
        ("promotion_threshold", "CAIRN_PROMOTION_THRESHOLD"),
        ("archive_retention_days", "CAIRN_ARCHIVE_RETENTION_DAYS"),
    ):
        if os.environ.get(env):
            values[name] = os.environ[env]
            sources[name] = f"${env}"
    for name, raw in list(values.items()):
        try:
            number = int(raw)
        except (TypeError, ValueError):
            raise CairnError("SETUP", f"{name} must be a whole number, got {raw!r} ({sources[name]})") from None
        if number < 1:
            raise CairnError("SETUP", f"{name} must be at least 1, got {number} ({sources[name]})")
        values[name] = number
    return Settings(**values, sources=sources)
