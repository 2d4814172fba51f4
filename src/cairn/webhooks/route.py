"""``POST /v1/webhooks/github`` on ``cairn serve``: GitHub's deliveries in, the service's answer out.

A surface only: the raw body (capped by ``api/guard.BodyLimit`` before it is read) and four headers
go to ``Cairn.webhook_deliver``, which decides everything. What this module adds is the HTTP
mapping GitHub needs: a delivery that could not be stored (a limit, a busy or unreachable
database, anything unexpected) answers 503 so GitHub retries, and is logged by its delivery id
only, never with its text.
"""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse

from cairn.api.problems import MEDIA_TYPE, from_error, problem
from cairn.errors import CairnError
from cairn.webhooks.github import PAYLOAD_PATH, REPO_PATTERN

log = logging.getLogger("cairn.webhooks")
router = APIRouter()
# Answers that mean "not stored, try again": GitHub retries a delivery that got a 5xx.
RETRY_CODES = frozenset({"LIMIT", "CONFLICT", "SETUP", "INTERNAL"})
_SAFE_ID = re.compile(r"[A-Za-z0-9-]{1,64}")


def _loggable(delivery: str | None) -> str:
    return delivery if delivery and _SAFE_ID.fullmatch(delivery) else "(malformed id)"


# Not in the OpenAPI document: GitHub is its only client, it authenticates by signature rather than
# a bearer token, and its contract is GitHub's (docs/webhooks.md), not one a generated client uses.
@router.post(PAYLOAD_PATH, include_in_schema=False)
async def github_delivery(
    request: Request,
    repo: Annotated[
        str | None,
        Query(max_length=200, json_schema_extra={"pattern": REPO_PATTERN}, description="OWNER/NAME registered here"),
    ] = None,
    x_github_event: Annotated[str | None, Header()] = None,
    x_github_delivery: Annotated[str | None, Header()] = None,
    x_hub_signature_256: Annotated[str | None, Header()] = None,
) -> Any:
    """Verify the HMAC over the raw body, then gate, filter and land the comment as a candidate lesson.

    200 with ``outcome`` (``created``, ``recurred``, ``dropped.REASON``, ``ignored``, ``ping``,
    ``duplicate``, ``tombstoned``); 401 when the signature does not verify (an unknown repository
    answers the same); 503 when it could not be stored (GitHub retries).
    """
    svc = request.app.state.svc
    body = await request.body()
    content_type = request.headers.get("content-type")

    def deliver() -> dict[str, Any]:
        return svc.webhook_deliver(  # type: ignore[no-any-return]
            repo=repo,
            event=x_github_event,
            delivery=x_github_delivery,
            signature=x_hub_signature_256,
            body=body,
            content_type=content_type,
        )

    try:
        return await anyio.to_thread.run_sync(deliver)
    except CairnError as exc:
        if exc.code not in RETRY_CODES:
            status, payload = from_error(exc)
            return JSONResponse(payload, status_code=status, media_type=MEDIA_TYPE)
        log.warning("webhook delivery %s not stored: %s", _loggable(x_github_delivery), exc.code)
    except Exception as exc:  # noqa: BLE001 - a delivery is never lost silently: 503, GitHub retries
        log.warning("webhook delivery %s not stored: %s", _loggable(x_github_delivery), type(exc).__name__)
    status, payload = problem("SETUP", "the delivery could not be stored; GitHub will retry it", status=503)
    return JSONResponse(payload, status_code=status, media_type=MEDIA_TYPE, headers={"Retry-After": "60"})
