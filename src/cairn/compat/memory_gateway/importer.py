"""``cairn import --from memory-gateway CORPUS [--scope S]``: a corpus into an ordinary Cairn store.

The corpus is turned into Cairn's own export records and handed to the service's import, so the
import has the service's guarantees: validated before anything is written, batched transactions,
tombstones checked, and idempotent — a topic already imported with the same history is unchanged.

* a topic (``type/name``) becomes the lesson ``type::name`` in the scope, of its type's kind
  (user → preference, feedback → lesson, project → fact, reference → reference), its description
  as the trigger and its file as the url;
* its archived versions (``.archive/type/name/NNNN.md``, oldest first) are the lesson's earlier
  versions; with no live file the lesson is archived, or superseded when its last archived file
  says which topic replaced it (``superseded_by``), with the ``supersedes`` link;
* ``[[type/name]]`` wikilinks between imported topics become ``related`` links.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.compat.memory_gateway import corpus as layout
from cairn.compat.memory_gateway.mirror import KIND_OF
from cairn.errors import CairnError

if TYPE_CHECKING:
    from cairn.core.principal import Principal
    from cairn.service.api import Cairn

SOURCES = ("memory-gateway",)
ACTOR = "memory-gateway-import"


def default_scope(root: Path) -> str:
    """``project::<corpus directory name>`` (as a scope name: lowercase, a-z 0-9 . _ -)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", root.resolve().name.lower()).strip("-._") or "memory"
    return f"project::{name[:100]}"


def _time(path: Path, stamped: str | None) -> str:
    if stamped:
        return stamped
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _version(n: int, topic: layout.Topic, at: str) -> dict[str, Any]:
    return {
        "version": n,
        "action": "create" if n == 1 else "update",
        "value": topic.body.rstrip(),
        "tags": [],
        "kind": KIND_OF[topic.type],
        "trigger": topic.description[:500] or None,
        "trust": "candidate",
        "archived": False,
        "recorded_at": at,
        "actor": ACTOR,
    }


def _meta(path: Path) -> dict[str, str]:
    """The extra front matter the gateway writes into archived files (``archived``, ``superseded_by``)."""
    out: dict[str, str] = {}
    text = path.read_text(encoding="utf-8", errors="replace")
    if text.startswith("---\n"):
        for line in text.split("\n")[1:]:
            if line == "---":
                break
            k, sep, v = line.partition(":")
            if sep:
                out[k.strip()] = v.strip()
    return out


def records(root: Path, scope: str) -> tuple[list[str], list[str]]:
    """Export lines (lessons, then links) for every topic of the corpus, and notes on what was skipped."""
    c = layout.Corpus(str(root))
    slugs = set(c.all_live())
    archive_root = root / layout.ARCHIVE_DIR
    for type_ in layout.TYPES:
        d = archive_root / type_
        if d.is_dir() and not d.is_symlink():
            slugs.update(f"{type_}/{e.name}" for e in os.scandir(d) if e.is_dir(follow_symlinks=False))
    notes: list[str] = []
    lessons: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    keys: dict[str, str] = {}
    for slug in sorted(slugs):
        type_, stem = slug.split("/", 1)
        key = f"{type_}::{layout.normalize(stem)}"
        if not layout.normalize(stem) or key in keys.values():
            notes.append(f"{slug}: skipped (its name does not give a key of its own)")
            continue
        try:
            archived = [(p, _meta(p)) for _, p in c.archived(slug)]
            live_topic = c.load(slug)
        except Exception as exc:  # noqa: BLE001 - a file the corpus's own boundary refuses is reported, not read
            notes.append(f"{slug}: skipped ({exc})")
            continue
        versions = []
        for p, meta in archived:
            topic = layout.parse(slug, p.read_bytes())
            if topic.body.strip():
                versions.append((topic, _time(p, meta.get("archived"))))
        if live_topic is not None and live_topic.body.strip():
            versions.append((live_topic, _time(c.live_path(slug), None)))
        if not versions:
            notes.append(f"{slug}: skipped (no text)")
            continue
        keys[slug] = key
        out = [_version(i, t, at) for i, (t, at) in enumerate(versions, start=1)]
        first_at = versions[0][1]
        record: dict[str, Any] = {
            "type": "lesson", "scope": scope, "key": key, "origin": "import", "author": ACTOR,
            "url": f"{slug}.md", "archived_at": None, "superseded_by": None,
            "created_at": first_at, "created_by": ACTOR, "versions": out,
        }  # fmt: skip
        if live_topic is None:
            last_meta = archived[-1][1] if archived else {}
            by = last_meta.get("superseded_by")
            if by and by != slug:
                record["superseded_by"] = {"scope": scope, "key": by.replace("/", "::", 1)}
                links.append({"src": by, "dst": slug, "rel": "supersedes", "at": versions[-1][1]})
            else:
                record["archived_at"] = versions[-1][1]
                out[-1]["archived"] = True
        else:
            for target in layout.wikilinks(live_topic.body):
                links.append({"src": slug, "dst": target, "rel": "related", "at": versions[-1][1]})
        lessons.append(record)
    lines = [json.dumps({"type": "header", "format": "cairn-export", "version": 1})]
    lines += [json.dumps(r) for r in lessons]
    for link in links:
        if link["src"] in keys and link["dst"] in keys:
            lines.append(
                json.dumps(
                    {
                        "type": "link", "rel": link["rel"], "created_at": link["at"], "created_by": ACTOR,
                        "src": {"scope": scope, "key": keys[link["src"]]},
                        "dst": {"scope": scope, "key": keys[link["dst"]]},
                    }
                )
            )  # fmt: skip
    return lines, notes


def import_corpus(
    service: Cairn, principal: Principal, corpus: str, *, source: str, scope: str | None = None
) -> dict[str, Any]:
    """Import one corpus; the result is the service's import summary plus the scope and any notes."""
    if source not in SOURCES:
        raise CairnError("INVALID_INPUT", f"--from must be one of {', '.join(SOURCES)}; got {source!r}")
    from cairn.compat.memory_gateway.envelope import GatewayError
    from cairn.core.scope import validate_scope

    root = Path(corpus)
    target = validate_scope(scope) if scope else default_scope(root)
    try:
        lines, notes = records(root, target)
    except GatewayError as exc:
        raise CairnError("INVALID_INPUT", f"cannot read the corpus {corpus}: {exc.message}") from None
    # The records are built here (candidates, authored by the import), so a restore grants nothing
    # but the corpus's own history and times — which is the point of this import; it needs an admin.
    result = service.import_lines(principal, lines, restore=True)
    return {**result, "scope": target, "topics": len([ln for ln in lines if '"type": "lesson"' in ln]), "notes": notes}
