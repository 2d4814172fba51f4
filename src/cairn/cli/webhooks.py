"""`cairn webhook add | list | rotate | remove`: thin commands over service/webhooks.py.

The secret is printed once, on stdout (``--json``: ``data.secret``), with the payload URL to paste
into GitHub; ``list`` never shows it. docs/webhooks.md has the setup and the delivery rules.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cairn.cli.args import default_to

webhook_app = typer.Typer(
    help="GitHub webhooks: review comments become candidate lessons (admins).", invoke_without_command=True
)
REPO = Annotated[str, typer.Argument(help="the GitHub repository, OWNER/REPO")]
ORG = Annotated[str | None, typer.Option(help="the org whose store it writes to (its admins); default: yours")]
PUBLIC_URL = Annotated[
    str | None,
    typer.Option(
        "--public-url",
        envvar="CAIRN_PUBLIC_URL",
        help="the address GitHub reaches this server at, e.g. https://cairn.example.com (for the payload URL)",
    ),
]


def _svc() -> tuple[Any, Any]:
    from cairn.cli.app import svc

    return svc()


def _ok(data: dict[str, Any], text: str) -> None:
    from cairn.cli.app import S

    S.out.ok(data, text)


def _payload_url(service: Any, public_url: str | None, path: str) -> str:
    """The server's public address (or the --url it was reached at, else the local default) + path."""
    from cairn.daemon.server import DEFAULT_HTTP_PORT

    base = public_url or getattr(getattr(service, "http", None), "url", None) or f"http://127.0.0.1:{DEFAULT_HTTP_PORT}"
    return base.rstrip("/") + path


def _secret_text(r: dict[str, Any], url: str, verb: str) -> str:
    return (
        f"{r['secret']}\n{verb} {r['repo']} in {r['tenant']}; on GitHub (Settings → Webhooks) set\n"
        f"  Payload URL:  {url}\n  Content type: application/json\n  Secret:       the line above "
        "(shown only now)\n  Events:       pull request review comments, reviews, review threads, issue comments"
    )


@webhook_app.command("add")
def webhook_add(repo: REPO, org: ORG = None, public_url: PUBLIC_URL = None) -> None:
    """Register a repository; prints its secret once and the payload URL to paste into GitHub."""
    service, p = _svc()
    r = service.webhook_add(p, repo, org=org)
    url = _payload_url(service, public_url, r["path"])
    _ok({**r, "payload_url": url}, _secret_text(r, url, "registered"))


@webhook_app.command("list")
def webhook_list(org: ORG = None) -> None:
    """Registered repositories with their delivery counts by outcome and drop reason (never a secret)."""
    service, p = _svc()
    r = service.webhook_list(p, org=org)
    if not r["webhooks"]:
        _ok(r, f"no webhooks in {r['tenant']} (cairn webhook add OWNER/REPO)")
        return
    lines = []
    for w in r["webhooks"]:
        counts = ", ".join(f"{k} {v}" for k, v in w["counts"].items()) or "no deliveries yet"
        grace = (
            f"; previous secret valid until {w['previous_secret_valid_until']}"
            if w.get("previous_secret_valid_until")
            else ""
        )
        lines.append(f"{w['repo']}  ({w['scope']}, since {w['created_at']}{grace})\n  {counts}")
    _ok(r, "\n".join(lines))


default_to(
    webhook_app, lambda: webhook_list(None), "The registered repositories (subcommands: add, list, rotate, remove)."
)


@webhook_app.command("rotate")
def webhook_rotate(
    repo: REPO,
    org: ORG = None,
    grace: Annotated[
        str, typer.Option(help="how long the previous secret keeps verifying (e.g. 24h; 0 ends it now)")
    ] = "24h",
    public_url: PUBLIC_URL = None,
) -> None:
    """A new secret, printed once; the previous one keeps verifying for the grace period."""
    from cairn.service.catalog.calls import webhook_rotate as rotate

    service, p = _svc()
    r = rotate(service, p, {"repo": repo, "org": org, "grace": grace})
    url = _payload_url(service, public_url, r["path"])
    until = r.get("previous_secret_valid_until")
    text = _secret_text(r, url, "rotated") + (f"\nthe previous secret verifies until {until}" if until else "")
    _ok({**r, "payload_url": url}, text)


@webhook_app.command("remove")
def webhook_remove(repo: REPO, org: ORG = None) -> None:
    """Unregister a repository: its deliveries are refused from now on; its lessons stay."""
    service, p = _svc()
    r = service.webhook_remove(p, repo, org=org)
    _ok(r, f"removed {r['repo']} from {r['tenant']}")


def register(app: typer.Typer) -> None:
    app.add_typer(webhook_app, name="webhook")
