"""A write's input, checked: the form every surface's write (and every import record) becomes.

``make_write`` validates what a write takes (scope, key, value, tags, kind, origin, TTL, valid
time, the bounded text fields) into a ``WriteInput``; a writer's own claims (another tool's
provenance fields) are bounded here and merged into the claims a lesson holds on an edit.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from cairn.core.content import content_hash, content_identity, validate_value
from cairn.core.keys import normalize_key
from cairn.core.lesson import (
    KINDS,
    MAX_FIELD_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    ORIGINS,
    TAG_CHARS,
)
from cairn.core.principal import Principal
from cairn.core.scope import validate_scope
from cairn.core.timeparse import format_time, parse_ttl
from cairn.errors import CairnError

_TAG = re.compile(rf"^[a-z0-9][{TAG_CHARS.replace('A-Z', '')}]{{0,{MAX_TAG_CHARS - 1}}}$")  # stored lower case
MAX_FIELD = MAX_FIELD_CHARS


def normalize_tags(tags: list[str] | tuple[str, ...] | None) -> list[str]:
    """Tags as stored: lower case, checked, de-duplicated, in the order given.

    The type is checked too: a string where the list belongs would otherwise be iterated as its
    characters (``"deploy"`` -> d, e, p, ...), which JSON input (import, API) can send.
    """
    if tags is None:
        return []
    if not isinstance(tags, list | tuple):
        raise CairnError(
            "INVALID_INPUT",
            f'tags must be a list of strings, got {type(tags).__name__} (write ["{tags}"] for one tag)'
            if isinstance(tags, str)
            else f"tags must be a list of strings, got {type(tags).__name__}",
        )
    out: list[str] = []
    for raw in tags:
        if not isinstance(raw, str):
            raise CairnError("INVALID_INPUT", f"each tag must be a string, got {type(raw).__name__}")
        tag = raw.strip().lower()
        if not _TAG.match(tag):
            raise CairnError(
                "INVALID_INPUT",
                f"invalid tag {raw!r}: tags are 1-64 characters of a-z, 0-9 and . _ : / + # -, "
                "starting with a letter or digit",
                {"tag": raw},
            )
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise CairnError("INVALID_INPUT", f"at most {MAX_TAGS} tags per lesson, got {len(out)}")
    return out


def _bounded(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):  # JSON input (import, API) can send any type
        raise CairnError("INVALID_INPUT", f"{name} must be a string, got {type(value).__name__}")
    value = value.strip()
    if len(value) > MAX_FIELD:
        raise CairnError("INVALID_INPUT", f"{name} is longer than {MAX_FIELD} characters")
    if "\x00" in value:  # Postgres text cannot hold U+0000; one rule on both databases
        raise CairnError("INVALID_INPUT", f"{name} contains a NUL character")
    return value or None


@dataclass(frozen=True)
class WriteInput:
    """A validated write: the surfaces build it from their own input forms."""

    scope: str
    key: str
    value: str
    tags: list[str]
    kind: str
    source_agent: str | None
    trigger: str | None
    ttl: timedelta | None
    valid_from: datetime | None
    valid_to: datetime | None
    origin: str
    author: str | None
    url: str | None
    # JSON of what an import claimed and was not granted (see Transfer.import_lines); else None.
    claimed: str | None = None
    # True when ``claimed`` comes from a writer's own claims (``write(claims=...)``): an edit merges
    # them into the claims the lesson holds, so a field the writer did not repeat keeps its value.
    merge_claims: bool = False
    # Written by someone outside the repository (a webhook's third-party comment): its recurrences
    # never promote it; only a person's verification does (service/webhooks.py).
    outside: bool = False

    @cached_property
    def content_hash(self) -> str:
        return content_hash(self.value)

    @cached_property
    def identity(self) -> str:
        """The tombstone check's wider identity (``core.content.content_identity``)."""
        return content_identity(self.value)


def make_write(
    principal: Principal,
    scope: str,
    key: str,
    value: str,
    *,
    tags: list[str] | tuple[str, ...] | None = None,
    kind: str = "lesson",
    source_agent: str | None = None,
    trigger: str | None = None,
    ttl: timedelta | str | None = None,
    valid_from: datetime | None = None,
    valid_to: datetime | None = None,
    origin: str | None = None,
    author: str | None = None,
    url: str | None = None,
) -> WriteInput:
    if kind not in KINDS:
        raise CairnError("INVALID_INPUT", f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    origin = origin or ("human" if principal.human else "agent")
    if origin not in ORIGINS:
        raise CairnError("INVALID_INPUT", f"origin must be one of {', '.join(ORIGINS)}; got {origin!r}")
    if isinstance(ttl, str):  # a duration as people and clients write it ("7d", "12h"): parsed here, once
        ttl = parse_ttl(ttl)
    if ttl is not None and not (timedelta(seconds=1) <= ttl <= timedelta(days=365)):
        raise CairnError("INVALID_TTL", "ttl must be between 1 second and 365 days")
    if valid_from and valid_to and valid_to <= valid_from:
        raise CairnError(
            "INVALID_TIME",
            f"valid_to ({format_time(valid_to)}) must be after valid_from ({format_time(valid_from)})",
        )
    return WriteInput(
        scope=validate_scope(scope),
        key=normalize_key(key),
        value=validate_value(value),
        tags=normalize_tags(tags),
        kind=kind,
        source_agent=_bounded("source_agent", source_agent),
        trigger=_bounded("trigger", trigger),
        ttl=ttl,
        valid_from=valid_from,
        valid_to=valid_to,
        origin=origin,
        author=_bounded("author", author),
        url=_bounded("url", url),
    )


MAX_CLAIMS = 8192  # a writer's claims as JSON: a dozen short fields (an import's are bounded alike)


def claims_json(claims: dict[str, Any]) -> str:
    if not isinstance(claims, dict):
        raise CairnError("INVALID_INPUT", "claims must be a JSON object")
    text = json.dumps(claims, ensure_ascii=False, sort_keys=True)
    if len(text) > MAX_CLAIMS:
        raise CairnError("INVALID_INPUT", f"claims are longer than {MAX_CLAIMS} characters as JSON")
    return text


def merged_claims(held: str | None, inp: WriteInput) -> str | None:
    """The claims an edit leaves: a writer's new claims over the held ones, one level deep."""
    if not inp.merge_claims or not held:
        return inp.claimed
    out = json.loads(held)
    for name, value in json.loads(inp.claimed or "{}").items():
        if isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name] = {**out[name], **value}
        else:
            out[name] = value
    return claims_json(out)
