"""Who a request acts as: the principal of its bearer token (the one dependency every route takes)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cairn.core.principal import Principal
from cairn.errors import CairnError

BEARER = HTTPBearer(auto_error=False, description="A Cairn token: `cairn token create` (or `cairn user create`)")


def principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
    x_cairn_session: Annotated[str | None, Header(max_length=200)] = None,
) -> Principal:
    """The request's principal, from its bearer token; nothing else in the request names a tenant."""
    secret = credentials.credentials.strip() if credentials else ""
    if not secret:
        raise CairnError("UNAUTHENTICATED", "send Authorization: Bearer <token> (create one: cairn token create)")
    return request.app.state.svc.resolve_token(secret, session=x_cairn_session or None)


Caller = Annotated[Principal, Depends(principal)]
