"""`cairn gateway` and `cairn conversation`: the memory gateway in front of a model provider, and
its conversation ledger (list, show, forget) (docs/gateway.md).

Thin: reads the upstream and the name of the environment variable holding the provider key, builds
the gateway app (``cairn.gateway.app``) over the local store and serves it with uvicorn. The key's
value is read from the environment here and handed to the gateway; it is never printed.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cairn.cli.args import default_to

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


conversation_app = typer.Typer(
    help="The gateway's recorded conversations: list, show, forget (for real).", invoke_without_command=True
)


@conversation_app.command("list")
def conversation_list(limit: Annotated[int, typer.Option(help="At most this many (1-500)")] = 100) -> None:
    """Recorded conversations, most recently active first."""
    from cairn.cli.app import S, svc

    service, p = svc()
    result = service.conversation_list(p, limit=limit)
    lines = [
        f"{c['id']:>6}  {c['updated_at']}  {c['turns']} turn(s), {c['messages']} message(s)  "
        f"{c['repo'] or c['project'] or '-'}  {c['model'] or ''}"
        for c in result["conversations"]
    ]
    S.out.ok(result, "\n".join(lines) if lines else "no conversations recorded")


default_to(conversation_app, conversation_list, None)


@conversation_app.command("show")
def conversation_show(conversation_id: Annotated[int, typer.Argument(min=1, help="the conversation's id")]) -> None:
    """One conversation's kept messages, turn by turn, with message ids (for forget --message)."""
    from cairn.cli.app import S, svc

    service, p = svc()
    c = service.conversation_show(p, conversation_id)
    lines = [f"conversation {c['id']} · {c['turns']} turn(s) · {c['repo'] or c['project'] or '-'}"]
    for m in c["transcript"]:
        lines.append(f"[turn {m['turn']} · message {m['id']} · {m['role']}] {m['content']}")
    for lesson in c["lessons"]:
        lines.append(f"extracted (turn {lesson['turn']}): {lesson['scope']} {lesson['key']} [{lesson['trust']}]")
    S.out.ok(c, "\n".join(lines))


@conversation_app.command("forget")
def conversation_forget(
    conversation_id: Annotated[int | None, typer.Argument(min=1, help="the conversation's id")] = None,
    turn: Annotated[int | None, typer.Option(min=1, help="Forget this turn only")] = None,
    message: Annotated[
        int | None, typer.Option(min=1, help="Forget this message only (ids: conversation show)")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Forget every conversation (the reset)")] = False,
    candidates: Annotated[
        str, typer.Option(help="Candidates drawn only from it: archive (restorable) or purge (erased)")
    ] = "archive",
) -> None:
    """Erase a conversation, a turn or a message everywhere it was copied; tombstones keep it out."""
    from cairn.cli.app import S, svc

    service, p = svc()
    result = service.conversation_forget(
        p, conversation_id, turn=turn, message=message, everything=all_, candidates=candidates
    )
    n_messages = sum(len(c["messages"]) for c in result["conversations"])
    S.out.ok(
        result,
        f"forgot {n_messages} message(s) in {len(result['conversations'])} conversation(s); "
        f"{result['tombstones']} tombstone(s); candidates archived {len(result['archived'])}, "
        f"purged {len(result['purged'])}",
    )


def register(app: typer.Typer) -> None:
    app.command("gateway")(gateway)
    app.add_typer(conversation_app, name="conversation")
