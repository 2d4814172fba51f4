"""The source explains itself: no comment or docstring points at an issue number or a design document
that lives outside the repository (a reader of the code has neither); figures go to bench/README.md."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cairn"
OUTSIDE = re.compile(r"\b[Ii]ssues? #?[0-9]|\b[Ss]eeds? 0[0-9]{2}|\bDESIGN(\.md)?\b|§(?!\d+\.\d+\.\d+)")


def test_no_source_file_cites_an_issue_a_seed_or_the_design_document() -> None:
    found = [
        f"{path.relative_to(SRC)}:{n}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not found, "\n".join(found)


def test_the_check_sees_what_it_is_meant_to_refuse() -> None:
    for line in ("# see issue 6", "(seed 000's hole)", "(DESIGN §4)", "DESIGN.md section 2", "issues 5 and 6"):
        assert OUTSIDE.search(line), line
    assert not OUTSIDE.search("(RFC 9110 §7.6.1)") and not OUTSIDE.search("the lesson's seed value")
