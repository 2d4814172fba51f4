"""The route class every API endpoint uses: JSON bodies parse through Cairn's bounded parser.

FastAPI parses a JSON body with ``json.loads`` inside its own ``try``: a body nested a few thousand
levels deep or with a 5,000-digit number ends as a bare 400 with FastAPI's text (or, for some
inputs, an unhandled error). Parsing it here first, with :func:`cairn.core.jsonin.loads`, gives the
same ``INVALID_INPUT`` problem+json as every other refusal; FastAPI then reuses the parsed value.

Success bodies go out as the service built them: a response model (``service/catalog/outputs.py``) checks and
documents the answer but adds nothing, so a field the service left out stays out rather than
arriving as ``null`` (the remote CLI and the local one print the same answer).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from cairn.core.jsonin import loads


class BoundedJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads(await self.body())
        return self._json


def _is_json(content_type: str | None) -> bool:
    """FastAPI's own rule for when it parses a body as JSON: no type, ``application/json`` or ``*+json``."""
    if not content_type:
        return True
    kind = content_type.split(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


class BoundedJsonRoute(APIRoute):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Overridden, not defaulted: FastAPI always passes its own default (False) for this.
        kwargs["response_model_exclude_unset"] = True
        super().__init__(*args, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        has_body = self.body_field is not None

        async def bounded(request: Request) -> Response:
            request = BoundedJsonRequest(request.scope, request.receive)
            if has_body and _is_json(request.headers.get("content-type")) and await request.body():
                await request.json()  # refusals raise here, outside FastAPI's catch-all
            return await handler(request)

        return bounded
