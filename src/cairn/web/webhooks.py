"""GitHub webhooks (docs/webhooks.md): registered repositories and their deliveries; add, rotate, remove."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from cairn.api.problems import STATUS
from cairn.errors import CairnError
from cairn.web.deps import Dash, Form, PageView, PostView, View
from cairn.web.handlers import arg, call, field_, next_url, refusal

router = APIRouter()


async def webhooks_view(
    dash: Dash, view: View, created: dict[str, Any] | None = None, status: int = 200, refused: CairnError | None = None
) -> Response:
    org = arg(view, "org", 64) or None
    error = refusal(refused) if refused else None
    rows: list[dict[str, Any]] = []
    orgs: list[dict[str, Any]] = []
    try:
        rows = (await call(dash.svc.webhook_list, view.principal, org=org))["webhooks"]
    except CairnError as exc:  # a non-admin sees why, not an empty list
        error = error or refusal(exc)
    try:
        orgs = (await call(dash.svc.org_list, view.principal))["orgs"]
    except CairnError:
        orgs = []
    origin = f"{view.request.url.scheme}://{view.request.url.netloc}"
    if created is not None:
        created = {**created, "payload_url": origin + created["path"]}
    return dash.render(
        view, "webhooks.html", status=status, rows=rows, orgs=orgs, org=org, created=created, error=error,
        origin=origin,
    )  # fmt: skip


@router.get("/webhooks", response_class=HTMLResponse)
async def webhooks_page(view: PageView, dash: Dash) -> Response:
    """Registered GitHub repositories and what became of their deliveries; add, rotate, remove (admins)."""
    return await webhooks_view(dash, view)


async def webhook_secret(dash: Dash, view: View, form: FormData, rotate: bool) -> Response:
    """Rendered in the POST's response, not redirected: the secret must not outlive this page."""
    repo, org = field_(form, "repo", 200), field_(form, "org", 64) or None
    try:
        if rotate:
            from cairn.service.catalog.calls import webhook_rotate

            values = {"repo": repo, "org": org, "grace": field_(form, "grace", 20) or "24h"}
            created = await call(webhook_rotate, dash.svc, view.principal, values)
        else:
            created = await call(dash.svc.webhook_add, view.principal, repo, org=org)
    except CairnError as exc:
        return await webhooks_view(dash, view, status=STATUS.get(exc.code, 500), refused=exc)
    return await webhooks_view(dash, view, created=created)


@router.post("/webhooks", response_class=HTMLResponse)
async def webhook_add(form: Form, view: PostView, dash: Dash) -> Response:
    return await webhook_secret(dash, view, form, rotate=False)


@router.post("/webhooks/rotate", response_class=HTMLResponse)
async def webhook_rotate(form: Form, view: PostView, dash: Dash) -> Response:
    return await webhook_secret(dash, view, form, rotate=True)


@router.post("/webhooks/remove", response_class=HTMLResponse)
async def webhook_remove(form: Form, view: PostView, dash: Dash) -> Response:
    repo, org = field_(form, "repo", 200), field_(form, "org", 64) or None
    await call(dash.svc.webhook_remove, view.principal, repo, org=org)
    return dash.done(view, next_url(view, form, "/webhooks"), "ok", f"Removed the webhook of {repo}.")
