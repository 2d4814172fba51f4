"""LoreKit's row and fields in Cairn's terms, both ways (docs/lorekit.md has the table).

A LoreKit memory and a Cairn lesson share their core (scope, key, value, tags, source_agent,
trigger, expiry, archive state, seen count, created/updated times). LoreKit's fields with no Cairn
meaning — its ``kind`` (lesson, bus, signal), ``host`` and the ``origin_*`` provenance — are the
writer's claims: they travel in the lesson's ``claimed`` object under ``"lorekit"`` and come back
out in the row, never used by Cairn's ranking or rules.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

KINDS = ("lesson", "bus", "signal")
ORIGIN_FIELDS = ("origin_repo", "origin_branch", "origin_commit", "origin_pr")
CLAIM_FIELDS = ("kind", "host", *ORIGIN_FIELDS)
CLAIMS_KEY = "lorekit"
# LoreKit's row has a uuid id; Cairn's row id is internal. A stable name-based uuid per
# (tenant, scope, key) gives clients an id that does not change between reads and leaks nothing.
_ID_NAMESPACE = uuid.UUID("6d1f2b1c-5a0e-4c39-9a63-3f6c0b7a4e21")
# LoreKit infers kind/host from a loop bucket tag when the writer gave neither: ``loop::claude-lessons``.
_LOOP_TAG = re.compile(r"^loop::([a-z0-9._-]{1,64})-lessons$")
PREVIEW_CHARS = 200


def lorekit_claims(lesson: dict[str, Any]) -> dict[str, Any]:
    """The LoreKit fields a lesson carries as claims (a direct write, an import, or a plain import's nest)."""
    claimed = lesson.get("claimed") or {}
    held = claimed.get(CLAIMS_KEY)
    if not isinstance(held, dict):
        nested = claimed.get("claimed")
        held = nested.get(CLAIMS_KEY) if isinstance(nested, dict) else None
    return held if isinstance(held, dict) else {}


def infer_kind_host(tags: list[str]) -> tuple[str | None, str | None]:
    """LoreKit's inference: a ``loop::<host>-lessons`` tag makes a ``lesson`` written by ``host``."""
    for tag in tags:
        m = _LOOP_TAG.match(tag)
        if m:
            return "lesson", m.group(1)
    return None, None


def entry_id(tenant: str, scope: str, key: str) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, f"{tenant}\x00{scope}\x00{key}"))


def row(lesson: dict[str, Any], tenant: str) -> dict[str, Any]:
    """A Cairn lesson (``records.public``) as LoreKit's ``MemoryEntry``, plus Cairn's own fields under ``cairn``."""
    claims = lorekit_claims(lesson)
    kind, host = infer_kind_host(lesson["tags"])
    out = {
        "id": entry_id(tenant, lesson["scope"], lesson["key"]),
        "scope": lesson["scope"],
        "key": lesson["key"],
        "value": lesson["value"],
        "tags": lesson["tags"],
        "source_agent": lesson["source_agent"],
        "trigger": lesson["trigger"],
        "created_at": lesson["created_at"],
        "updated_at": lesson["updated_at"],
        "expires_at": lesson["expires_at"],
        "archived_at": lesson["archived_at"],
        **{f: claims.get(f) for f in ORIGIN_FIELDS},
        "kind": claims.get("kind") or kind or "lesson",
        "host": claims.get("host") or host,
        "seen_count": max(1, int(lesson["seen_count"] or 1)),
        "org_id": None,
        "org": None,
        "created_by": lesson["created_by"],
        "updated_by": lesson["updated_by"],
        # What LoreKit has no word for: clients spread rows through untouched, so this is additive.
        "cairn": {"trust": lesson["trust"], "version": lesson["version"], "status": lesson["status"]},
    }
    return out


def summary(entry: dict[str, Any]) -> dict[str, Any]:
    """``view: "summary"``: the value swapped for its UTF-8 size and the first 200 code points."""
    out = {k: v for k, v in entry.items() if k != "value"}
    out["value_bytes"] = len(entry["value"].encode("utf-8"))
    out["preview"] = entry["value"][:PREVIEW_CHARS]
    return out


def search_terms(q: str) -> str:
    """A ``websearch``-syntax query as plain words for Cairn's ranked search.

    LoreKit's clients join terms with ``OR`` (``bash OR linter``); Cairn's search already ORs the
    terms it extracts and ranks by them, so the operators (``OR``, ``AND``, a leading ``-``, quotes)
    are dropped rather than interpreted.
    """
    words = [w.strip('"').lstrip("-") for w in q.split()]
    return " ".join(w for w in words if w and w not in ("OR", "AND", "NOT", "or"))
