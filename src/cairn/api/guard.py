"""What every HTTP request passes before any route sees it: the Host/Origin allowlist and the body cap.

Both are plain ASGI middleware in front of the whole application (the API, the dashboard and the
mounted MCP endpoint alike), so a refusal looks the same everywhere: problem+json with a stable code.

* **Host and Origin.** A server on loopback is reachable from any web page the user opens: a page
  on ``evil.example`` whose name is re-pointed at 127.0.0.1 (DNS rebinding) sends requests with
  ``Host: evil.example``, and a page's own requests carry its ``Origin``. The MCP specification
  asks local HTTP servers to check both. Allowed by default: ``localhost``, ``127.0.0.1`` and
  ``[::1]`` on the server's own port; ``--allow-host NAME`` adds a name a deployment is reached by.
* **Body size.** A declared ``Content-Length`` over the cap is refused before a byte of the body is
  read; a chunked body is counted while it streams in and refused the moment it passes the cap.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from cairn.api.problems import MEDIA_TYPE, problem
from cairn.webhooks.github import PAYLOAD_PATH

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
MAX_BODY_BYTES = 256 * 1024  # a lesson value is at most 64 KiB; room for the other fields, not for abuse
# An NDJSON import is one file in one request, so it imports exactly as a local `cairn import` does
# (every line checked before any is written); a bigger backup goes in through the CLI on the host.
MAX_IMPORT_BYTES = 64 * 1024 * 1024
NDJSON = "application/x-ndjson"
IMPORT_PATH = "/v1/import"
# The memory gateway's requests carry whole conversations (long histories, images, documents): the
# providers' own request cap (32 MB at Anthropic), not a lesson's.
GATEWAY_PATHS = frozenset({"/v1/chat/completions", "/v1/messages"})
MAX_GATEWAY_BYTES = 32 * 1024 * 1024
# A GitHub delivery carries more than the comment: the pull request (its description included), the
# repository and the sender. A comment and a PR description are each at most 65,536 characters,
# up to 256 KiB apiece in UTF-8, and the objects around them tens of KiB, so 1 MiB holds any
# delivery of the events Cairn takes with room to spare; GitHub's own ceiling (25 MB) is for
# events Cairn never reads (pushes with thousands of commits), and is refused here unread.
MAX_WEBHOOK_BYTES = 1024 * 1024
# A sync apply carries a batch of another store's events, each up to a lesson's whole state (a
# 64 KiB value and its fields): the sync client pages its batches to fit under this cap
# (``runtime/sync_client.py``), so a batch of ordinary lessons goes in one request, and a bigger one
# is split rather than refused.
SYNC_APPLY_PATH = "/v1/sync/apply"
MAX_SYNC_BYTES = 16 * 1024 * 1024


async def send_problem(
    send: Send, code: str, message: str, data: dict[str, Any] | None = None, headers: Iterable[tuple[str, str]] = ()
) -> None:
    """A complete problem+json response, for middleware that answers before the application runs."""
    import json

    status, body = problem(code, message, data)
    payload = json.dumps(body).encode()
    raw_headers = [(b"content-type", MEDIA_TYPE.encode()), (b"content-length", str(len(payload)).encode())]
    raw_headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": payload})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def split_host(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` (IPv6 in brackets) as (lower-case name, port), or None when it is not one."""
    try:
        parts = urlsplit("//" + value.strip())
        port = parts.port
    except ValueError:
        return None
    name = parts.hostname or ""
    if not name or parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return (f"[{name}]" if ":" in name else name).lower(), port


def host_names(values: Iterable[str]) -> list[str]:
    """``--allow-host`` values, lower-cased; one that is not ``NAME`` or ``NAME:PORT`` is INVALID_INPUT."""
    from cairn.errors import CairnError

    names = []
    for value in values:
        parsed = split_host(value)
        if parsed is None or not value.strip():
            raise CairnError("INVALID_INPUT", f"--allow-host {value!r} is not a host name (NAME or NAME:PORT)")
        name, port = parsed
        names.append(name if port is None else f"{name}:{port}")
    return names


class HostGuard:
    """Refuse (403) a request whose ``Host`` or ``Origin`` names a host not on the allowlist.

    An entry ``NAME`` allows that name on any port (a deployment behind a proxy is reached on
    443 or 80, often without a port in ``Host``); the loopback names are allowed on the port the
    server listens on, or with no port. ``allowed=None`` turns the check off (a server bound to a
    non-loopback address without ``--allow-host``: its callers' names are not known in advance).
    """

    def __init__(self, app: App, allowed: Iterable[str] | None) -> None:
        self.app = app
        self.names = None if allowed is None else {n.strip().lower() for n in allowed if n.strip()}

    def allows(self, value: str, port: int | None) -> bool:
        assert self.names is not None
        parsed = split_host(value)
        if parsed is None:
            return False
        name, given = parsed
        if name in LOOPBACK_NAMES:
            return given is None or given == port
        return name in self.names or (given is not None and f"{name}:{given}" in self.names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.names is None:
            await self.app(scope, receive, send)
            return
        port = (scope.get("server") or (None, None))[1]
        host = _header(scope, b"host")
        origin = _header(scope, b"origin")
        if host is None or not self.allows(host, port):
            await send_problem(
                send,
                "FORBIDDEN",
                f"Host {host!r} is not an allowed name for this server (start it with --allow-host NAME)",
                {"host": host},
            )
            return
        if origin is not None:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or not self.allows(parts.netloc, port):
                await send_problem(
                    send,
                    "FORBIDDEN",
                    f"Origin {origin!r} is not allowed to call this server (start it with --allow-host NAME)",
                    {"origin": origin},
                )
                return
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuse (413) a body over the cap before reading it: by its ``Content-Length`` when declared,
    else by counting the chunks as they arrive (held, then replayed to the application)."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        kind = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
        path = scope.get("path")
        cap = MAX_BODY_BYTES
        if path == IMPORT_PATH and kind == NDJSON:
            cap = MAX_IMPORT_BYTES
        elif path in GATEWAY_PATHS:
            cap = MAX_GATEWAY_BYTES
        elif path == PAYLOAD_PATH:
            cap = MAX_WEBHOOK_BYTES
        elif path == SYNC_APPLY_PATH:
            cap = MAX_SYNC_BYTES
        length = _header(scope, b"content-length")
        if length is not None:
            if not length.strip().isdigit() or int(length) > cap:
                await _too_large(send, cap)
                return
            await self.app(scope, receive, send)
            return
        if not _header(scope, b"transfer-encoding"):
            await self.app(scope, receive, send)  # no body at all
            return
        held: list[Message] = []
        size = 0
        while True:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break  # the client went away: let the application see it
            size += len(message.get("body", b""))
            if size > cap:
                await _too_large(send, cap)
                return
            if not message.get("more_body"):
                break

        async def replay() -> Message:
            return held.pop(0) if held else await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Send, cap: int) -> None:
    await send_problem(send, "VALUE_TOO_LARGE", f"the request body is over {cap} bytes", {"limit": cap})
