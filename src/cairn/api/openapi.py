"""The OpenAPI document says what the server does: bearer auth, problem+json errors, names people pick.

FastAPI's generated document promises a ``422`` with its own validation body on every operation,
which this server never sends (every refusal is ``application/problem+json`` with a stable code,
``400`` for invalid input), and names operations ``write_v1_lessons_post``. :func:`install`
replaces the generator's output with the truth: the ``Problem`` schema under each error status an
operation can answer, and no ``422``. Operation ids are the catalogue's (``service/catalog``).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field

from cairn.api.problems import MEDIA_TYPE

ERROR_STATUSES = {
    "400": "Invalid input (INVALID_INPUT, INVALID_SCOPE, INVALID_KEY, INVALID_TTL, ...), with the corrected form "
    "in data.corrected where there is one",
    "401": "No bearer token, or an unknown, expired or revoked one (UNAUTHENTICATED)",
    "403": "The token may not do this (FORBIDDEN), or a Host/Origin not on the allowlist",
    "404": "No such lesson, tombstone, org, member or token in this token's store (NOT_FOUND)",
    "409": "Refused by the current state: TOMBSTONED, CONFLICT, SUPERSEDE_AMBIGUOUS, AUDIT_BROKEN",
    "413": "The body or a value is over its size limit (VALUE_TOO_LARGE; a value's limit is in UTF-8 bytes)",
    "429": "A tenant limit was reached (LIMIT)",
}


class Problem(BaseModel):
    """RFC 9457 problem details, with Cairn's stable ``code`` (the field agents branch on)."""

    type: str = Field(examples=["https://cairn.dev/problems/invalid-scope"])
    title: str = Field(description="the code again, for generic problem+json readers")
    status: int = Field(ge=400, le=599)
    code: str = Field(examples=["INVALID_SCOPE"], description="stable: codes are added, never renamed")
    detail: str = Field(description="what is wrong and, where there is one, the corrected form")
    data: dict[str, Any] | None = Field(None, description="details, e.g. corrected, errors, limit")


def operation_id(route: APIRoute) -> str:
    """A route without a declared id (every catalogue route has one: ``Http.operation_id``)."""
    return route.name


def install(app: FastAPI) -> None:
    """Replace ``app.openapi`` with the generator's document corrected as described above."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes, tags=app.openapi_tags
        )
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        schemas["Problem"] = Problem.model_json_schema()
        ref = {"$ref": "#/components/schemas/Problem"}
        for item in doc.get("paths", {}).values():
            for op in item.values():
                responses = op.setdefault("responses", {})
                responses.pop("422", None)
                if not op.get("security"):
                    continue  # the health check: no token, no body, nothing to refuse
                for status, description in ERROR_STATUSES.items():
                    responses[status] = {"description": description, "content": {MEDIA_TYPE: {"schema": ref}}}
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]
