"""`cairn gateway`: the memory gateway in front of a model provider (docs/gateway.md).

Thin: reads the upstream and the name of the environment variable holding the provider key, builds
the gateway app (``cairn.gateway.app``) over the local store and serves it with uvicorn. The key's
value is read from the environment here and handed to the gateway; it is never printed.
"""

from __future__ import annotations

from typing import Annotated

import typer

DEFAULT_GATEWAY_PORT = 8322  # beside cairn serve's 8321


def gateway(
    upstream: Annotated[
        str | None,
        typer.Option(help="The provider's base URL, e.g. https://api.openai.com or https://api.anthropic.com"),
    ] = None,
    upstream_key_env: Annotated[
        str | None,
        typer.Option(help="Name of the environment variable holding the provider's API key (never a client's)"),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on; loopback unless exposing it")] = "127.0.0.1",
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="Port (default 8322)")] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", envvar="CAIRN_ALLOW_HOSTS", help="A host name clients reach the gateway by"),
    ] = None,
) -> int:
    """Serve the memory gateway: OpenAI (/v1/chat/completions) and Anthropic (/v1/messages) clients
    get their lessons injected by changing only the base URL; their API key is a Cairn token."""
    import uvicorn

    from cairn.api.guard import host_names
    from cairn.cli.app import S, _local_only, svc
    from cairn.gateway.app import configure, create_gateway

    _local_only("cairn gateway")
    service, _p = svc()
    gw = configure(service, upstream, upstream_key_env)
    listen = port or service.settings.gateway_port or DEFAULT_GATEWAY_PORT
    app = create_gateway(gw, allowed_hosts=host_names(allow_host or []))
    S.out.note(f"cairn gateway on http://{host}:{listen} -> {gw.upstream.base} (Ctrl-C stops)")
    uvicorn.run(app, host=host, port=listen, log_level="warning", access_log=False)
    return 0


def register(app: typer.Typer) -> None:
    app.command("gateway")(gateway)
