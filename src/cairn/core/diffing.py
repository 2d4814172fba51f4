"""Diffs between lesson versions, for ``history`` and ``diff``.

A unified diff because people and agents both already read it. Lines are split on ``\\n`` only
(not ``str.splitlines``'s dozen separators) so a stray form feed or U+2028 inside a lesson is shown
as content instead of silently becoming a line break, and a missing final newline is marked the way
git marks it instead of gluing two diff lines together.
"""

from __future__ import annotations

import difflib

NO_NEWLINE_MARKER = "\\ No newline at end of file\n"


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def unified_diff(old: str, new: str, old_label: str, new_label: str) -> str:
    """Unified diff of two values; empty when they are identical."""
    out: list[str] = []
    for line in difflib.unified_diff(_lines(old), _lines(new), fromfile=old_label, tofile=new_label):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + NO_NEWLINE_MARKER)
    return "".join(out)
