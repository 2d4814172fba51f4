"""Registering repositories: the service's rules, the CLI, the HTTP API and the dashboard's Webhooks tab.

Admins only; every change audited with a fingerprint (never the secret); the secret shown once.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from cairn.core.principal import READ, WRITE
from cairn.errors import CairnError
from tests.conftest import run_cli
from tests.web.conftest import Web, csrf_of, web  # noqa: F401 - the fixture, served on both databases


def _api(w: Web, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(w.base + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def _audit_text(w: Web) -> str:
    return json.dumps(w.svc.audit(w.alice_p, limit=1000)["entries"])


def test_the_api_registers_lists_rotates_and_removes_for_admins_only(web: Web) -> None:  # noqa: F811
    status, made = _api(web, "POST", "/v1/webhooks", web.alice, {"repo": "Acme/API-Repo"})
    assert status == 200 and made["repo"] == "acme/api-repo" and made["secret"].startswith("cwh_")
    assert made["path"] == "/v1/webhooks/github?repo=acme/api-repo"
    status, listed = _api(web, "GET", "/v1/webhooks", web.alice)
    assert status == 200 and [w["repo"] for w in listed["webhooks"]] == ["acme/api-repo"]
    assert made["secret"] not in json.dumps(listed)
    status, again = _api(web, "POST", "/v1/webhooks", web.alice, {"repo": "acme/api-repo"})
    assert status == 409 and again["code"] == "CONFLICT"
    status, rotated = _api(web, "POST", "/v1/webhooks/rotate", web.alice, {"repo": "acme/api-repo", "grace": "2h"})
    assert status == 200 and rotated["secret"] != made["secret"] and rotated["previous_secret_valid_until"]
    # Admins only: a read token is refused, and bob's store does not see alice's registration.
    assert _api(web, "POST", "/v1/webhooks", web.reader, {"repo": "acme/other"})[0] == 403
    assert _api(web, "GET", "/v1/webhooks", web.reader)[0] == 403
    assert _api(web, "GET", "/v1/webhooks", web.bob)[1]["webhooks"] == []
    assert _api(web, "POST", "/v1/webhooks/remove", web.bob, {"repo": "acme/api-repo"})[0] == 404
    status, bad = _api(web, "POST", "/v1/webhooks", web.alice, {"repo": "not a repo"})
    assert status == 400 and bad["code"] == "INVALID_INPUT"
    status, gone = _api(web, "POST", "/v1/webhooks/remove", web.alice, {"repo": "acme/api-repo"})
    assert status == 200 and gone["removed"] is True
    audit = _audit_text(web)
    for action in ("webhook.add", "webhook.rotate", "webhook.remove"):
        assert action in audit
    assert made["secret"] not in audit and rotated["secret"] not in audit


def test_the_service_refuses_non_admins_and_scopes_outside_a_token(web: Web) -> None:  # noqa: F811
    writer = web.alice_p.with_tenant(web.alice_p.tenant_id, frozenset({READ, WRITE}))
    with pytest.raises(CairnError) as refused:
        web.svc.webhook_add(writer, "acme/writer")
    assert refused.value.code == "FORBIDDEN"
    limited = web.svc.resolve_token(
        web.svc.token_create(web.alice_p, perm="admin", scope_patterns=["repo::acme/*"], name="narrow")["token"]
    )
    with pytest.raises(CairnError) as outside:
        web.svc.webhook_add(limited, "other/repo")
    assert outside.value.code == "FORBIDDEN"
    with pytest.raises(CairnError) as grace:
        web.svc.webhook_rotate(web.alice_p, "acme/none", grace=__import__("datetime").timedelta(days=30))
    assert grace.value.code == "INVALID_INPUT"


def test_the_dashboard_tab_shows_the_secret_once_and_manages_registrations(web: Web) -> None:  # noqa: F811
    c = web.client()
    assert c.signin(web.alice).status == 303
    page = c.get("/ui/webhooks")
    assert page.status == 200 and "Register a repository" in page.text and ">Webhooks<" in page.text
    made = c.post("/ui/webhooks", {"csrf": csrf_of(page.text), "repo": "acme/dash"})
    assert made.status == 200, made.text
    secret = next(w for w in web.svc.webhook_list(web.alice_p)["webhooks"] if w["repo"] == "acme/dash")
    assert secret  # registered
    shown = made.text.split('id="new-secret" value="', 1)[1].split('"', 1)[0]
    assert shown.startswith("cwh_") and "/v1/webhooks/github?repo=acme/dash" in made.text
    again = c.get("/ui/webhooks")
    assert shown not in again.text and "acme/dash" in again.text
    rotated = c.post("/ui/webhooks/rotate", {"csrf": csrf_of(again.text), "repo": "acme/dash", "grace": "0"})
    assert rotated.status == 200 and shown not in rotated.text and 'id="new-secret"' in rotated.text
    refused = c.post("/ui/webhooks", {"csrf": csrf_of(again.text), "repo": "acme/dash"})
    assert refused.status == 409 and "CONFLICT" in refused.text
    removed = c.post("/ui/webhooks/remove", {"csrf": csrf_of(again.text), "repo": "acme/dash", "next": ""})
    assert removed.status == 303
    assert "acme/dash" not in json.dumps(web.svc.webhook_list(web.alice_p))
    # A read-only session sees no form and its forged POST is refused by the service.
    r = web.client()
    r.signin(web.reader)
    view = r.get("/ui/webhooks")
    assert "Register a repository" not in view.text and "FORBIDDEN" in view.text
    forged = r.post("/ui/webhooks", {"csrf": csrf_of(view.text), "repo": "acme/forged"})
    assert forged.status == 403 and "FORBIDDEN" in forged.text
    assert "acme/forged" not in json.dumps(web.svc.webhook_list(web.alice_p))


def test_the_cli_prints_the_secret_once_and_the_payload_url(cairn_home: Path) -> None:
    env = {"CAIRN_NO_DAEMON": "1"}
    made = run_cli(cairn_home, "--json", "webhook", "add", "acme/cli", "--public-url", "https://cairn.example", env=env)
    assert made.returncode == 0, made.stderr
    data = json.loads(made.stdout)["data"]
    assert data["payload_url"] == "https://cairn.example/v1/webhooks/github?repo=acme/cli"
    human = run_cli(cairn_home, "webhook", "rotate", "acme/cli", "--grace", "1h", env=env)
    assert human.returncode == 0 and human.stdout.splitlines()[0].startswith("cwh_")
    assert "Payload URL:  http://127.0.0.1:8321/v1/webhooks/github?repo=acme/cli" in human.stdout
    listed = run_cli(cairn_home, "webhook", "list", env=env)
    assert listed.returncode == 0 and "acme/cli" in listed.stdout and "previous secret valid until" in listed.stdout
    assert data["secret"] not in listed.stdout and human.stdout.splitlines()[0] not in listed.stdout
    bad = run_cli(cairn_home, "--json", "webhook", "add", "nope", env=env)
    assert bad.returncode == 1 and json.loads(bad.stdout)["reason"]["code"] == "INVALID_INPUT"
    gone = run_cli(cairn_home, "webhook", "remove", "acme/cli", env=env)
    assert gone.returncode == 0 and "removed acme/cli" in gone.stdout
    assert run_cli(cairn_home, "webhook", "remove", "acme/cli", env=env).returncode == 1


def test_the_remote_cli_manages_webhooks_through_the_api(web: Web, cairn_home: Path) -> None:  # noqa: F811
    env = {"CAIRN_URL": web.base, "CAIRN_TOKEN": web.alice, "CAIRN_NO_DAEMON": "1"}
    made = run_cli(cairn_home, "--json", "webhook", "add", "acme/remote", env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    data = json.loads(made.stdout)["data"]
    assert data["payload_url"] == f"{web.base}/v1/webhooks/github?repo=acme/remote"
    rotated = run_cli(cairn_home, "--json", "webhook", "rotate", "acme/remote", "--grace", "0", env=env)
    assert rotated.returncode == 0, rotated.stdout + rotated.stderr
    assert json.loads(rotated.stdout)["data"]["previous_secret_valid_until"] is None  # grace 0: ended now
    assert "acme/remote" in run_cli(cairn_home, "webhook", "list", env=env).stdout
    assert run_cli(cairn_home, "webhook", "remove", "acme/remote", env=env).returncode == 0
    assert "acme/remote" not in json.dumps(web.svc.webhook_list(web.alice_p))
    reader = run_cli(cairn_home, "--json", "webhook", "add", "acme/r", env={**env, "CAIRN_TOKEN": web.reader})
    assert reader.returncode == 1 and json.loads(reader.stdout)["reason"]["code"] == "FORBIDDEN"
