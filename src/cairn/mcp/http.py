"""The MCP server over streamable HTTP, for mounting in the API at ``/mcp``.

The SDK verifies the bearer token (401 otherwise) through ``resolve_token``; each tool call
resolves it again, so a revoked token stops working mid-session.
"""

from __future__ import annotations

from typing import Any

from cairn.core.principal import Principal
from cairn.errors import CairnError


def mcp_app(svc: Any) -> tuple[Any, Any]:
    """(the server, its ASGI app); the server's session manager must run for the app's lifetime."""
    import anyio
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.transport_security import TransportSecuritySettings

    from cairn.mcp.server import build

    class Tokens:
        async def verify_token(self, token: str) -> AccessToken | None:
            try:
                p = await anyio.to_thread.run_sync(svc.resolve_token, token)
            except CairnError:
                return None
            return AccessToken(token=token, client_id=p.user_id or "", scopes=["cairn"])

    def caller() -> Principal:
        access = get_access_token()
        if access is None:
            raise CairnError("UNAUTHENTICATED", "no bearer token on this request")
        return svc.resolve_token(access.token)

    auth = {
        "token_verifier": Tokens(),
        # The SDK requires an issuer URL; Cairn is its own token issuer and publishes no OAuth metadata.
        "auth": AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None, required_scopes=["cairn"]),
    }
    server = build(svc, caller, auth=auth)
    asgi = server.streamable_http_app(
        streamable_http_path="/",
        stateless_http=True,
        json_response=True,
        # The app's HostGuard checks Host and Origin for every path, /mcp included: one allowlist.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return server, asgi
