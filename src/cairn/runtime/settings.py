"""Settings the service needs, with their defaults and where each value came from.

Layers, lowest to highest: built-in defaults → the user's ``$CAIRN_HOME/config.toml`` (``~/.cairn``)
→ the repository's ``.cairn.toml`` (the repo wins: a team tunes its context budget once, for everyone
who clones it) → ``CAIRN_*`` environment variables (a one-off override). Command-line flags such as
``--max-chars`` override all of these for one call. ``cairn config show`` prints every value with
its source, because "why is my budget 1200?" must have a one-command answer.

Every value is validated with its range here, and an unknown key is refused with the nearest known
one: a silently ignored typo (``max_char``) is the kind of config bug nobody finds. Surfaces load
settings once and hand them to the service; the service never reads files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from cairn.core.lesson import MAX_VALUE_BYTES
from cairn.errors import CairnError

REPO_FILE = ".cairn.toml"
# Sections a repository's .cairn.toml may not set: they decide where requests and keys go.
HOME_ONLY = ("gateway", "sync")


@dataclass(frozen=True)
class Spec:
    name: str  # the Settings field
    path: tuple[str, ...]  # where it lives in TOML
    kind: type
    low: float
    high: float
    help: str
    check: Callable[[str], object] | None = None  # text settings: refuses a value outside its grammar

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def env(self) -> str:
        return "CAIRN_" + "_".join(self.path).upper()


def _schedule_check(text: str) -> object:
    from cairn.core.consolidation import schedule_interval

    return schedule_interval(text)


SPECS = (
    Spec("max_chars", ("context", "max_chars"), int, 200, 20000, "character budget of the whole context block"),
    Spec("loop_cap", ("context", "loop_cap"), int, 0, 100, "lessons per loop:: bucket in context (0 drops them)"),
    Spec("half_life_days", ("context", "half_life_days"), float, 0.1, 3650, "recency half-life in days"),
    Spec("weight_recency", ("context", "weights", "recency"), float, 0, 100, "weight of recency in the score"),
    Spec("weight_salience", ("context", "weights", "salience"), float, 0, 100, "weight of recurrence"),
    Spec("weight_relevance", ("context", "weights", "relevance"), float, 0, 100, "weight of branch/task relevance"),
    Spec("weight_outcome", ("context", "weights", "outcome"), float, 0, 100, "weight of the helped ratio"),
    Spec("candidate_factor", ("context", "candidate_factor"), float, 0, 1, "score multiplier of unverified lessons"),
    Spec("promotion_threshold", ("trust", "promotion_threshold"), int, 1, 1000, "sessions before auto-verify"),
    Spec("archive_retention_days", ("purge", "archive_retention_days"), int, 1, 36500, "days archived are kept"),
    Spec("sweep_minutes", ("serve", "sweep_minutes"), int, 1, 10080, "minutes between the daemon's sweeps"),
    Spec("audit_minutes", ("serve", "audit_minutes"), int, 1, 10080, "minutes between the daemon's full audit verify"),
    Spec("auto_start", ("serve", "auto_start"), int, 0, 1, "1: a command that finds no daemon starts one; 0: never"),
    Spec(
        "idle_minutes",
        ("serve", "idle_minutes"),
        float,
        0,
        10080,
        "minutes a daemon started on demand waits without a request before it exits (0: never)",
    ),
    Spec("limit_max_lessons", ("limits", "max_lessons"), int, 0, 10**9, "lessons per tenant (0: no limit)"),
    Spec(
        "limit_max_value_bytes", ("limits", "max_value_bytes"), int, 0, MAX_VALUE_BYTES, "bytes per value (0: 64 KiB)"
    ),
    Spec("limit_writes_per_minute", ("limits", "writes_per_minute"), int, 0, 10**6, "writes a minute (0: none)"),
    # The memory gateway (docs/gateway.md). Text settings: low/high bound their length.
    Spec(
        "gateway_upstream",
        ("gateway", "upstream"),
        str,
        0,
        2000,
        "the provider's base URL the gateway forwards to; when set, cairn serve mounts the gateway too",
    ),
    Spec(
        "gateway_upstream_key_env",
        ("gateway", "upstream_key_env"),
        str,
        0,
        100,
        "name of the environment variable holding the provider key (the key itself is never configured)",
    ),
    Spec("gateway_port", ("gateway", "port"), int, 0, 65535, "cairn gateway's port (0: 8322)"),
    Spec("gateway_extract", ("gateway", "extract"), int, 0, 1, "1: extract candidate lessons after each turn"),
    # Consolidation (docs/consolidation.md): cairn serve plans on this schedule; a person applies.
    Spec(
        "consolidate_schedule",
        ("consolidate", "schedule"),
        str,
        1,
        40,
        "how often cairn serve plans a consolidation: off, hourly, daily, weekly or a duration (12h, 2d)",
        _schedule_check,
    ),
    Spec("consolidate_auto_apply", ("consolidate", "auto_apply"), int, 0, 1, "1: scheduled plans apply at once"),
    Spec(
        "consolidate_stale_days",
        ("consolidate", "stale_days"),
        int,
        1,
        36500,
        "days after which a candidate seen once and never helped is proposed for archiving",
    ),
    # Sync with a team server (docs/sync.md). Text settings: low/high bound their length.
    Spec("sync_url", ("sync", "url"), str, 0, 2000, "the server cairn sync exchanges with (and the daemon, when set)"),
    Spec(
        "sync_interval_minutes",
        ("sync", "interval_minutes"),
        float,
        0,
        10080,
        "minutes between the daemon's background syncs with sync.url (0: never in the background)",
    ),
    Spec(
        "sync_token_env",
        ("sync", "token_env"),
        str,
        0,
        100,
        "name of the environment variable holding the server's token (empty: CAIRN_TOKEN; never the token)",
    ),
)
_BY_PATH = {s.path: s for s in SPECS}
# Environment names kept from before the [context] section existed.
_LEGACY_ENV = {
    "promotion_threshold": "CAIRN_PROMOTION_THRESHOLD",
    "archive_retention_days": "CAIRN_ARCHIVE_RETENTION_DAYS",
}


@dataclass(frozen=True)
class Settings:
    max_chars: int = 3000
    loop_cap: int = 1
    half_life_days: float = 14.0
    weight_recency: float = 1.0
    weight_salience: float = 1.0
    weight_relevance: float = 1.0
    weight_outcome: float = 1.0
    candidate_factor: float = 0.8  # verified above candidate: an unverified lesson's score × this
    promotion_threshold: int = 3  # distinct sessions before a recurring candidate is verified
    archive_retention_days: int = 30
    sweep_minutes: int = 60
    # The full `cairn audit verify` (chain and state) reads every row: daily by default.
    audit_minutes: int = 1440
    auto_start: int = 1  # read by cairn.runtime.forward without this module (same key and env name)
    idle_minutes: float = 30.0
    # Per-tenant limits; 0 means none (the single-user default). A team server sets them in its
    # config.toml, and `cairn limits set` overrides them for one tenant.
    limit_max_lessons: int = 0
    limit_max_value_bytes: int = 0
    limit_writes_per_minute: int = 0
    gateway_upstream: str = ""
    gateway_upstream_key_env: str = ""
    gateway_port: int = 0
    gateway_extract: int = 0
    consolidate_schedule: str = "daily"
    consolidate_auto_apply: int = 0  # 0: scheduled plans wait for a person
    consolidate_stale_days: int = 90
    sync_url: str = ""
    sync_interval_minutes: float = 15.0
    sync_token_env: str = ""
    sources: dict[str, str] = field(default_factory=dict)

    def source(self, name: str) -> str:
        return self.sources.get(name, "default")

    def with_overrides(self, **values: Any) -> Settings:
        """Per-call overrides (command-line flags), validated like every other layer."""
        given = {k: v for k, v in values.items() if v is not None}
        if not given:
            return self
        checked = {}
        sources = dict(self.sources)
        for name, raw in given.items():
            spec = next(s for s in SPECS if s.name == name)
            checked[name] = _coerce(spec, raw, f"--{name.replace('_', '-')}", "INVALID_INPUT")
            sources[name] = "command line"
        return replace(self, **checked, sources=sources)

    def effective(self) -> list[dict[str, Any]]:
        return [
            {
                "key": s.dotted,
                "value": getattr(self, s.name),
                "source": self.source(s.name),
                "env": s.env,
                "help": s.help,
            }
            for s in SPECS
        ]


def _coerce(spec: Spec, raw: Any, where: str, code: str = "SETUP") -> int | float | str:
    if spec.kind is str:
        if not isinstance(raw, str) or "\x00" in raw:
            raise CairnError(code, f"{spec.dotted} must be text, got {raw!r} ({where})")
        if not spec.low <= len(raw.strip()) <= spec.high:
            raise CairnError(code, f"{spec.dotted} is longer than {int(spec.high)} characters ({where})")
        if spec.check is not None:
            try:
                spec.check(raw.strip())
            except CairnError as exc:
                raise CairnError(code, f"{spec.dotted}: {exc.message} ({where})") from None
        return raw.strip()
    if isinstance(raw, bool):
        # A 0/1 switch reads a TOML boolean as its number (``auto_apply = true`` is how people write
        # it); anywhere else true/false is a mistake, not 1/0.
        if spec.kind is int and (spec.low, spec.high) == (0, 1):
            return int(raw)
        raise CairnError(code, f"{spec.dotted} must be a number, got {raw!r} ({where})")
    try:
        if spec.kind is int:
            if isinstance(raw, float) and not raw.is_integer():
                raise ValueError
            value: int | float = int(raw)
        else:
            value = float(raw)
    except (TypeError, ValueError):
        kind = "a whole number" if spec.kind is int else "a number"
        raise CairnError(code, f"{spec.dotted} must be {kind}, got {raw!r} ({where})") from None
    if not spec.low <= value <= spec.high:
        low, high = (int(spec.low), int(spec.high)) if spec.kind is int else (spec.low, spec.high)
        raise CairnError(code, f"{spec.dotted} must be between {low} and {high}, got {value} ({where})")
    return value


def _flatten(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flatten(value, (*prefix, key)))
        else:
            out[(*prefix, key)] = value
    return out


def _read(path: Path) -> dict[tuple[str, ...], Any]:
    # Imported here: most processes (a hook's session start) find no settings file to parse.
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CairnError("SETUP", f"{path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise CairnError("SETUP", f"cannot read {path}: {exc.strerror}") from None
    flat = _flatten(data)
    for key in flat:
        if key not in _BY_PATH:
            import difflib

            dotted = ".".join(key)
            near = difflib.get_close_matches(dotted, [s.dotted for s in SPECS], n=1)
            hint = f"; did you mean {near[0]}?" if near else f"; known keys: {', '.join(s.dotted for s in SPECS)}"
            raise CairnError("SETUP", f"{path}: unknown setting {dotted}{hint}")
    return flat


def repo_config(cwd: Path | None) -> Path | None:
    """The ``.cairn.toml`` that applies in ``cwd``: the nearest one up to the repository root."""
    if cwd is None:
        return None
    from cairn.runtime.gitinfo import find_root

    try:
        here = cwd.resolve()
    except OSError:
        return None
    root = find_root(here)
    for candidate in (here, *here.parents):
        path = candidate / REPO_FILE
        if path.is_file():
            return path
        if root is None or candidate == root:
            break
    return None


def load(home: Path, cwd: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """The settings for ``home`` and the checkout at ``cwd``, overridden by ``environ`` (this process's
    environment unless given: the daemon passes the caller's, so that a hook's ``CAIRN_*`` settings
    apply to its own answer and to no other request the daemon serves meanwhile)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    layers = [home / "config.toml", repo_config(cwd)]
    for path in layers:
        if path is None or not path.is_file():
            continue
        for key, raw in _read(path).items():
            if key[0] in HOME_ONLY and path != layers[0]:
                # A cloned repository must not point the gateway (and so the provider key) elsewhere.
                raise CairnError("SETUP", f"{path}: [{key[0]}] settings are read from {layers[0]} only")
            spec = _BY_PATH[key]
            values[spec.name] = _coerce(spec, raw, str(path))
            sources[spec.name] = str(path)
    for spec in SPECS:
        for env in (spec.env, _LEGACY_ENV.get(spec.name)):
            if env and environ.get(env):
                values[spec.name] = _coerce(spec, environ[env], f"${env}")
                sources[spec.name] = f"${env}"
                break
    settings = Settings(**values, sources=sources)
    weights = [getattr(settings, f.name) for f in fields(settings) if f.name.startswith("weight_")]
    if not any(weights):
        raise CairnError("SETUP", "context.weights are all 0; at least one must be positive")
    return settings
