"""What a command prints: one JSON envelope with ``--json``, readable text otherwise.

Results go to stdout, diagnostics to stderr. In JSON mode stdout carries exactly one envelope
``{"status","verb","data","reason"}`` per invocation, success or not, so an agent can always parse it.

Human text leaves through here and nowhere else, so this is where stored values (lesson text,
reasons, actors) and echoed input (an error message quoting a bad argument) are neutralized for the
terminal: control and bidi characters are shown escaped (``core/neutralize.py``). JSON is exact.
"""

from __future__ import annotations

import json
import sys

from cairn.core.neutralize import for_terminal
from cairn.errors import CairnError

TYPE_CHECKING = False  # see cairn.errors
if TYPE_CHECKING:
    from typing import Any


class Output:
    def __init__(self, json_mode: bool, verb: str) -> None:
        self.json_mode = json_mode
        self.verb = verb
        self.done = False

    def ok(self, data: Any, text: str | None = None) -> None:
        if self.json_mode:
            self._emit({"status": "ok", "verb": self.verb, "data": data, "reason": None})
        elif text:
            text = for_terminal(text)
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        self.done = True

    def fail(self, exc: CairnError) -> None:
        if self.json_mode:
            if not self.done:
                self._emit({"status": exc.status, "verb": self.verb, "data": None, "reason": exc.to_reason()})
        else:
            sys.stderr.write(f"cairn: {exc.code}: {for_terminal(exc.message)}\n")
        self.done = True

    def note(self, text: str) -> None:
        """A diagnostic for a person; never part of the parseable result."""
        sys.stderr.write(for_terminal(text) + "\n")

    def _emit(self, envelope: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(envelope, ensure_ascii=False, default=str) + "\n")
