"""`cairn sync` and `cairn sync status`: thin commands over ``runtime/sync_client.py`` (docs/sync.md).

The server is ``--url`` (a global flag; else ``CAIRN_URL``, else ``[sync] url`` in config.toml) and
the token ``CAIRN_TOKEN`` (or the variable ``[sync] token_env`` names). Here only the options are
parsed and the summary printed: the exchange, its batches and cursors are the sync client's, and
every rule about what an event does is the sync service's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

sync_app = typer.Typer(
    help="Exchange lessons with a team server (--url URL, else [sync] url; token CAIRN_TOKEN or [sync] "
    "token_env): pull what it has, push what it lacks, in batches, resumable. Offline: exit 3 (UNREACHABLE).",
    invoke_without_command=True,
)
# No bound here: the sync service's (core/sync.py) is checked by the exchange, and importing its
# models would load pydantic for every command's --help.
BATCH = Annotated[
    int | None, typer.Option(min=1, help="feed rows per request (default and most: the sync service's batch)")
]
# Refusals printed under a direction's line; --json has every one.
SHOWN_REFUSALS = 5
PULL_ONLY = Annotated[bool, typer.Option("--pull-only", help="take the server's changes, send none of this store's")]


def register(app: typer.Typer) -> None:
    app.add_typer(sync_app, name="sync")


def _sides(*, need_token: bool = True) -> Any:
    from cairn.cli.app import S, _home
    from cairn.runtime.sync_client import open_sides

    return open_sides(_home(), url=S.g.url, db=S.g.db, cwd=Path.cwd(), need_token=need_token)


@sync_app.callback(invoke_without_command=True)
def sync(ctx: typer.Context, batch: BATCH = None, pull_only: PULL_ONLY = False) -> None:
    """Pull the server's changes into this store, then push this store's to it, in batches with a
    progress bar. A sync cut at any point continues where it stopped; nothing is applied twice.
    Offline: exit 3, UNREACHABLE, and nothing changed."""
    if ctx.invoked_subcommand is not None:
        return
    from cairn.cli import render
    from cairn.cli.app import S
    from cairn.runtime.sync_client import exchange

    local, server = _sides()
    with render.progress(enabled=not S.g.json and sys.stderr.isatty(), label="syncing") as tick:
        seen: dict[str, tuple[int, int]] = {}

        def progress(direction: str, done: int, total: int) -> None:
            seen[direction] = (done, total)  # the pull's rows, then the push's added to them
            if tick:
                tick(sum(d for d, _ in seen.values()), sum(t for _, t in seen.values()))

        result = exchange(local, server, batch=batch, push=not pull_only, progress=progress)
    S.out.ok(result, _summary(result))


@sync_app.command("status")
def sync_status() -> None:
    """Per server: the cursors both ways, what waits to be pulled and pushed, the last exchange and
    both chain heads. Works offline (from what the last exchange recorded)."""
    from cairn.cli.app import S
    from cairn.runtime.sync_client import status

    local, server = _sides(need_token=False)  # what was recorded needs no token
    result = status(local, server)
    S.out.ok(result, _status_text(result))


def _head(head: Any) -> str:
    if not isinstance(head, dict) or not head:
        return "(none)"
    parts = [f"{k} {str(v)[:16]}" for k, v in head.items() if v is not None]
    return ", ".join(parts) or "(none)"


def _direction(name: str, d: dict[str, Any]) -> str:
    if d.get("not_run"):
        return f"{name}: not run ({d['not_run']})"
    text = f"{name}: {d['events']} event(s) in {d['batches']} batch(es): {d['applied']} applied"
    text += f", {d['skipped']} skipped (already here, or nothing here to change)"
    if d["conflicts"]:
        text += f", {d['conflicts']} conflict(s) put in review"
    if d["refused"]:
        text += f", {len(d['refused'])} refused:"
        for r in d["refused"][:SHOWN_REFUSALS]:
            where = f"{r['scope']} {r['key']}: " if r.get("scope") else ""
            text += f"\n  - {r['kind']} {where}{r['code']}: {r['message']}"
        if len(d["refused"]) > SHOWN_REFUSALS:
            text += f"\n  - … {len(d['refused']) - SHOWN_REFUSALS} more (--json lists every one)"
    return text


def _summary(r: dict[str, Any]) -> str:
    kib = {k: v / 1024 for k, v in r["bytes"].items()}
    return "\n".join(
        [
            f"synced with {r['url']} (store {r['server_store']})",
            _direction("pulled", r["pulled"]),
            _direction("pushed", r["pushed"]),
            f"chain heads: here {_head(r['heads']['local'])}; server {_head(r['heads']['server'])}",
            f"moved {kib['received']:.1f} KiB in, {kib['sent']:.1f} KiB out",
        ]
    )


def _status_text(r: dict[str, Any]) -> str:
    if not r["reachable"]:
        recorded = _peer_line(r["peer"]) if r.get("peer") else "no exchange recorded"
        reason = r["reason"]
        why = "unreachable (UNREACHABLE)" if reason["code"] == "UNREACHABLE" else f"not asked ({reason['message']})"
        return f"{r['url']}: {why}; last recorded: {recorded}"
    pending = r["pending"]

    def waiting(n: int, more: bool) -> str:
        return f"{n}{'+' if more else ''} waiting"

    return "\n".join(
        [
            f"{r['url']} (store {r['server_store']}) · {_peer_line(r['peer'])}",
            f"pull: {waiting(pending['pull'], pending['pull_more'])}; "
            f"push: {waiting(pending['push'], pending['push_more'])}"
            + (f" ({pending['push_blocked']})" if pending.get("push_blocked") else ""),
            f"chain heads: here {_head(r['heads']['local'])}; server {_head(r['heads']['server'])}",
        ]
    )


def _peer_line(peer: dict[str, Any]) -> str:
    from cairn.runtime.sync_client import peer_cursors

    pull, push = peer_cursors(peer)
    last = peer.get("last_exchange_at") or "never"
    head = _head(peer.get("peer_head"))
    return f"pulled to {pull}, pushed to {push}, last exchange {last}, server head then {head}"
