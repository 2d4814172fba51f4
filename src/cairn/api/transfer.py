"""The two routes written by hand: an export that can stream, an import that can take a raw file.

They serve the catalogue's ``export`` and ``import_lines`` operations (declared there as
``custom``), whose bodies are not one JSON document: ``Accept: application/x-ndjson`` streams the
export line by line, and an import may arrive as the NDJSON file itself.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from cairn.api.auth import Caller
from cairn.api.guard import MAX_IMPORT_BYTES, NDJSON
from cairn.api.routing import BoundedJsonRoute
from cairn.errors import CairnError
from cairn.service.catalog import operation
from cairn.service.catalog.inputs import ExportQuery, ImportBody
from cairn.service.catalog.outputs import Exported, Imported

EXPORT, IMPORT = operation("export"), operation("import_lines")
assert EXPORT.http is not None and IMPORT.http is not None

router = APIRouter(tags=[EXPORT.http.tag], route_class=BoundedJsonRoute)


@router.get(
    EXPORT.http.path,
    operation_id=EXPORT.http.operation_id,
    name=EXPORT.name,
    response_model=Exported,
    responses={200: {"content": {NDJSON: {"schema": {"type": "string"}}}, "description": "JSON or NDJSON"}},
)
def export(request: Request, query: Annotated[ExportQuery, Query()], p: Caller) -> Any:
    """The lossless JSONL export (the whole tenant needs an unrestricted admin token).

    ``Accept: application/x-ndjson`` streams it line by line (what ``cairn --url … export``
    uses); otherwise the answer is ``{"lines": [...]}``.
    """
    lines = EXPORT.invoke(request.app.state.svc, p, dict(query))  # refusals happen here, before streaming
    if NDJSON in (request.headers.get("accept") or ""):
        return StreamingResponse((line + "\n" for line in lines), media_type=NDJSON)
    return {"lines": list(lines)}


@router.post(
    IMPORT.http.path,
    operation_id=IMPORT.http.operation_id,
    name=IMPORT.name,
    response_model=Imported,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": ImportBody.model_json_schema()},
                NDJSON: {"schema": {"type": "string", "maxLength": MAX_IMPORT_BYTES}},
            },
        }
    },
)
async def import_(
    request: Request,
    p: Caller,
    restore: Annotated[
        bool,
        Query(
            description="An admin's exact restore (trust, authors, counters, times, history), audited as "
            "such; without it lessons land as candidates by the caller, the file's claims kept as claims"
        ),
    ] = False,
) -> dict[str, Any]:
    """Import JSONL (an export, or plain {scope, key, value} records); idempotent.

    As ``application/json`` ``{"lines": [...]}`` up to 256 KiB, or the file itself as
    ``application/x-ndjson`` up to 64 MiB; either way every line is checked before any is written.
    """
    import anyio

    if (request.headers.get("content-type") or "").split(";")[0].strip() == NDJSON:
        try:
            lines = (await request.body()).decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise CairnError("INVALID_INPUT", "the NDJSON body is not UTF-8 text") from None
    else:
        try:
            lines = ImportBody.model_validate(await request.json()).lines
        except ValidationError as exc:
            raise RequestValidationError(exc.errors()) from None
    svc = request.app.state.svc
    return await anyio.to_thread.run_sync(lambda: IMPORT.invoke(svc, p, {"lines": lines, "restore": restore}))
