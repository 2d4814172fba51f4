"""One error hierarchy with stable codes, mapped once per surface.

Surfaces never invent codes: the CLI maps ``exit_code`` and the JSON envelope from these, and later
surfaces (HTTP problem+json, MCP tool errors) map the same ``code``. A code is a contract with
agents that parse it, so codes are only ever added, never renamed.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: hooks import this module, and importing typing costs start-up time
if TYPE_CHECKING:
    from typing import Any


# code -> (exit code, envelope status). 1 = refused or invalid input, 2 = setup/environment,
# 3 = a remote Cairn could not be reached (nothing was changed there; try again later).
CODES: dict[str, tuple[int, str]] = {
    "INVALID_SCOPE": (1, "refused"),
    "INVALID_KEY": (1, "refused"),
    "INVALID_VALUE": (1, "refused"),
    "VALUE_TOO_LARGE": (1, "refused"),
    "INVALID_TTL": (1, "refused"),
    "INVALID_TIME": (1, "refused"),
    "INVALID_INPUT": (1, "refused"),
    "NOT_FOUND": (1, "refused"),
    "TOMBSTONED": (1, "refused"),
    "SUPERSEDE_AMBIGUOUS": (1, "refused"),
    "UNAUTHENTICATED": (1, "refused"),  # no or unknown credential (HTTP 401); FORBIDDEN: known but not allowed
    "FORBIDDEN": (1, "refused"),
    "CONFLICT": (1, "refused"),
    "LIMIT": (1, "refused"),
    "AUDIT_BROKEN": (1, "refused"),
    "UNHEALTHY": (1, "refused"),  # `cairn doctor` found a problem; the report is the reason's data
    "SETUP": (2, "error"),
    "INTERNAL": (2, "error"),
    # No answer from a remote Cairn (refused connection, unknown host, timeout): its own exit code, so a
    # script or the daemon's background sync can tell "offline, retry later" from a refusal or a bad setup.
    "UNREACHABLE": (3, "error"),
}


class CairnError(Exception):
    """A failure a caller can act on: a stable ``code``, a human ``message``, optional ``data``."""

    def __init__(self, code: str, message: str, data: dict[str, Any] | None = None) -> None:
        if code not in CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data or {}

    @property
    def exit_code(self) -> int:
        return CODES[self.code][0]

    @property
    def status(self) -> str:
        return CODES[self.code][1]

    def to_reason(self) -> dict[str, Any]:
        reason: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data:
            reason["data"] = self.data
        return reason

    def __repr__(self) -> str:
        return f"CairnError({self.code!r}, {self.message!r})"


def invalid_input(errors: list[dict[str, Any]]) -> CairnError:
    """``INVALID_INPUT`` from a validator's field errors (pydantic's ``errors()`` shape), for every
    surface that validates its arguments with one: where each error is and what is wrong, never the
    rejected value (it may be lesson text)."""
    listed = [
        {"where": ".".join(str(p) for p in e.get("loc", ())) or "input", "problem": e.get("msg", "")} for e in errors
    ]
    first = listed[0] if listed else {"where": "input", "problem": "invalid"}
    return CairnError("INVALID_INPUT", f"{first['where']}: {first['problem']}", {"errors": listed[:20]})
