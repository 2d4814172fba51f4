"""``cairn import --from lorekit DIR``: LoreKit's local Markdown store into an ordinary Cairn store.

LoreKit's CLI keeps two local tiers with one layout: the per-user tier (``$LOREKIT_HOME``, default
``~/.lorekit``) and a repository's ``.lorekit/``. Under either, a scope is a directory (``global``,
``project/<name>``, ``repo/<owner>/<repo>``, ``branch/<owner>/<repo>/<branch…>``) and a memory is
one ``*.md`` file: a front matter of ``name: <JSON>`` lines, then the value. ``DIR`` is a tier
directory, or a repository whose ``.lorekit/`` is imported.

Each file becomes one of Cairn's own export records, handed to the service's import (validated
before anything is written, batched, tombstones checked, idempotent). The records are built here,
as unreviewed candidates authored by the import, so the import is a restore (it needs an admin, as
``--from memory-gateway``): LoreKit's times, seen count, expiry and archive state become the
lesson's own. What Cairn has no field for (the ``origin_*`` provenance, a key or tag Cairn spells
differently, the file) is kept in the lesson's claims under ``"lorekit"``: nothing LoreKit keeps is
dropped. A file Cairn cannot hold (an invalid scope, a key past Cairn's limit) is skipped with a note.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.compat.lorekit.fields import CLAIMS_KEY, ORIGIN_FIELDS
from cairn.core.content import validate_value
from cairn.core.keys import normalize_key
from cairn.core.scope import validate_scope
from cairn.core.timeparse import format_time, parse_time
from cairn.errors import CairnError
from cairn.service.write_input import normalize_tags

if TYPE_CHECKING:
    from cairn.core.principal import Principal
    from cairn.service.api import Cairn

SOURCE = "lorekit"
ACTOR = "lorekit-import"
SCOPE_DIRS = ("global", "project", "repo", "branch", "_other")
MAX_NOTES = 50


def tier(path: Path) -> Path:
    """The store directory ``path`` names: itself, or a repository's ``.lorekit/``."""
    if (path / ".lorekit").is_dir() and not any((path / d).is_dir() for d in SCOPE_DIRS):
        return path / ".lorekit"
    return path


def files(root: Path) -> Iterator[Path]:
    """Every memory file of a tier, in a stable order (scope directories only: config and state stay)."""
    for top in SCOPE_DIRS:
        base = root / top
        if not base.is_dir():
            continue
        for dirpath, dirnames, names in os.walk(base):
            dirnames.sort()
            for name in sorted(names):
                if name.endswith(".md"):
                    yield Path(dirpath) / name


