"""LoreKit's agent-facing MCP surface: JSON-RPC 2.0 over plain POST, no sessions, no SSE.

What ``mcp-remote`` and LoreKit's plugins speak: ``initialize`` (protocol 2024-11-05),
``notifications/initialized`` (204), ``tools/list`` and ``tools/call`` for the eleven ``memory.*``
tools with LoreKit's argument names and limits. A result is ``{"content": [{"type": "text",
"text": <JSON>}]}``; a refusal a JSON-RPC error with LoreKit's codes: -32001 bad token and -32003
permission (HTTP 200), -32700 parse, -32601 unknown method or tool, -32040 limit, -32603 the rest
including bad input (HTTP 400). The token comes from ``Authorization: Bearer`` or ``?token=``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cairn.compat.lorekit.ops import (
    LIST_DEFAULT,
    MAX_HOST,
    MAX_KEY,
    MAX_VALUE,
    PAGE_MAX,
    PURGE_DEFAULT_DAYS,
    SEARCH_DEFAULT,
    LoreKit,
    LoreKitError,
    bad,
    from_cairn,
)
from cairn.core.jsonin import loads
from cairn.errors import CairnError

PROTOCOL = "2024-11-05"
SERVER_INFO = {"name": "lorekit", "version": "1.1.0"}
MAX_BODY = 256 * 1024

_S = {"type": "string"}
_SCOPE = {"type": "string", "description": "global | project::<name> | repo::<owner>/<name> | branch::<o>/<r>::<b>"}
_KEY = {"type": "string", "minLength": 1, "maxLength": MAX_KEY}
_TAGS = {"type": "array", "items": _S}
_KIND = {"type": "string", "enum": ["lesson", "bus", "signal"]}


def _limit(default: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": PAGE_MAX, "default": default}


def _tool(name: str, permission: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "permission": permission,
        "description": description,
        "inputSchema": {"type": "object", "properties": props, "required": required, "additionalProperties": False},
    }


TOOLS = [
    _tool(
        "memory.write",
        "write",
        "Save a memory at (scope, key). Overwriting keeps the earlier text as a version (Cairn).",
        {
            "scope": _SCOPE,
            "key": _KEY,
            "value": {"type": "string", "minLength": 1, "maxLength": MAX_VALUE},
            "tags": _TAGS,
            "source_agent": _S,
            "trigger": _S,
            "kind": _KIND,
            "host": {"type": "string", "maxLength": MAX_HOST},
            "created_at": {"type": "string", "format": "date-time"},
            "org": _S,
            "ttl_days": {"type": "integer", "minimum": 1, "maximum": 365},
            "clear_ttl": {"type": "boolean"},
            "origin_repo": _S,
            "origin_branch": _S,
            "origin_commit": {"type": "string", "pattern": "^[0-9a-fA-F]{7,40}$"},
            "origin_pr": {"type": "integer", "minimum": 1},
        },
        ["scope", "key", "value"],
    ),
    _tool(
        "memory.read",
        "read",
        "Read one memory by scope and key (null when absent).",
        {"scope": _SCOPE, "key": _KEY},
        ["scope", "key"],
    ),
    _tool(
        "memory.list",
        "read",
        "List memories in one scope, newest first (order: rank ranks the newest 200).",
        {
            "scope": _SCOPE,
            "tags": _TAGS,
            "limit": _limit(LIST_DEFAULT),
            "cursor": _S,
            "order": {"type": "string", "enum": ["recency", "rank"]},
            "kind": _KIND,
            "host": {"type": "string", "minLength": 1, "maxLength": MAX_HOST},
            "view": {"type": "string", "enum": ["full", "summary"]},
        },
        ["scope"],
    ),
    _tool(
        "memory.delete",
        "write",
        "Archive a memory; force forgets it (its content is refused from then on) and erases the text.",
        {"scope": _SCOPE, "key": _KEY, "force": {"type": "boolean", "default": False}, "org": _S},
        ["scope", "key"],
    ),
    _tool(
        "memory.search",
        "read",
        "Ranked search (Cairn's hybrid full-text and meaning) across scopes; wildcards …/* and …::*.",
        {
            "q": _S,
            "scopes": {"type": "array", "items": _S},
            "tags": _TAGS,
            "limit": _limit(SEARCH_DEFAULT),
            "cursor": _S,
        },
        ["q"],
    ),
    _tool(
        "memory.archive",
        "write",
        "Archive a memory (hidden from reads; restore brings it back).",
        {"scope": _SCOPE, "key": _KEY},
        ["scope", "key"],
    ),
    _tool("memory.scopes", "read", "Scopes holding active memories, with counts.", {}, []),
    _tool(
        "memory.list_archived",
        "read",
        "Archived memories of one scope.",
        {"scope": _SCOPE, "limit": _limit(LIST_DEFAULT)},
        ["scope"],
    ),
    _tool("memory.restore", "write", "Restore an archived memory.", {"scope": _SCOPE, "key": _KEY}, ["scope", "key"]),
    _tool(
        "memory.purge",
        "write",
        "Erase archived memories older than retention_days, account-wide.",
        {"retention_days": {"type": "integer", "minimum": 1, "maximum": 365, "default": PURGE_DEFAULT_DAYS}},
        [],
    ),
    _tool("memory.purge_expired", "write", "Erase every expired memory, account-wide.", {}, []),
]
_BY_NAME = {t["name"]: t for t in TOOLS}


def _call(lk: LoreKit, p: Any, name: str, args: dict[str, Any]) -> Any:
    """One tool's result, in the hosted server's shapes."""
    if name == "memory.write":
        entry, _created = lk.write(p, args)
        out = {"id": entry["id"], "created_at": entry["created_at"]}
        if any(args.get(k) is not None for k in ("ttl_days", "ttl_minutes", "ttl_seconds", "clear_ttl")):
            out["expires_at"] = entry["expires_at"]
        return out
    if name == "memory.read":
        entry = lk.read(p, args)
        return None if entry is None else {"value": entry["value"], "updated_at": entry["updated_at"]}
    if name == "memory.list":
        if not isinstance(args.get("scope"), str):
            raise bad("scope is required")
        page = lk.list(p, args)
        keep = ("id", "key", "value", "value_bytes", "preview", "tags", "updated_at")
        page["entries"] = [{k: e[k] for k in keep if k in e} for e in page["entries"]]
        return page
    if name == "memory.delete":
        return lk.delete(p, args)
    if name == "memory.search":
        if not isinstance(args.get("q"), str) or not args["q"].strip():
            raise bad("q is required")
        page = lk.search(p, args)
        keep = ("id", "key", "value", "scope", "tags", "updated_at", "rank")
        page["entries"] = [{k: e[k] for k in keep} for e in page["entries"]]
        return page
    if name == "memory.archive":
        return {"archived": True} if lk.archive(p, args) else {"archived": False, "reason": "not_found"}
    if name == "memory.scopes":
        return lk.scopes(p)
    if name == "memory.list_archived":
        return lk.list_archived(p, args)
    if name == "memory.restore":
        return {"restored": True} if lk.restore(p, args) else {"restored": False, "reason": "not_found"}
    if name == "memory.purge":
        return lk.purge(p, args)
    return lk.purge_expired(p)


def _error(rid: Any, code: int, message: str, status: int | None = None) -> JSONResponse:
    if status is None:
        status = 200 if code in (-32001, -32003) else 429 if code == -32029 else 400
    return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}, status_code=status)


def _result(rid: Any, result: Any) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": result})


async def handle(lk: LoreKit, request: Request, token_of: Callable[[Request], str | None]) -> Response:
    if request.method != "POST":
        return JSONResponse(
            {"error": f"Method Not Allowed. JSON-RPC over POST (protocol {PROTOCOL}); GET/SSE is not supported."},
            status_code=405,
            headers={"Allow": "POST"},
        )
    raw = await request.body()
    if len(raw) > MAX_BODY:
        return _error(None, -32700, f"Parse error: the body is larger than {MAX_BODY} bytes")
    try:
        msg = loads(raw.decode("utf-8"), "the body")
    except (CairnError, UnicodeDecodeError):
        return _error(None, -32700, "Parse error")
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or not isinstance(msg.get("method"), str):
        return _error(msg.get("id") if isinstance(msg, dict) else None, -32600, "Invalid Request")
    rid, method = msg.get("id"), msg["method"]
    params = msg.get("params") or {}
    if not isinstance(params, dict):
        return _error(rid, -32602, "params must be an object")
    token = token_of(request) or request.query_params.get("token")
    try:
        p = await run_in_threadpool(lk.caller, token)
    except LoreKitError as exc:
        return _error(rid, exc.rpc_code, exc.message)
    if method == "initialize":
        return _result(rid, {"protocolVersion": PROTOCOL, "capabilities": {"tools": {}}, "serverInfo": SERVER_INFO})
    if method.startswith("notifications/"):
        return Response(status_code=204)
    if method == "ping":
        return _result(rid, {})
    if method == "tools/list":
        return _result(rid, {"tools": [{k: t[k] for k in ("name", "description", "inputSchema")} for t in TOOLS]})
    if method != "tools/call":
        return _error(rid, -32601, f"Method not found: {method}")
    name, args = params.get("name"), params.get("arguments") or {}
    tool = _BY_NAME.get(name) if isinstance(name, str) else None
    if tool is None:
        return _error(rid, -32601, f"Unknown tool: {name}")
    if not isinstance(args, dict):
        return _error(rid, -32603, "arguments must be an object")
    if tool["permission"] not in p.permissions:
        return _error(rid, -32003, f"This token does not have {tool['permission']} permission for {name}.")
    try:
        result = await run_in_threadpool(_call, lk, p, name, args)
    except LoreKitError as exc:
        return _error(rid, exc.rpc_code, exc.message)
    except CairnError as exc:
        err = from_cairn(exc)
        return _error(rid, err.rpc_code, err.message)
    return _result(rid, {"content": [{"type": "text", "text": json.dumps(result, ensure_ascii=False)}]})
