"""The purge sweeps and the rule for choosing one, for the service and for a client that names it.

A remote client sends the sweep's name, so it must apply the same rule before sending: one
definition here keeps the two from drifting (both refuse alike, with the same message).
"""

from __future__ import annotations

from cairn.core.lesson import SWEEPS
from cairn.errors import CairnError

__all__ = ["SWEEPS", "choose_sweep"]


def choose_sweep(*, expired: bool, archived: bool, older_than: bool) -> str:
    """The one sweep asked for; ``older_than``: a retention was given (the archived sweep's only)."""
    if expired == archived:
        raise CairnError(
            "INVALID_INPUT",
            "choose one sweep: cairn purge --expired, or cairn purge --archived [--older-than 30d]",
        )
    if older_than and not archived:
        raise CairnError("INVALID_INPUT", "--older-than applies to the archived sweep only")
    return "expired" if expired else "archived"
