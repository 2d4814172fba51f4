"""The one JSON envelope per call, refusal codes and exit codes (memory-gateway's contract).

Exactly one envelope goes to stdout, ``{"status","verb","slug","data","reason"}``; human
diagnostics go to stderr. ``reason`` is present iff the status is not ``ok``. Exit 0 success, 1
refused or invalid usage, 2 setup or I/O failure, 111 an injected crash (tests).
"""

from __future__ import annotations

import json
import sys
from typing import Any

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_SETUP = 2
EXIT_CRASH = 111

# code -> (status, exit). The peer's codes first; Cairn's service codes pass through as refusals.
CODES: dict[str, tuple[str, int]] = {
    **dict.fromkeys(
        ("DEDUP_COLLISION", "CONCURRENT_WRITER", "BOUNDARY", "SUPERSEDE_AMBIGUOUS", "NEW_SLUG_OCCUPIED", "NOT_FOUND",
         "USAGE", "UNKNOWN_VERB", "TOMBSTONED"),
        ("refused", EXIT_REFUSED),
    ),
    **dict.fromkeys(("IO_ERROR", "SETUP", "INTERNAL"), ("error", EXIT_SETUP)),
}  # fmt: skip


class GatewayError(Exception):
    """A refusal or failure with a stable code; ``data`` rides in the envelope (e.g. candidates)."""

    def __init__(self, code: str, message: str, data: dict[str, Any] | None = None, slug: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.slug = slug

    @property
    def status(self) -> str:
        return CODES.get(self.code, ("refused", EXIT_REFUSED))[0]

    @property
    def exit_code(self) -> int:
        return CODES.get(self.code, ("refused", EXIT_REFUSED))[1]


def from_cairn(exc: Any) -> GatewayError:
    """A service refusal in the gateway's terms: the code is kept (agents parse Cairn's codes too)."""
    code = exc.code
    if code in ("INVALID_VALUE", "INVALID_INPUT", "INVALID_KEY", "INVALID_SCOPE", "VALUE_TOO_LARGE"):
        code = "USAGE"
    elif code == "SETUP":
        code = "SETUP"
    return GatewayError(code, exc.message, exc.data or None)


def emit(verb: str, slug: str | None, data: Any = None, error: GatewayError | None = None) -> int:
    """Write the envelope and return the exit code."""
    if error is None:
        env = {"status": "ok", "verb": verb, "slug": slug, "data": data, "reason": None}
        code = EXIT_OK
    else:
        env = {
            "status": error.status,
            "verb": verb,
            "slug": error.slug if error.slug is not None else slug,
            "data": error.data,
            "reason": {"code": error.code, "message": error.message},
        }
        code = error.exit_code
        note(f"memory-gateway {verb}: {error.code}: {error.message}")
    sys.stdout.write(json.dumps(env, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return code


def note(message: str) -> None:
    """A human diagnostic: stderr only, one line, never JSON."""
    sys.stderr.write(message.replace("\n", " ") + "\n")
    sys.stderr.flush()
