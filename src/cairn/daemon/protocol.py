"""The local socket protocol: where the socket lives and how a request is framed. Standard library only.

One request per connection: the client writes one JSON object and a newline, the daemon answers
with one JSON object and a newline and closes. JSON lines keep the client a few dozen lines of
stdlib (hooks import nothing heavy) and are trivial to inspect with ``socat``.

The socket is a Unix domain socket in the Cairn home (mode 0600 in a 0700 directory), so only the
owner's processes can connect; the daemon also checks the peer's uid (SO_PEERCRED) and refuses
anyone else. The daemon therefore trusts what a request says about its actor and session exactly as
far as the in-process CLI trusts its own environment: both are the same OS user.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # see cairn.errors
if TYPE_CHECKING:
    from typing import Any

PROTOCOL = 1
SOCKET_NAME = "cairn.sock"
PID_NAME = "cairn.pid"
MAX_MESSAGE = 8 * 1024 * 1024
# Said by whichever side finds a recall without text (the CLI, the daemon, the in-process fallback).
NO_FAILURE_TEXT = 'no failure text: cairn recall "TEXT", --text TEXT, or pipe the output on stdin'
_AF_UNIX_PATH_MAX = 100  # sun_path is 108 bytes on Linux, 104 on macOS; keep a margin


def socket_path(home: str | os.PathLike[str]) -> str:
    """``<home>/cairn.sock``, or a per-user temp path when the home's path is too long for AF_UNIX.

    Strings, not ``pathlib``: this runs in every hook process, where each import is paid again.
    """
    path = os.path.join(os.fspath(home), SOCKET_NAME)
    if len(os.fsencode(path)) <= _AF_UNIX_PATH_MAX:
        return path
    import hashlib
    import tempfile

    digest = hashlib.sha256(os.fsencode(os.path.realpath(os.fspath(home)))).hexdigest()[:20]
    return os.path.join(tempfile.gettempdir(), f"cairn-{os.getuid()}", f"{digest}.sock")


def peer_uid(sock: Any) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (Linux ``SO_PEERCRED``);
    None where the platform lacks it."""
    import socket
    import struct

    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def served_by_owner(sock: Any) -> bool:
    """Whether the daemon this client reached runs as this user. A client hands the daemon its whole
    environment (tokens, keys) and its descriptors, so a socket another user placed where the daemon's
    would be (a long home's socket lives in the shared temp directory) must get nothing."""
    uid = peer_uid(sock)
    return uid is None or uid == os.getuid()


def daemon_off() -> bool:
    """``CAIRN_NO_DAEMON``: set to anything but an off word (``0``, ``false``, ``no``, ``off``), every
    command runs in its own process and none starts a daemon."""
    return os.environ.get("CAIRN_NO_DAEMON", "").strip().lower() not in ("", "0", "false", "no", "off")


def newer(version: str, than: str) -> bool:
    """Whether Cairn ``version`` is newer than ``than``, comparing their leading numbers (``0.10.0`` >
    ``0.9.2``); what cannot be read as numbers counts as not newer. Standard library only."""

    def numbers(v: str) -> tuple[int, ...]:
        out = []
        for part in v.split("."):
            digits = part[: len(part) - len(part.lstrip("0123456789"))]
            if not digits:
                break
            out.append(int(digits))
        return tuple(out)

    a, b = numbers(version), numbers(than)
    return bool(a) and bool(b) and a > b


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, default=str).encode("utf-8") + b"\n"


def decode(raw: bytes) -> dict[str, Any]:
    """One message; bad input (not UTF-8, not JSON, too deep, a huge number, not an object) is INVALID_INPUT."""
    from cairn.core.jsonin import loads
    from cairn.errors import CairnError

    message = loads(raw, "the request")
    if not isinstance(message, dict):
        raise CairnError("INVALID_INPUT", "the request is not a JSON object")
    return message


def read_message(sock: Any) -> bytes:
    chunks = []
    size = 0
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n"):
            break
        if size > MAX_MESSAGE:
            raise ValueError("message too large")
    return b"".join(chunks)


# A whole command line forwarded to the daemon (``cairn.runtime.forward``): argv, environment, cwd,
# umask and the caller's stdin/stdout/stderr file descriptors (SCM_RIGHTS), run by the daemon's warm
# process exactly as ``cairn`` would run it here.
FORWARD_OP = "cli"
# Verbs that always run in the caller's process: the daemon itself and long-lived servers, the peer
# tool's command line, the host hooks and the hot paths that already ask the daemon per operation
# (``context``/``recall`` through ``cairn.runtime.client``), and doctor (it inspects this machine as the
# caller sees it, the daemon included), and sync (it waits on the network, not on a cold store, and
# stopping the command must stop the exchange).
LOCAL_VERBS = frozenset(
    {"serve", "gateway", "mcp", "memory-gateway", "hook", "install", "context", "recall", "doctor", "sync",
     "--version", "-V"}
)  # fmt: skip
# Environment that names what the daemon itself serves: a caller whose value differs (another
# embedding model, a pinned clock) is not served by it and runs in its own process.
IDENTITY_ENV = ("CAIRN_EMBED_MODEL", "CAIRN_FAKE_NOW", "CAIRN_DATABASE_URL")
