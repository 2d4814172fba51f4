"""Reading an import file: each JSONL line checked and typed before anything is written.

A line is a plain record (scope, key, value and the write's options), or an export's lesson (with
its versions), tombstone or link. Each record passes the write path's own validators
(``make_write``: types, limits); a malformed line is reported with its number, and an import with
any is refused whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from typing import Any

from cairn.core.jsonin import loads
from cairn.core.keys import normalize_key
from cairn.core.lesson import ORIGINS, RELS
from cairn.core.lesson import TRUSTS as TRUST
from cairn.core.principal import MAX_SESSION_CHARS, Principal
from cairn.core.scope import validate_scope
from cairn.core.timeparse import parse_time
from cairn.errors import CairnError
from cairn.service.export import FORMAT, FORMAT_VERSION
from cairn.service.tombstones import MAX_REASON
from cairn.service.write_input import make_write

MAX_CLAIMED = 8192  # what an earlier import recorded as claims: a dozen short fields, nested once


def _pt(v: Any, field: str) -> datetime | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise CairnError("INVALID_INPUT", f"{field} must be an ISO 8601 string")
    return parse_time(v)


def parse_all(
    principal: Principal, lines: Iterable[str], restore: bool
) -> tuple[list[tuple[int, str, Any]], list[tuple[int, str]]]:
    records: list[tuple[int, str, Any]] = []
    errors: list[tuple[int, str]] = []
    for n, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        try:
            obj = loads(text, "the line")  # bounded depth and numbers, as on every surface
        except CairnError as exc:
            errors.append((n, exc.message))
            continue
        if not isinstance(obj, dict):
            errors.append((n, "each line must be a JSON object"))
            continue
        try:
            parsed = _parse_record(principal, obj, restore)
        except CairnError as exc:
            errors.append((n, f"{exc.code}: {exc.message}"))
            continue
        except KeyError as exc:
            errors.append((n, f"missing field {exc}"))
            continue
        except (TypeError, ValueError) as exc:
            errors.append((n, f"malformed record ({exc})"))
            continue
        if parsed is not None:
            records.append((n, parsed[0], parsed[1]))
    return records, errors


def values_of(kind: str, rec: Any) -> list[str]:
    """The lesson texts a parsed record would store (a plain write, or an export's versions)."""
    if kind == "plain":
        return [rec.value]
    if kind == "lesson":
        _lesson, versions = rec
        return [v["value"] for v in versions]
    return []


def _str(obj: dict[str, Any], field: str, *, required: bool = True, limit: int = 500) -> str | None:
    """A string field of a record, typed and bounded as the write path bounds its own."""
    value = obj.get(field) if not required else obj[field]
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise CairnError("INVALID_INPUT", f"{field} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise CairnError("INVALID_INPUT", f"{field} is longer than {limit} characters")
    if "\x00" in value:
        raise CairnError("INVALID_INPUT", f"{field} contains a NUL character")
    return value


def _count(obj: dict[str, Any], field: str, default: int, minimum: int = 0) -> int:
    value = obj.get(field, default)
    # bool is an int in Python; a JSON true is not a count.
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= 2**31 - 1:
        raise CairnError("INVALID_INPUT", f"{field} must be an integer from {minimum}, got {value!r}")
    return value


def _parse_record(principal: Principal, obj: dict[str, Any], restore: bool) -> tuple[str, Any] | None:
    kind = obj.get("type")
    if kind == "header":
        if obj.get("format") != FORMAT or obj.get("version") != FORMAT_VERSION:
            raise CairnError(
                "INVALID_INPUT", f"unsupported export format {obj.get('format')!r} v{obj.get('version')!r}"
            )
        return None
    if kind is None:
        for field in ("scope", "key", "value"):
            if not isinstance(obj.get(field), str):
                raise CairnError("INVALID_INPUT", f'a plain record needs "{field}" as a string')
        ttl = obj.get("ttl")
        inp = make_write(
            principal,
            obj["scope"],
            obj["key"],
            obj["value"],
            tags=obj.get("tags"),
            kind=obj.get("kind") or "lesson",
            source_agent=obj.get("source_agent"),
            trigger=obj.get("trigger"),
            ttl=str(ttl) if ttl is not None else None,
            valid_from=_pt(obj.get("valid_from"), "valid_from"),
            valid_to=_pt(obj.get("valid_to"), "valid_to"),
            origin="import",
            author=obj.get("author"),
            url=obj.get("url"),
        )
        if not restore and inp.author is not None:  # the record's word, not the importer's
            inp = replace(inp, author=None, claimed=json.dumps({"author": inp.author}, ensure_ascii=False))
        return ("plain", inp)
    if kind == "lesson":
        scope, key = _str(obj, "scope"), _str(obj, "key")
        assert scope is not None and key is not None
        origin = obj.get("origin")
        if origin not in ORIGINS:
            raise CairnError("INVALID_INPUT", f"origin must be one of {', '.join(ORIGINS)}")
        raw_versions = obj["versions"]
        if not isinstance(raw_versions, list) or not raw_versions:
            raise CairnError("INVALID_INPUT", "a lesson record needs a non-empty versions list")
        versions = []
        inp = None
        for v in raw_versions:
            if not isinstance(v, dict):
                raise CairnError("INVALID_INPUT", "each version must be a JSON object")
            number = _count(v, "version", 0, minimum=1)
            if v.get("trust") not in TRUST:
                raise CairnError("INVALID_INPUT", f"version {number}: trust must be one of {', '.join(TRUST)}")
            # The write path's own validation of everything a write would take (types and limits).
            inp = make_write(
                principal,
                scope,
                key,
                v["value"],
                tags=v.get("tags"),
                kind=v["kind"],
                source_agent=v.get("source_agent"),
                trigger=v.get("trigger"),
                valid_from=_pt(v.get("valid_from"), "valid_from"),
                valid_to=_pt(v.get("valid_to"), "valid_to"),
                origin=origin,
                author=obj.get("author"),
                url=obj.get("url"),
            )
            versions.append(
                {
                    "version": number,
                    "action": _str(v, "action", limit=24),
                    "value": inp.value,
                    "content_hash": inp.content_hash,
                    "tags": json.dumps(inp.tags),
                    "kind": inp.kind,
                    "source_agent": inp.source_agent,
                    "trigger": inp.trigger,
                    "trust": v["trust"],
                    "archived": _bool(v, "archived"),
                    "seen_count": _count(v, "seen_count", 1),
                    "helped_count": _count(v, "helped_count", 0),
                    "not_helped_count": _count(v, "not_helped_count", 0),
                    "valid_from": inp.valid_from,
                    "valid_to": inp.valid_to,
                    "expires_at": _pt(v.get("expires_at"), "expires_at"),
                    "recorded_at": _pt(v["recorded_at"], "recorded_at"),
                    "actor": _str(v, "actor"),
                    "session": _str(v, "session", required=False, limit=MAX_SESSION_CHARS),
                    # A version's global identity, when the export had one (migration 0013).
                    **_identity(v),
                }
            )
        assert inp is not None
        numbers = [v["version"] for v in versions]
        if numbers != sorted(set(numbers)):
            raise CairnError("INVALID_INPUT", "versions must be unique and in ascending order")
        claimed = obj.get("claimed")
        if claimed is not None and not isinstance(claimed, dict):
            raise CairnError("INVALID_INPUT", "claimed must be a JSON object (or absent)")
        if claimed and len(json.dumps(claimed, ensure_ascii=False)) > MAX_CLAIMED:
            raise CairnError("INVALID_INPUT", f"claimed is longer than {MAX_CLAIMED} characters as JSON")
        lesson = {
            "scope": inp.scope,
            "key": inp.key,
            "origin": origin,
            "author": inp.author,
            "url": inp.url,
            "archived_at": _pt(obj.get("archived_at"), "archived_at"),
            "created_at": _pt(obj["created_at"], "created_at"),
            "created_by": _str(obj, "created_by"),
            "superseded_by": _addr(obj["superseded_by"]) if obj.get("superseded_by") else None,
            # A restore keeps claims an earlier import recorded; any other import nests them.
            "claimed": json.dumps(claimed, ensure_ascii=False) if claimed and restore else None,
            "claimed_by_file": claimed if claimed and not restore else None,
        }
        if lesson["superseded_by"]:
            lesson["superseded_by"] = {"scope": lesson["superseded_by"][0], "key": lesson["superseded_by"][1]}
        return ("lesson", (lesson, versions))
    if kind == "tombstone":
        reason = _str(obj, "reason", limit=MAX_REASON)
        assert reason is not None
        reason = reason.strip()
        if not reason:
            raise CairnError("INVALID_INPUT", "a tombstone needs a reason")
        chash = obj["content_hash"]
        if not _is_hash(chash):
            raise CairnError("INVALID_INPUT", "content_hash must be 64 lowercase hex characters")
        identity = obj.get("identity")
        if identity is not None and not _is_hash(identity):
            raise CairnError("INVALID_INPUT", "identity must be 64 lowercase hex characters (or absent)")
        return (
            "tombstone",
            {
                "content_hash": chash,
                "identity": identity,
                "scope": validate_scope(obj["scope"]),
                "key": normalize_key(obj["key"]),
                "reason": reason,
                "created_at": _pt(obj["created_at"], "created_at"),
                "created_by": _str(obj, "created_by"),
                "lifted_at": _pt(obj.get("lifted_at"), "lifted_at"),
                "lifted_by": _str(obj, "lifted_by", required=False),
                "lift_reason": _str(obj, "lift_reason", required=False, limit=MAX_REASON),
            },
        )
    if kind == "link":
        rel = obj["rel"]
        if rel not in RELS:
            raise CairnError("INVALID_INPUT", f"unknown link rel {rel!r}")
        return (
            "link",
            {
                "src": _addr(obj["src"]),
                "dst": _addr(obj["dst"]),
                "rel": rel,
                "created_at": _pt(obj["created_at"], "created_at"),
                "created_by": _str(obj, "created_by"),
            },
        )
    raise CairnError(
        "INVALID_INPUT", f"unknown record type {kind!r} (expected lesson, tombstone, link or a plain record)"
    )


def _bool(obj: dict[str, Any], field: str) -> bool:
    value = obj.get(field, False)
    if not isinstance(value, bool):
        raise CairnError("INVALID_INPUT", f"{field} must be true or false, got {value!r}")
    return value


def _identity(v: dict[str, Any]) -> dict[str, Any]:
    """``uid``, ``parents`` and ``human`` of an exported version (None where an older export lacks them)."""
    uid, parents = v.get("uid"), v.get("parents")
    if uid is None:
        return {"uid": None, "parents": None, "human": None}
    ok = isinstance(uid, str) and len(uid) == 32 and all(c in "0123456789abcdef" for c in uid)
    if not ok or not isinstance(parents, list) or not all(isinstance(p, str) and len(p) == 32 for p in parents):
        raise CairnError("INVALID_INPUT", "a version's uid is 32 hex characters and its parents a list of uids")
    return {"uid": uid, "parents": parents, "human": _bool(v, "human")}


def _is_hash(v: Any) -> bool:
    return isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v)


def _addr(obj: Any) -> tuple[str, str]:
    if not isinstance(obj, dict):
        raise CairnError("INVALID_INPUT", 'an address is {"scope": ..., "key": ...}')
    return validate_scope(obj["scope"]), normalize_key(obj["key"])
