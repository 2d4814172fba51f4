"""Errors as RFC 9457 problem+json, with the same stable codes as the CLI.

One table maps a service code to an HTTP status; the body carries ``code`` (the contract agents
parse), ``detail`` (the message, with the corrected form where the service gives one) and ``data``.
"""

from __future__ import annotations

from typing import Any

from cairn.errors import CairnError

MEDIA_TYPE = "application/problem+json"

STATUS: dict[str, int] = {
    "INVALID_SCOPE": 400,
    "INVALID_KEY": 400,
    "INVALID_VALUE": 400,
    "INVALID_TTL": 400,
    "INVALID_TIME": 400,
    "INVALID_INPUT": 400,
    "VALUE_TOO_LARGE": 413,
    "UNAUTHENTICATED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "TOMBSTONED": 409,
    "SUPERSEDE_AMBIGUOUS": 409,
    "CONFLICT": 409,
    "AUDIT_BROKEN": 409,
    "LIMIT": 429,
    "SETUP": 503,
    "UNREACHABLE": 503,  # said by a client about a server; a server relaying it (none today) would be a gateway
    "INTERNAL": 500,
}


def problem(
    code: str, message: str, data: dict[str, Any] | None = None, *, status: int | None = None
) -> tuple[int, dict[str, Any]]:
    """The status and body for ``code``; ``status`` overrides the table where HTTP is more precise
    (405 for a wrong method, still ``INVALID_INPUT`` to a caller that reads the code)."""
    status = status or STATUS.get(code, 500)
    body: dict[str, Any] = {
        "type": f"https://cairn.dev/problems/{code.lower().replace('_', '-')}",
        "title": code,
        "status": status,
        "code": code,
        "detail": message,
    }
    if data:
        body["data"] = data
    return status, body


def from_error(exc: CairnError) -> tuple[int, dict[str, Any]]:
    return problem(exc.code, exc.message, exc.data)
