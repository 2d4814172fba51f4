"""The memory gateway's service side: what a proxied request is given to weigh.

A composed service object (it holds the ``Cairn`` facade it reads through, nothing else), so the
gateway surface calls one method per request and holds no rule: the attribution rule and the block's
shape are ``core.gateway``'s; the context block and recall are the same operations every other
surface calls, with the caller's principal, so tenancy, scope limits and trust apply unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cairn.core.gateway import Attribution, memory_block
from cairn.core.principal import READ, Principal

if TYPE_CHECKING:
    from cairn.service.api import Cairn

# The end of a long user turn holds the failure (recall reads at most this much itself).
RECALL_TEXT_MAX = 8000


@dataclass(frozen=True)
class Memory:
    """What one request gets: the block (``None``: send the request unchanged) and what is in it."""

    block: str | None
    loaded: int
    recalled: int
    scopes: list[str]


class Conversations:
    """Gateway operations over the service facade (one read transaction per call)."""

    def __init__(self, cairn: Cairn) -> None:
        self.cairn = cairn

    def memory(self, principal: Principal, where: Attribution, latest_turn: str | None, *, failed: bool) -> Memory:
        """The context block for ``where`` plus, when the latest user turn ``failed``, recall on it.

        An unknown attribution reads ``global`` only: no project's lessons reach a conversation nobody
        attributed. ``failed`` is the surface's reading of the turn (``hosts.protocols.looks_failed``,
        the one definition hooks use too).
        """
        principal.require(READ)
        ctx: dict[str, Any] = self.cairn.context(principal, repo=where.repo, branch=where.branch, project=where.project)
        recall_text = ""
        recalled = 0
        if failed and latest_turn and latest_turn.strip():
            found = self.cairn.recall(
                principal, latest_turn[-RECALL_TEXT_MAX:], repo=where.repo, branch=where.branch, project=where.project
            )
            recall_text = found["text"]
            recalled = len(found["lessons"])
        block = memory_block(ctx["text"], ctx["loaded"], recall_text)
        return Memory(block, ctx["loaded"] if block else 0, recalled, list(ctx["ladder"]))
