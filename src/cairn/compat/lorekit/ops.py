"""LoreKit's memory operations, each one Cairn service call (or a few) with LoreKit's names.

REST (``rest.py``) and MCP (``rpc.py``) share these: arguments are checked against LoreKit's
limits here, the rest of the rules are the service's (scope grammar and its corrected form, key
identity, content limits, tombstones, permissions, tenancy). A refusal is a ``LoreKitError`` with
one of LoreKit's error kinds; each transport spells it its own way.

Where Cairn's semantics differ they win (docs/lorekit.md): an overwrite is a new version, archive
keeps the address, ``delete --force`` forgets (the content is tombstoned) and then erases the text,
search is Cairn's ranked hybrid search.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from cairn.compat.lorekit import fields
from cairn.core.principal import Principal
from cairn.core.scope import scope_matches, validate_scope
from cairn.core.timeparse import parse_time, utcnow
from cairn.errors import CairnError
from cairn.service.api import Cairn

# LoreKit's limits (its tool catalog and REST schemas), checked before the service's own.
MAX_KEY = 512
MAX_VALUE = 65536
MAX_HOST = 64
MAX_TEXT = 500
PAGE_MAX = 100
LIST_DEFAULT = 50
SEARCH_DEFAULT = 20
RANK_WINDOW = 200
PURGE_DEFAULT_DAYS = 30
MAX_SCAN_PAGES = 20  # a filtered list reads at most this many pages to find one match
FORCE_REASON = "deleted through LoreKit's delete --force"
_HEX = re.compile(r"^[0-9a-fA-F]{7,40}$")
_WILDCARD = re.compile(r"^[a-z0-9._:/-]*(/\*|::\*)$")

# LoreKit's error kinds: REST status and code, MCP JSON-RPC code.
KINDS = {
    "bad_request": (400, None, -32603),
    "unauthorized": (401, "unauthorized", -32001),
    "forbidden": (403, "forbidden", -32003),
    "not_found": (404, "not_found", -32603),
    "conflict": (409, "conflict", -32603),
    "rate_limited": (429, "rate_limited", -32029),
    "memory_cap": (429, "memory_cap", -32040),
    "internal_error": (500, "internal_error", -32603),
}
_FROM_CAIRN = {
    "UNAUTHENTICATED": "unauthorized",
    "FORBIDDEN": "forbidden",
    "NOT_FOUND": "not_found",
    "TOMBSTONED": "conflict",
    "CONFLICT": "conflict",
    "SUPERSEDE_AMBIGUOUS": "conflict",
}


class LoreKitError(Exception):
    """A refusal in LoreKit's vocabulary; ``details`` carries Cairn's code and corrected form."""

    def __init__(self, kind: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.details = kind, message, details

    @property
    def status(self) -> int:
        return KINDS[self.kind][0]

    @property
    def code(self) -> str | None:
        return KINDS[self.kind][1]

    @property
    def rpc_code(self) -> int:
        return KINDS[self.kind][2]


def from_cairn(exc: CairnError) -> LoreKitError:
    kind = _FROM_CAIRN.get(exc.code)
    if exc.code == "LIMIT":
        kind = "memory_cap" if (exc.data or {}).get("limit") == "max_lessons" else "rate_limited"
    elif kind is None:
        kind = "internal_error" if exc.code in ("INTERNAL", "SETUP", "AUDIT_BROKEN", "UNHEALTHY") else "bad_request"
    details: dict[str, Any] = {"cairn_code": exc.code}
    corrected = (exc.data or {}).get("corrected")
    if corrected:
        details["corrected"] = corrected
    return LoreKitError(kind, exc.message, details)


def bad(message: str) -> LoreKitError:
    return LoreKitError("bad_request", message)


# -- argument checks (LoreKit's limits and messages) ------------------------------------------
def text(args: dict[str, Any], name: str, *, limit: int = MAX_TEXT, required: bool = False) -> str | None:
    value = args.get(name)
    if value is None:
        if required:
            raise bad(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise bad(f"{name} must be a string")
    if len(value) > limit:
        raise bad(f"{name} must be at most {limit} characters")
    return value


def integer(args: dict[str, Any], name: str, lo: int, hi: int, default: int | None = None) -> int | None:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,12}", value.strip()):
        value = int(value)  # query parameters arrive as text
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise bad(f"{name} must be an integer between {lo} and {hi}")
    return value


def flag(args: dict[str, Any], name: str) -> bool:
    value = args.get(name, False)
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    if not isinstance(value, bool):
        raise bad(f"{name} must be true or false")
    return value


def strings(args: dict[str, Any], name: str, *, limit: int = 64, split: bool = True) -> list[str]:
    """A list of strings; with ``split`` a comma-separated query parameter is one too."""
    value = args.get(name)
    if value is None or (split and value == ""):
        return []
    if isinstance(value, str) and split:
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and 0 < len(v) <= limit for v in value):
        raise bad(f"{name} must be a list of strings of 1-{limit} characters")
    if len(value) > PAGE_MAX:
        raise bad(f"{name} holds at most {PAGE_MAX} items")
    return value


def address(args: dict[str, Any]) -> tuple[str, str]:
    scope, key = args.get("scope"), args.get("key")
    if not isinstance(scope, str) or not scope.strip() or not isinstance(key, str) or not key:
        raise bad("scope and key are required")
    if len(key) > MAX_KEY:
        raise bad(f"key must be at most {MAX_KEY} characters")
    return scope, key


def _when(value: str, name: str) -> datetime:
    try:
        return parse_time(value)
    except CairnError:
        raise bad(f"{name} must be an ISO 8601 date-time") from None


class LoreKit:
    """The operations over one Cairn service; every method takes the caller's principal."""

    def __init__(self, svc: Cairn) -> None:
        self.svc = svc

    def caller(self, token: str | None) -> Principal:
        if not token:
            raise LoreKitError("unauthorized", "Missing API token. Send Authorization: Bearer <token>.")
        try:
            return self.svc.resolve_token(token)
        except CairnError as exc:
            raise LoreKitError("unauthorized", f"Invalid or unknown API token. {exc.message}") from None

    def _entry(self, p: Principal, lesson: dict[str, Any]) -> dict[str, Any]:
        return fields.row(lesson, p.tenant_id)

    # -- writing ------------------------------------------------------------------------------
    def write(self, p: Principal, args: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Create or overwrite (a new version; same content is a recurrence); (row, created)."""
        scope, key, value = args.get("scope"), args.get("key"), args.get("value")
        if not all(isinstance(v, str) and v.strip() for v in (scope, key, value)):
            raise bad("scope, key, and value are required")
        assert isinstance(scope, str) and isinstance(key, str) and isinstance(value, str)
        if len(key) > MAX_KEY:
            raise bad(f"key must be at most {MAX_KEY} characters")
        if len(value) > MAX_VALUE:
            raise bad(f"value must be at most {MAX_VALUE} characters")
        tags = strings(args, "tags", split=False)
        kind = text(args, "kind", limit=16)
        if kind is not None and kind not in fields.KINDS:
            raise bad(f"kind must be one of {', '.join(fields.KINDS)}")
        claims: dict[str, Any] = {}
        if kind is not None:
            claims["kind"] = kind
        host = text(args, "host", limit=MAX_HOST)
        if host:
            claims["host"] = host
        for name in ("origin_repo", "origin_branch"):
            if (v := text(args, name)) is not None:
                claims[name] = v
        commit = text(args, "origin_commit", limit=40)
        if commit is not None:
            if not _HEX.match(commit):
                raise bad("origin_commit must be 7-40 hexadecimal characters")
            claims["origin_commit"] = commit.lower()
        pr = integer(args, "origin_pr", 1, 2**31 - 1)
        if pr is not None:
            claims["origin_pr"] = pr
        created = text(args, "created_at", limit=64)
        if created is not None:
            when = _when(created, "created_at")
            if when > utcnow() + timedelta(minutes=5):
                raise bad("created_at must not be in the future")
            claims["created_at"] = created  # LoreKit uses it on insert only; Cairn keeps it as a claim
        ttl = self._ttl(args)
        if flag(args, "clear_ttl"):
            ttl = None
            self._refuse_clear_ttl(p, scope, key)
        try:
            r = self.svc.write(
                p,
                scope,
                key,
                value,
                tags=tags,
                source_agent=text(args, "source_agent"),
                trigger=text(args, "trigger"),
                ttl=ttl,
                claims={fields.CLAIMS_KEY: claims} if claims else None,
            )
        except CairnError as exc:
            raise from_cairn(exc) from None
        return self._entry(p, r["lesson"]), r["action"] == "created"

    @staticmethod
    def _ttl(args: dict[str, Any]) -> timedelta | None:
        days = integer(args, "ttl_days", 1, 365)
        minutes = integer(args, "ttl_minutes", 1, 365 * 24 * 60)
        seconds = integer(args, "ttl_seconds", 1, 365 * 24 * 3600)
        if days is not None:
            return timedelta(days=days)
        if minutes is not None:
            return timedelta(minutes=minutes)
        return timedelta(seconds=seconds) if seconds is not None else None

    def _refuse_clear_ttl(self, p: Principal, scope: str, key: str) -> None:
        """Cairn keeps an expiry once set (a value-only edit never clears it); say so rather than pretend."""
        held = self.read(p, {"scope": scope, "key": key})
        if held is not None and held["expires_at"] is not None:
            raise bad(
                "clear_ttl: Cairn does not clear an expiry by overwriting; archive this memory and write it "
                "under a new key without ttl_days to keep it permanently"
            )

    # -- reading ------------------------------------------------------------------------------
    def read(self, p: Principal, args: dict[str, Any]) -> dict[str, Any] | None:
        """The active memory at an address, or None (missing, archived, expired or forgotten)."""
        scope, key = address(args)
        try:
            return self._entry(p, self.svc.read(p, scope, key)["lesson"])
        except CairnError as exc:
            if exc.code == "NOT_FOUND":
                return None
            raise from_cairn(exc) from None

    def list(self, p: Principal, args: dict[str, Any], *, archived: bool = False) -> dict[str, Any]:
        """One page, newest first; filters LoreKit has and Cairn's list does not run over each page."""
        scope = text(args, "scope", limit=300)
        limit = integer(args, "limit", 1, PAGE_MAX, LIST_DEFAULT)
        assert limit is not None
        cursor = text(args, "cursor", limit=512) or None
        tags = strings(args, "tags")
        kinds = strings(args, "kind", limit=16)
        if any(k not in fields.KINDS for k in kinds):
            raise bad(f"kind must be one of {', '.join(fields.KINDS)}")
        hosts = strings(args, "host", limit=MAX_HOST)
        since = _when(args["created_since"], "created_since") if args.get("created_since") else None
        until = _when(args["created_until"], "created_until") if args.get("created_until") else None
        prefix = (text(args, "key_prefix", limit=MAX_KEY) or "").lower()
        view = args.get("view") or "full"
        if view not in ("full", "summary"):
            raise bad("view must be full or summary")
        order = args.get("order") or "recency"
        if order not in ("recency", "rank"):
            raise bad("order must be recency or rank")

        def keep(e: dict[str, Any]) -> bool:
            created = parse_time(e["created_at"])
            return (
                (len(tags) < 2 or any(t.lower() in e["tags"] for t in tags))
                and (not kinds or e["kind"] in kinds)
                and (not hosts or e["host"] in hosts)
                and (since is None or created >= since)
                and (until is None or created <= until)
                and e["key"].startswith(prefix)
            )

        filtered = len(tags) > 1 or bool(kinds or hosts or since or until or prefix)
        one_tag = tags[0] if len(tags) == 1 else None
        if order == "rank":
            return self._ranked(p, scope, one_tag, keep, limit, view)
        entries: list[dict[str, Any]] = []
        for _ in range(MAX_SCAN_PAGES):
            try:
                page = self.svc.list(p, scope, tag=one_tag, archived=archived, limit=limit, cursor=cursor)
            except CairnError as exc:
                raise from_cairn(exc) from None
            cursor = page["next_cursor"]
            entries = [e for e in (self._entry(p, r) for r in page["lessons"]) if not filtered or keep(e)]
            if entries or cursor is None:
                break
        if view == "summary":
            entries = [fields.summary(e) for e in entries]
        return {"entries": entries, "hasMore": cursor is not None, "nextCursor": cursor}

    def _ranked(self, p: Principal, scope: str | None, tag: str | None, keep: Any, limit: int, view: str):  # type: ignore[no-untyped-def]
        """``order: "rank"``: the newest 200 ranked by recency and recurrence, like LoreKit's."""
        try:
            page = self.svc.list(p, scope, tag=tag, limit=RANK_WINDOW)
        except CairnError as exc:
            raise from_cairn(exc) from None
        entries = [e for e in (self._entry(p, r) for r in page["lessons"]) if keep(e)]
        now = utcnow()
        top = max((e["seen_count"] for e in entries), default=1)

        def score(e: dict[str, Any]) -> float:
            age = (now - parse_time(e["updated_at"])).total_seconds() / 86400
            salience = math.log(e["seen_count"]) / math.log(top) if top > 1 else 0.0
            return 0.5 * 0.5 ** (age / 14) + 0.5 * salience

        entries.sort(key=score, reverse=True)
        entries = entries[:limit]
        if view == "summary":
            entries = [fields.summary(e) for e in entries]
        return {"entries": entries, "hasMore": False, "nextCursor": None}

    def search(self, p: Principal, args: dict[str, Any]) -> dict[str, Any]:
        """Cairn's ranked search over the named scopes (wildcards expanded); best first."""
        q = text(args, "q", limit=4000) or ""
        scopes = self._search_scopes(p, strings(args, "scopes", limit=300))
        tags = [t.lower() for t in strings(args, "tags")]
        limit = integer(args, "limit", 1, PAGE_MAX, SEARCH_DEFAULT)
        assert limit is not None
        if scopes == []:
            return {"entries": [], "hasMore": False, "nextCursor": None}
        terms = fields.search_terms(q)
        if not terms:
            if not q.strip() and (scopes or tags):  # a filter without a query: the newest in those scopes
                return self._newest(p, scopes, tags, limit)
            raise bad("q is required (or scopes)")
        try:
            hits = self.svc.search(p, terms, scopes=scopes, limit=PAGE_MAX if tags else limit)["results"]
        except CairnError as exc:
            raise from_cairn(exc) from None
        entries = []
        for h in hits:
            e = self._entry(p, h["lesson"])
            if tags and not any(t in e["tags"] for t in tags):
                continue
            e["rank"] = h["score"]
            entries.append(e)
        return {"entries": entries[:limit], "hasMore": False, "nextCursor": None}

    def _newest(self, p: Principal, scopes: list[str] | None, tags: list[str], limit: int) -> dict[str, Any]:
        found: list[dict[str, Any]] = []
        for scope in scopes or [None]:  # type: ignore[list-item]
            found.extend(self.list(p, {"scope": scope, "limit": limit, "tags": tags})["entries"])
        found.sort(key=lambda e: e["updated_at"], reverse=True)
        return {"entries": found[:limit], "hasMore": False, "nextCursor": None}

    def _search_scopes(self, p: Principal, raw: list[str]) -> list[str] | None:
        """Exact scopes and LoreKit's ``…/*`` / ``…::*`` wildcards; an invalid one is skipped (LoreKit's rule)."""
        if not raw:
            return None
        held: list[str] | None = None
        out: list[str] = []
        for s in raw:
            s = s.strip().lower()
            if _WILDCARD.match(s):
                if held is None:
                    held = [x["scope"] for x in self._scopes(p)]
                out.extend(x for x in held if scope_matches(x, s))
                continue
            try:
                out.append(validate_scope(s))
            except CairnError:
                continue
        return list(dict.fromkeys(out))

    def relevant(self, p: Principal, args: dict[str, Any]) -> dict[str, Any]:
        """``/memories/relevant``: a compact ranked shortlist (scope, key, one line, score)."""
        q = fields.search_terms(text(args, "q", limit=4000) or "")
        if not q:
            raise bad("q is required")
        scopes = self._search_scopes(p, strings(args, "scopes", limit=300))
        limit = integer(args, "limit", 1, PAGE_MAX, 10)
        raw_min = args.get("min_score")
        try:
            min_score = float(raw_min) if raw_min not in (None, "") else 0.0
        except (TypeError, ValueError):
            raise bad("min_score must be a number") from None
        if not math.isfinite(min_score):
            raise bad("min_score must be a number")
        if scopes == []:
            return {"entries": [], "candidates": 0}
        try:
            hits = self.svc.search(p, q, scopes=scopes, limit=PAGE_MAX)["results"]
        except CairnError as exc:
            raise from_cairn(exc) from None
        entries = [
            {"scope": h["scope"], "key": h["key"], "hook": h["summary"], "score": h["score"]}
            for h in hits
            if h["score"] >= min_score
        ]
        return {"entries": entries[:limit], "candidates": len(hits)}

    def _scopes(self, p: Principal) -> list[dict[str, Any]]:
        try:
            held = self.svc.scopes(p)["scopes"]
        except CairnError as exc:
            raise from_cairn(exc) from None
        return [x for x in held if x["active"]]

    def scopes(self, p: Principal) -> dict[str, Any]:
        """Scopes with active memories: count desc, then scope (``last_activity`` is not kept per scope)."""
        out = [{"scope": x["scope"], "count": x["active"], "last_activity": None} for x in self._scopes(p)]
        out.sort(key=lambda x: (-x["count"], x["scope"]))
        return {"scopes": out}

    def list_archived(self, p: Principal, args: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(args.get("scope"), str) or not args["scope"].strip():
            raise bad("scope is required")
        page = self.list(p, {"scope": args["scope"], "limit": args.get("limit")}, archived=True)
        keep = ("key", "value", "tags", "updated_at", "archived_at")
        return {"entries": [{k: e[k] for k in keep} for e in page["entries"]]}

    # -- lifecycle ----------------------------------------------------------------------------
    def archive(self, p: Principal, args: dict[str, Any]) -> bool:
        """Cairn's archive: hidden from reads, the address kept; False when nothing is there."""
        return self._changed(self.svc.archive, p, args)

    def restore(self, p: Principal, args: dict[str, Any]) -> bool:
        return self._changed(self.svc.restore, p, args)

    def _changed(self, op: Callable[..., dict[str, Any]], p: Principal, args: dict[str, Any]) -> bool:
        """Run archive or restore on the entry's address: whether it changed; False when nothing is there."""
        scope, key = address(args)
        try:
            r = op(p, scope, key)
        except CairnError as exc:
            if exc.code == "NOT_FOUND":
                return False
            raise from_cairn(exc) from None
        return bool(r["changed"])

    def delete(self, p: Principal, args: dict[str, Any]) -> dict[str, Any]:
        """Soft: archive. ``force``: forget (content tombstoned) then erase the text when the caller
        may purge (an admin token without scope limits); otherwise the archived sweep erases it."""
        if not flag(args, "force"):
            return {"deleted": False, "archived": True} if self.archive(p, args) else _missing()
        scope, key = address(args)
        try:
            self.svc.forget(p, scope, key, FORCE_REASON)
        except CairnError as exc:
            if exc.code == "NOT_FOUND":
                return _missing()
            raise from_cairn(exc) from None
        if "admin" in p.permissions and not p.scope_limited:
            try:
                self.svc.erase_forgotten(p, scope, key)
            except CairnError as exc:
                raise from_cairn(exc) from None
        return {"deleted": True, "archived": False}

    def purge(self, p: Principal, args: dict[str, Any]) -> dict[str, Any]:
        days = integer(args, "retention_days", 1, 365, PURGE_DEFAULT_DAYS)
        assert days is not None
        return self._sweep(p, archived=True, older_than=timedelta(days=days))

    def purge_expired(self, p: Principal) -> dict[str, Any]:
        return self._sweep(p, expired=True)

    def _sweep(self, p: Principal, **how: Any) -> dict[str, Any]:
        if p.scope_limited:
            raise LoreKitError("forbidden", "purge is account-wide; a token restricted to scopes may not run it")
        try:
            return {"purged": self.svc.purge(p, **how)["purged"]}
        except CairnError as exc:
            raise from_cairn(exc) from None


def _missing() -> dict[str, Any]:
    return {"deleted": False, "archived": False, "reason": "not_found"}
