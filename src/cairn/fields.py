"""The field types of the HTTP API's and MCP's schemas: one definition each, for both surfaces.

A schema shows a caller the rules (sizes, enums, patterns); the service checks them. Where the
service's answer is better than a validator's -- ``INVALID_SCOPE`` with the corrected form, the
64 KiB value limit in bytes -- the rule is shown (``json_schema_extra``) and not enforced here, so
an agent gets the same code and message on every surface. Pydantic stays out of ``core``: the
patterns come from there as strings.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from cairn.core.cursor import CURSOR_PATTERN, MAX_CURSOR
from cairn.core.lesson import MAX_TAG_CHARS, MAX_VALUE_BYTES, TAG_CHARS
from cairn.core.scope import BRANCH_PATTERN, NAME_PATTERN, SCOPE_REGEX

Scope = Annotated[
    str,
    Field(
        min_length=1,
        max_length=300,
        json_schema_extra={"pattern": SCOPE_REGEX},
        examples=["repo::acme/widget"],
        description="global | project::NAME | repo::OWNER/REPO | branch::OWNER/REPO::BRANCH",
    ),
]
Key = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        examples=["docker-build-cache"],
        description="short kebab-case topic, e.g. docker-build-cache",
    ),
]
# The 64 KiB limit is in UTF-8 bytes and the service's (VALUE_TOO_LARGE with the size).
Value = Annotated[
    str,
    Field(
        min_length=1,
        json_schema_extra={"maxLength": MAX_VALUE_BYTES},
        description="the lesson: 1-3 sentences of advice",
    ),
]


def _blank_or(pattern: str) -> dict[str, str]:
    """Empty counts as absent (hooks pass unset variables as ""); otherwise what the scope of that rung
    allows. Shown, not enforced: the service refuses with the scope's own code."""
    return {"pattern": rf"^\s*({pattern})?\s*$"}


Repo = Annotated[
    str,
    Field(
        max_length=200,
        json_schema_extra=_blank_or(f"{NAME_PATTERN}/{NAME_PATTERN}"),
        description="OWNER/REPO of the work at hand",
    ),
]
Branch = Annotated[
    str,
    Field(
        max_length=200, json_schema_extra=_blank_or(BRANCH_PATTERN), description="the git branch of the work at hand"
    ),
]
Project = Annotated[str, Field(max_length=200, json_schema_extra=_blank_or(NAME_PATTERN))]
Cursor = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_CURSOR,
        pattern=CURSOR_PATTERN,
        description="next_cursor of the previous page; omit for the first page",
    ),
]
# What the tag normalizer accepts (it lowers the case and strips the spaces).
TAG_PATTERN = rf"^\s*[A-Za-z0-9][{TAG_CHARS}]{{0,{MAX_TAG_CHARS - 1}}}\s*$"
Tag = Annotated[str, Field(max_length=MAX_TAG_CHARS, json_schema_extra={"pattern": TAG_PATTERN})]
_UNITS = "s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|wks?|weeks?"
Duration = Annotated[
    str, Field(max_length=20, examples=["30d"], json_schema_extra={"pattern": rf"^\s*[0-9]+\s*({_UNITS})?\s*$"})
]
NO_NUL = {"pattern": r"^[^\x00]*$"}  # Postgres text cannot hold U+0000: refused on both databases
