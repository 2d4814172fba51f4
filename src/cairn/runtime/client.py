"""Reach the service from a short-lived process: through the local daemon if it runs, else in-process.

Hooks and ``cairn context``/``cairn recall`` call ``call``. Importing this module costs only the
standard library: when ``cairn serve`` is up the answer arrives over its socket in milliseconds and
the process never loads SQLAlchemy, numpy or the embedding model. When it is down (no socket,
connection refused) the same operation runs in this process (``cairn.daemon.ops``), slower but
identical. ``CAIRN_NO_DAEMON=1`` forces the in-process path (benchmarks measure both).
"""

from __future__ import annotations

import contextlib
import os
import socket

from cairn.daemon import protocol
from cairn.errors import CairnError
from cairn.runtime.home import database_choice, home_dir

TYPE_CHECKING = False  # see cairn.errors
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

CONNECT_TIMEOUT = 0.5
_NOT_SETTINGS = ("CAIRN_TOKEN",)  # never sent: a token names its caller, and the daemon serves only its owner
# The first context after the daemon starts loads the ranking index, which grows with the store.
ANSWER_TIMEOUT = float(os.environ.get("CAIRN_DAEMON_TIMEOUT") or 60)


def _actor() -> str | None:
    """The caller's ``CAIRN_ACTOR``; None lets the daemon use the OS user (it is the same user)."""
    return os.environ.get("CAIRN_ACTOR") or None


def ask_daemon(home: str | Path, message: dict[str, Any]) -> dict[str, Any] | None:
    """The daemon's answer, or None when no daemon listens for this home."""
    path = protocol.socket_path(home)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError, TimeoutError, OSError):
            return None
        if not protocol.served_by_owner(sock):
            return None  # another user's socket where ours would be: ask it nothing
        sock.settimeout(ANSWER_TIMEOUT)
        try:
            raw = exchange(sock, protocol.encode(message))
        except TimeoutError:
            raise CairnError("INTERNAL", f"the Cairn daemon did not answer within {ANSWER_TIMEOUT:.0f}s") from None
        except OSError:
            return None  # it went away mid-request: do the work here instead
        if not raw:
            return None
        return protocol.decode(raw)
    finally:
        sock.close()


def exchange(sock: socket.socket, request: bytes) -> bytes:
    """Write one request and read the answer, even when the peer answered and closed before reading it.

    A daemon that refuses a connection may say so at once; the write then fails with a broken pipe
    while the refusal already waits in the receive buffer, and that answer is what the caller needs.
    """
    # On a broken pipe, read whatever the peer said before it closed; no answer reads as b"".
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(request)
    return protocol.read_message(sock)


def call(
    op: str,
    params: dict[str, Any],
    *,
    home: str | Path | None = None,
    session: str | None = None,
    human: bool = False,
    db: str | None = None,
    url: str | None = None,
) -> dict[str, Any]:
    """Run ``op`` and return its data, or raise ``CairnError`` with the service's code.

    ``db`` is a database URL (``--db``); without it ``CAIRN_DATABASE_URL``, else the home's SQLite
    file. The daemon answers only for the database it serves; for any other the work runs here.
    ``url`` (``--url``, else ``CAIRN_URL``) sends it to a remote Cairn's HTTP API instead.
    """
    session = session or os.environ.get("CAIRN_SESSION") or None
    remote = None
    if (url or "").strip() or os.environ.get("CAIRN_URL", "").strip():  # the local path never loads the client
        from cairn.runtime.remote import configured_url

        remote = configured_url(url)
    if remote is not None:
        if (db or "").strip():
            raise CairnError("INVALID_INPUT", "give --db (a database) or --url (a Cairn server), not both")
        data = remote_call(remote, op, params, session)
        data["served_by"] = "remote"
        return data
    home_path = home_dir(home)
    db = database_choice(db)
    # The caller's settings overrides travel with the call: the daemon's own environment is not the caller's.
    params = {
        **params,
        "env": {k: v for k, v in os.environ.items() if k.startswith("CAIRN_") and k not in _NOT_SETTINGS},
    }
    # A token names its own account and tenant: the local daemon serves its owner's local
    # principal only, so a token's request is resolved and served here (remote tokens go to the
    # HTTP server).
    if not protocol.daemon_off() and not os.environ.get("CAIRN_TOKEN", "").strip():
        message = {
            "v": protocol.PROTOCOL, "op": op, "params": params,
            "actor": _actor(), "session": session, "human": human, "db": db, "version": _version(),
        }  # fmt: skip
        answer = ask_daemon(home_path, message)
        # Another database, or a daemon of another Cairn version (left running across an upgrade): not its to answer.
        if answer is not None and not answer.get("other_db") and not answer.get("other"):
            if answer.get("ok"):
                data = answer["data"]
                data["served_by"] = "daemon"
                return data
            err = answer.get("error") or {}
            code = err.get("code") if err.get("code") in _codes() else "INTERNAL"
            raise CairnError(code, err.get("message") or "the daemon refused the request", err.get("data"))
    data = in_process(op, params, home_path, session, human, db)
    data["served_by"] = "process"
    return data


def _version() -> str:
    from cairn import __version__  # a constant in the package's __init__: nothing else loads

    return __version__


def remote_call(url: str, op: str, params: dict[str, Any], session: str | None) -> dict[str, Any]:
    """The hot-path operations against a remote Cairn: the working context (git checkout of
    ``cwd``) is found here, where the checkout is; the server ranks with its own settings."""
    from cairn.daemon.ops import OPS, where
    from cairn.runtime.remote import RemoteCairn

    if op not in OPS or op == "ping":
        raise CairnError("INVALID_INPUT", f"unknown operation {op!r} for a remote Cairn")
    svc = RemoteCairn(url, os.environ.get("CAIRN_TOKEN", "").strip(), session)
    repo, branch, project, _ = where(params)
    if op == "context":
        opts = {k: params.get(k) for k in ("task", "max_chars", "loop_cap")}
        return svc.context(None, repo=repo, branch=branch, project=project, **opts)
    text = params.get("text")
    if not isinstance(text, str) or not text.strip():
        raise CairnError("INVALID_INPUT", protocol.NO_FAILURE_TEXT)
    return svc.recall(None, text[-8000:], scopes=params.get("scopes"), repo=repo, branch=branch, project=project)


def _codes() -> dict[str, Any]:
    from cairn.errors import CODES

    return CODES


def in_process(
    op: str, params: dict[str, Any], home: str, session: str | None, human: bool, db: str | None = None
) -> dict[str, Any]:
    from pathlib import Path

    from cairn.daemon import ops
    from cairn.runtime.local import open_service, principal_for

    cwd = Path(params["cwd"]) if params.get("cwd") else None
    svc = open_service(Path(home), cwd=cwd, db=db)
    principal = principal_for(svc, session=session, human=human)
    return ops.run(svc, principal, Path(home), op, params)