def parse(text: str) -> dict[str, Any] | None:
    """LoreKit's ``parseEntry``: JSON-encoded front matter scalars (raw text when not JSON), then the body."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 3)
    if end == -1:
        if not text.rstrip("\n").endswith("\n---"):
            return None
        end, body = text.rstrip("\n").rfind("\n---"), ""
    else:
        body = text[end + 5 :]
    meta: dict[str, Any] = {}
    for line in text[4:end].split("\n"):
        name, sep, raw = line.partition(":")
        if not sep or not name.strip():
            continue
        raw = raw.strip()
        try:
            meta[name.strip()] = json.loads(raw) if raw else None
        except ValueError:
            meta[name.strip()] = raw
    meta["value"] = body[:-1] if body.endswith("\n") else body
    return meta


def _time(value: Any, fallback: str) -> str:
    if isinstance(value, str) and value:
        try:
            return format_time(parse_time(value))
        except CairnError:
            pass
    return fallback


def record(entry: dict[str, Any], rel: str, mtime: str) -> tuple[dict[str, Any] | None, str | None]:
    """One file as a Cairn lesson record, or (None, why it was skipped)."""
    try:
        scope = validate_scope(str(entry.get("scope") or ""))
        raw_key = entry.get("key")
        key = normalize_key(raw_key if isinstance(raw_key, str) else "")
        value = validate_value(entry.get("value") or "")
    except CairnError as exc:
        return None, f"{rel}: {exc.message}"
    claims: dict[str, Any] = {"file": rel}
    if raw_key != key:
        claims["key"] = raw_key
    raw_tags = entry.get("tags") if isinstance(entry.get("tags"), list) else []
    tags: list[str] = []
    for t in raw_tags:
        with contextlib.suppress(CairnError):  # a tag Cairn refuses stays in the claims below
            tags += [x for x in normalize_tags([t]) if x not in tags] if isinstance(t, str) else []
    if raw_tags != tags:
        claims["tags"] = raw_tags
    for name in ORIGIN_FIELDS:
        if entry.get(name) is not None:
            claims[name] = entry[name]
    created = _time(entry.get("created"), mtime)
    updated = _time(entry.get("updated"), created)
    archived = _time(entry.get("archived_at"), updated) if entry.get("archived_at") else None
    expires = _time(entry.get("expires_at"), "") or None
    seen = entry.get("seen_count")
    seen = seen if isinstance(seen, int) and not isinstance(seen, bool) and 1 <= seen < 2**31 else 1

    def short(name: str) -> str | None:
        v = entry.get(name)
        if not isinstance(v, str) or not v.strip():
            return None
        if len(v) > 500 or "\x00" in v:
            claims[name] = v
            return None
        return v

    version = {
        "version": 1,
        "action": "create",
        "value": value,
        "tags": tags,
        "kind": "lesson",
        "source_agent": short("source_agent"),
        "trigger": short("trigger"),
        "trust": "candidate",  # LoreKit has no review: a memory is one agent's word until a person verifies it
        "archived": archived is not None,
        "seen_count": seen,
        "expires_at": expires,
        "recorded_at": updated,
        "actor": ACTOR,
    }
    return {
        "type": "lesson",
        "scope": scope,
        "key": key,
        "origin": "import",
        "author": None,
        "url": None,
        "archived_at": archived,
        "superseded_by": None,
        "created_at": created,
        "created_by": ACTOR,
        "claimed": {CLAIMS_KEY: claims},
        "versions": [version],
    }, None


def records(root: Path) -> tuple[list[str], list[str], int]:
    """Export lines for every memory file of the tier, the notes on what was skipped, files read."""
    lines = [json.dumps({"type": "header", "format": "cairn-export", "version": 1})]
    notes: list[str] = []
    seen: dict[tuple[str, str], str] = {}
    count = 0
    for path in files(root):
        count += 1
        rel = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            notes.append(f"{rel}: unreadable ({exc.__class__.__name__})")
            continue
        entry = parse(text)
        if entry is None:
            notes.append(f"{rel}: no front matter")
            continue
        mtime = format_time(datetime.fromtimestamp(path.stat().st_mtime, UTC))
        rec, why = record(entry, rel, mtime)
        if rec is None:
            notes.append(why or rel)
            continue
        address = (rec["scope"], rec["key"])
        if address in seen:  # two LoreKit keys Cairn spells alike: the first file wins, the other is named
            notes.append(f"{rel}: same Cairn address as {seen[address]} ({rec['scope']} {rec['key']})")
            continue
        seen[address] = rel
        lines.append(json.dumps(rec, ensure_ascii=False))
    return lines, notes, count


def import_store(
    service: Cairn,
    principal: Principal,
    directory: str,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Import one LoreKit tier; the service's import summary plus the directory, files read and notes."""
    root = tier(Path(directory))
    if not root.is_dir():
        raise CairnError("INVALID_INPUT", f"{directory} is not a directory (a LoreKit store: ~/.lorekit or .lorekit/)")
    lines, notes, count = records(root)
    if count == 0:
        raise CairnError(
            "INVALID_INPUT",
            f"no LoreKit memories under {root} (expected global/, project/, repo/ or branch/ holding *.md files)",
        )
    result = service.import_lines(principal, lines, restore=True, progress=progress)
    shown = notes[:MAX_NOTES]
    if len(notes) > MAX_NOTES:
        shown.append(f"… and {len(notes) - MAX_NOTES} more")
    return {**result, "store": str(root), "files": count, "skipped": len(notes), "notes": shown}
