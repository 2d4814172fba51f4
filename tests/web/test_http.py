"""The dashboard over plain HTTP, on SQLite and Postgres: sessions, CSRF, refusals, tenancy, escaping.

No browser here: these look at each request and response (status, cookies, headers, the HTML) and
at the store behind them, so a refusal is proven to have changed nothing.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest

from cairn.core.timeparse import FAKE_NOW_ENV, format_time, utcnow
from cairn.errors import CairnError
from tests.web.conftest import XSS, Client, Web, csrf_of

TABS = ("lessons", "review", "archive", "expired", "tombstones", "scopes", "audit", "tokens", "orgs", "webhooks")


def lesson_url(scope: str, key: str, **extra: Any) -> str:
    tail = "".join(f"&{k}={v}" for k, v in extra.items())
    return f"/ui/lesson?scope={quote(scope)}&key={quote(key)}{tail}"


def signed_in(web: Web, token: str) -> Client:
    c = web.client()
    reply = c.signin(token)
    assert reply.status == 303, reply.text
    return c


def state(web: Web, scope: str, key: str) -> tuple[int, str, str]:
    """(version, trust, status) as the store holds it, whatever the lesson's state."""
    lesson = web.svc.lesson_detail(web.alice_p, scope, key)["lesson"]
    return lesson["version"], lesson["trust"], lesson["status"]


def audit_len(web: Web) -> int:
    return len(web.svc.audit(web.alice_p, limit=10_000)["entries"])


def test_every_page_needs_a_session(web: Web) -> None:
    c = web.client()
    for tab in TABS:
        reply = c.get(f"/ui/{tab}")
        assert reply.status == 303, tab
        assert reply.header("location") == f"/ui/signin?next=%2Fui%2F{tab}"
    page = c.get("/ui/signin")
    assert page.status == 200
    assert '<label for="token">Token</label>' in page.text


def test_signin_sets_a_strict_httponly_cookie_and_refuses_bad_tokens(web: Web) -> None:
    c = web.client()
    c.get("/ui/signin")
    csrf = csrf_of(c.get("/ui/signin").text)
    bad = c.post("/ui/signin", {"csrf": csrf, "token": "cairn_not-a-real-token"})
    assert bad.status == 401
    assert "UNAUTHENTICATED" in bad.text and "unknown token" in bad.text
    assert "cairn_ui" not in c.jar

    good = c.post("/ui/signin", {"csrf": csrf, "token": web.alice})
    assert good.status == 303 and good.header("location") == "/ui/lessons"
    (session,) = [k for k in good.cookies() if k.startswith("cairn_ui=")]
    attrs = [a.strip().lower() for a in session.split(";")[1:]]
    assert "httponly" in attrs and "samesite=strict" in attrs and "path=/ui/" in attrs
    assert "secure" not in attrs  # plain http on loopback; https requests get Secure
    page = c.get("/ui/lessons")
    assert page.status == 200
    csp = page.header("content-security-policy")
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert page.header("cache-control") == "no-store"
    assert page.header("x-content-type-options") == "nosniff"
    assert web.alice_name in page.text
    # The token never appears in a page.
    assert web.alice not in page.text


def test_the_signin_form_itself_needs_its_csrf_token(web: Web) -> None:
    c = web.client()
    c.get("/ui/signin")
    reply = c.post("/ui/signin", {"token": web.alice})
    assert reply.status == 403 and "CSRF" in reply.text
    assert "cairn_ui" not in c.jar
    other = web.client()  # another browser's sign-in token does not work with this browser's cookie
    forged = c.post("/ui/signin", {"token": web.alice, "csrf": csrf_of(other.get("/ui/signin").text)})
    assert forged.status == 403 and "cairn_ui" not in c.jar


def test_after_signin_next_goes_back_but_never_off_site(web: Web) -> None:
    c = web.client()
    csrf = csrf_of(c.get("/ui/signin").text)
    reply = c.post("/ui/signin", {"csrf": csrf, "token": web.alice, "next": "/ui/scopes"})
    assert reply.header("location") == "/ui/scopes"
    for evil in ("//evil.example/ui/", "https://evil.example/", "/ui/\\evil", "/elsewhere"):
        c = web.client()
        csrf = csrf_of(c.get("/ui/signin").text)
        reply = c.post("/ui/signin", {"csrf": csrf, "token": web.alice, "next": evil})
        assert reply.header("location") == "/ui/lessons", evil


def test_a_post_without_the_right_csrf_token_is_refused_and_changes_nothing(web: Web) -> None:
    scope, key = "repo::acme/csrf", "csrf-target"
    web.svc.write(web.alice_p, scope, key, "a candidate a forged form must not verify")
    before, seq = state(web, scope, key), audit_len(web)
    c = signed_in(web, web.alice)
    other = signed_in(web, web.alice)  # the same account, another session: its token is not ours
    attempts: list[tuple[dict[str, str], dict[str, str]]] = [
        ({"scope": scope, "key": key}, {}),
        ({"scope": scope, "key": key, "csrf": ""}, {}),
        ({"scope": scope, "key": key, "csrf": "0" * 64}, {}),
        ({"scope": scope, "key": key, "csrf": other.csrf()}, {}),
    ]
    for form, headers in attempts:
        for op in ("verify", "archive"):
            reply = c.post(f"/ui/lesson/{op}", form, headers=headers)
            assert reply.status == 403, (op, form, headers)
            assert "CSRF" in reply.text and "Nothing was changed" in reply.text
    for op in ("verify", "archive"):  # another site's page: the server's Origin check refuses it first
        form = {"scope": scope, "key": key, "csrf": c.csrf()}
        reply = c.post(f"/ui/lesson/{op}", form, headers={"Origin": "https://evil.example"})
        assert reply.status == 403 and "evil.example" in reply.text and '"FORBIDDEN"' in reply.text
    bulk = c.post("/ui/review/bulk", {"op": "reject", "reason": "forged", "item": f"{scope} {key}"})
    assert bulk.status == 403
    assert state(web, scope, key) == before and audit_len(web) == seq
    # The real form works (and proves the attempts above were refused for their token alone).
    ok = c.post("/ui/lesson/verify", {"scope": scope, "key": key, "csrf": c.csrf(), "next": lesson_url(scope, key)})
    assert ok.status == 303 and ok.header("location") == lesson_url(scope, key)
    assert state(web, scope, key)[1] == "verified"
    assert "Verified repo::acme/csrf csrf-target." in c.get(ok.header("location")).text


def test_a_read_only_token_sees_no_write_controls_and_its_forged_posts_get_forbidden(web: Web) -> None:
    scope, key = "repo::acme/ro", "ro-target"
    web.svc.write(web.alice_p, scope, key, "read-only callers may look but not touch")
    web.svc.write(web.alice_p, scope, "ro-archived", "an archived lesson a reader cannot restore")
    web.svc.archive(web.alice_p, scope, "ro-archived")
    web.svc.write(web.alice_p, scope, "ro-gone", "a rejected lesson a reader cannot bring back")
    tomb = web.svc.forget(web.alice_p, scope, "ro-gone", "wrong")["tombstone_id"]
    before, seq = state(web, scope, key), audit_len(web)
    c = signed_in(web, web.reader)
    for path in ("/ui/review", lesson_url(scope, key), "/ui/archive", "/ui/tombstones", "/ui/expired"):
        page = c.get(path)
        assert page.status == 200, path
        assert "data-action" not in page.text, path
        assert 'id="bulk"' not in page.text and "Reason to reject" not in page.text
        assert "/ui/lesson/" not in page.text.replace("/ui/lesson?", "")  # no action URLs at all
    assert "Create a token" not in c.get("/ui/tokens").text
    csrf = c.csrf()  # the reader's own, valid CSRF token (from its sign-out form)
    forged = [
        ("/ui/lesson/verify", {"scope": scope, "key": key}),
        ("/ui/lesson/archive", {"scope": scope, "key": key}),
        ("/ui/lesson/reject", {"scope": scope, "key": key, "reason": "forged"}),
        ("/ui/lesson/restore", {"scope": scope, "key": "ro-archived"}),
        ("/ui/tombstones/lift", {"tombstone_id": str(tomb), "reason": "forged"}),
    ]
    for path, form in forged:
        reply = c.post(path, {**form, "csrf": csrf})
        assert reply.status == 403, path
        assert "FORBIDDEN" in reply.text and "lacks the" in reply.text, path
        assert "CSRF" not in reply.text
    bulk = c.post("/ui/review/bulk", {"csrf": csrf, "op": "verify", "item": f"{scope} {key}"})
    assert bulk.status == 303  # per-item refusals are reported in the flash (next test)
    assert state(web, scope, key) == before and audit_len(web) == seq
    assert state(web, scope, "ro-archived")[2] == "archived"
    assert any(t["id"] == tomb for t in web.svc.tombstones(web.alice_p)["tombstones"])


def test_bulk_refusals_are_reported_in_the_flash(web: Web) -> None:
    scope = "repo::acme/bulkro"
    web.svc.write(web.alice_p, scope, "bulk-ro", "bulk as a reader")
    c = signed_in(web, web.reader)
    form = {"csrf": c.csrf(), "op": "verify", "item": f"{scope} bulk-ro", "next": "/ui/review"}
    reply = c.post("/ui/review/bulk", form)
    assert reply.status == 303 and reply.header("location") == "/ui/review"
    page = c.get("/ui/review").text
    assert "Verified 0 of 1." in page and "FORBIDDEN" in page
    assert state(web, scope, "bulk-ro")[1] == "candidate"


def test_bulk_verify_and_reject(web: Web) -> None:
    scope = "repo::acme/bulk"
    for k in ("bulk-a", "bulk-b", "bulk-c"):
        web.svc.write(web.alice_p, scope, k, f"bulk candidate {k}")
    c = signed_in(web, web.alice)
    csrf = c.csrf("/ui/review")
    items = [f"{scope} bulk-a", f"{scope} bulk-b"]
    reply = c.post("/ui/review/bulk", [("csrf", csrf), ("op", "verify"), *[("item", i) for i in items]])
    assert reply.status == 303
    assert [state(web, scope, k)[1] for k in ("bulk-a", "bulk-b", "bulk-c")] == ["verified", "verified", "candidate"]
    # Rejecting needs a reason: every item is refused by the service, none is rejected.
    reply = c.post("/ui/review/bulk", {"csrf": csrf, "op": "reject", "reason": "", "item": f"{scope} bulk-c"})
    assert "INVALID_INPUT" in c.get("/ui/review").text
    assert state(web, scope, "bulk-c")[1] == "candidate"
    reply = c.post("/ui/review/bulk", {"csrf": csrf, "op": "reject", "reason": "duplicate", "item": f"{scope} bulk-c"})
    assert "Rejected 1 of 1." in c.get(reply.header("location")).text
    with pytest.raises(CairnError) as refused:
        web.svc.write(web.alice_p, "global", "elsewhere", "bulk candidate bulk-c")
    assert refused.value.code == "TOMBSTONED"


def test_a_second_tenant_sees_none_of_the_first_tenants_lessons(web: Web) -> None:
    scope, key, text = "repo::acme/private", "alice-secret", "zanzibar quokka deployment secret"
    web.svc.write(web.alice_p, scope, key, text, tags=["private"])
    before = state(web, scope, key)
    c = signed_in(web, web.bob)
    for path in ("/ui/lessons", f"/ui/lessons?scope={quote(scope)}", "/ui/lessons?tag=private", "/ui/review",
                 "/ui/archive", "/ui/scopes", "/ui/audit", "/ui/tombstones", "/ui/expired"):  # fmt: skip
        page = c.get(path)
        assert page.status == 200, path
        assert key not in page.text and "zanzibar" not in page.text, path
    found = c.get("/ui/lessons?q=zanzibar+quokka+deployment").text
    assert "0 results for" in found and key not in found and "deployment secret" not in found
    assert key in signed_in(web, web.alice).get("/ui/lessons?q=zanzibar+quokka+deployment").text
    assert "acme/private" not in c.get("/ui/scopes").text
    page = c.get(lesson_url(scope, key))
    assert page.status == 404 and "NOT_FOUND" in page.text and text not in page.text
    assert c.get(lesson_url(scope, key, v1=1, v2=1)).status == 404
    csrf = c.csrf()
    for op in ("verify", "archive"):
        reply = c.post(f"/ui/lesson/{op}", {"csrf": csrf, "scope": scope, "key": key})
        assert reply.status == 404 and "NOT_FOUND" in reply.text
    reply = c.post("/ui/lesson/reject", {"csrf": csrf, "scope": scope, "key": key, "reason": "not mine"})
    assert reply.status == 404
    assert state(web, scope, key) == before


def test_revoking_the_token_ends_the_session_on_the_next_request(web: Web) -> None:
    made = web.svc.token_create(web.alice_p, perm="write", name="short-lived")
    c = signed_in(web, made["token"])
    assert c.get("/ui/lessons").status == 200
    web.svc.token_revoke(web.alice_p, made["token_id"])
    reply = c.get("/ui/lessons")
    assert reply.status == 303 and reply.header("location") == "/ui/signin"
    assert "cairn_ui" not in c.jar
    assert "Your session ended" in c.get("/ui/signin").text


def test_signout_clears_the_cookie_and_needs_csrf(web: Web) -> None:
    c = signed_in(web, web.alice)
    assert c.post("/ui/signout", {}).status == 403
    assert c.get("/ui/lessons").status == 200  # the refused sign-out changed nothing
    reply = c.post("/ui/signout", {"csrf": c.csrf()})
    assert reply.status == 303 and reply.header("location") == "/ui/signin"
    assert any(k.startswith("cairn_ui=") and "max-age=0" in k.lower() for k in reply.cookies())
    assert "cairn_ui" not in c.jar
    assert c.get("/ui/lessons").status == 303


def test_values_are_escaped_everywhere(web: Web) -> None:
    scope = "repo::acme/xss"
    web.svc.write(web.alice_p, scope, "xss-probe", XSS, source_agent='<b onmouseover="x()">agent</b>',
                  trigger="<svg onload=alert(1)>", url="javascript:alert(1)")  # fmt: skip
    web.svc.write(web.alice_p, scope, "xss-probe", XSS + "\n<iframe src=x>")
    c = signed_in(web, web.alice)
    for path in ("/ui/lessons", lesson_url(scope, "xss-probe"), lesson_url(scope, "xss-probe", v1=1, v2=2),
                 "/ui/review", "/ui/lessons?q=pwned"):  # fmt: skip
        page = c.get(path).text
        assert "<script>window" not in page and "<img src=x" not in page and "<iframe" not in page, path
        assert "<svg" not in page and "<b onmouseover" not in page, path
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page or "&lt;img" in page, path
    detail = c.get(lesson_url(scope, "xss-probe", v1=1, v2=2)).text
    assert 'href="javascript:' not in detail and "javascript:alert(1)" in detail  # shown, never a link
    assert "+&lt;iframe src=x&gt;" in detail  # the diff is escaped too
    assert re.findall(r"<script[^>]*>", detail) == ['<script src="/ui/static/app.js" defer>']


def test_archive_restore_tombstone_lift_and_expired(web: Web, monkeypatch: pytest.MonkeyPatch) -> None:
    scope = "repo::acme/life"
    web.svc.write(web.alice_p, scope, "to-archive", "archive me then restore me")
    c = signed_in(web, web.alice)
    csrf = c.csrf()
    assert c.post("/ui/lesson/archive", {"csrf": csrf, "scope": scope, "key": "to-archive"}).status == 303
    assert state(web, scope, "to-archive")[2] == "archived"
    page = c.get("/ui/archive").text
    assert "to-archive" in page and "Restore" in page
    assert c.post("/ui/lesson/restore", {"csrf": csrf, "scope": scope, "key": "to-archive"}).status == 303
    assert web.svc.read(web.alice_p, scope, "to-archive")["lesson"]["status"] == "active"

    web.svc.write(web.alice_p, scope, "to-forget", "forget me and lift it")
    tomb = web.svc.forget(web.alice_p, scope, "to-forget", "wrong advice")["tombstone_id"]
    page = c.get("/ui/tombstones").text
    assert "wrong advice" in page and f'name="tombstone_id" value="{tomb}"' in page
    reply = c.post("/ui/tombstones/lift", {"csrf": csrf, "tombstone_id": str(tomb), "reason": ""})
    assert reply.status == 400 and "INVALID_INPUT" in reply.text
    reply = c.post("/ui/tombstones/lift", {"csrf": csrf, "tombstone_id": str(tomb), "reason": "it was right"})
    assert reply.status == 303
    web.svc.write(web.alice_p, "global", "lifted", "forget me and lift it")  # no longer refused
    assert "it was right" in c.get("/ui/tombstones?lifted=1").text

    web.svc.write(web.alice_p, scope, "short-ttl", "only for a day", ttl=timedelta(days=1))
    assert "short-ttl" not in c.get("/ui/expired").text
    monkeypatch.setenv(FAKE_NOW_ENV, format_time(utcnow() + timedelta(days=2)))
    page = c.get("/ui/expired").text
    assert "short-ttl" in page and "only for a day" in page
    assert "short-ttl" not in c.get("/ui/lessons").text
    detail = c.get(lesson_url(scope, "short-ttl"))
    assert detail.status == 200 and "expired" in detail.text


def test_audit_page_filters_and_chain_status(web: Web) -> None:
    scope = "repo::acme/audited"
    web.svc.write(web.alice_p, scope, "audited", "one")
    web.svc.write(web.alice_p, scope, "audited", "two")
    c = signed_in(web, web.alice)
    page = c.get(f"/ui/audit?scope={quote(scope)}&key=audited").text
    assert "Chain verified" in page
    rows = re.findall(r'<th scope="row">(\d+)</th>', page)
    assert len(rows) == 2
    assert c.get("/ui/audit?since=not-a-time").status == 200
    assert "INVALID_TIME" in c.get("/ui/audit?since=not-a-time").text
    reader = signed_in(web, web.reader)
    assert "Chain verified" not in reader.get("/ui/audit").text  # verification is an admin operation


def test_lesson_page_shows_versions_and_diff(web: Web) -> None:
    scope = "repo::acme/diff"
    web.svc.write(web.alice_p, scope, "evolving", "first line\nsecond line")
    web.svc.write(web.alice_p, scope, "evolving", "first line\nsecond line, corrected")
    seen_in = dataclasses.replace(web.alice_p, session="s-42")
    web.svc.write(seen_in, scope, "evolving", "first line\nsecond line, corrected")
    c = signed_in(web, web.alice)
    page = c.get(lesson_url(scope, "evolving", v1=1, v2=2)).text
    assert '<span class="d-del">-second line</span>' in page
    assert '<span class="d-add">+second line, corrected</span>' in page
    assert "s-42" in page  # the session that saw it is part of its provenance
    assert c.get(lesson_url(scope, "evolving", v1=1, v2=99)).status == 200
    assert "has no version 99" in c.get(lesson_url(scope, "evolving", v1=1, v2=99)).text
    assert c.get(lesson_url(scope, "evolving", v1="x", v2=1)).status == 400
    assert c.get("/ui/lesson?scope=repo:acme/diff&key=evolving").status == 400
    assert "INVALID_SCOPE" in c.get("/ui/lesson?scope=repo:acme/diff&key=evolving").text
    assert c.get("/ui/review?cursor=garbage").status == 400


def test_tokens_are_shown_once_and_can_be_revoked(web: Web) -> None:
    c = signed_in(web, web.alice)
    csrf = c.csrf("/ui/tokens")
    reply = c.post("/ui/tokens", {"csrf": csrf, "name": "ci", "perm": "read", "expires": "30d",
                                  "scope_patterns": "repo::acme/*\n"})  # fmt: skip
    assert reply.status == 200 and reply.header("cache-control") == "no-store"
    secret = re.search(r'id="new-token" value="(cairn_[^"]+)"', reply.text).group(1)  # type: ignore[union-attr]
    p = web.svc.resolve_token(secret)
    assert p.level == "read" and p.scope_patterns == ("repo::acme/*",)
    assert secret not in c.get("/ui/tokens").text  # shown once
    bad = c.post("/ui/tokens", {"csrf": csrf, "perm": "superuser"})
    assert bad.status == 400 and "INVALID_INPUT" in bad.text
    assert c.post("/ui/tokens/revoke", {"csrf": csrf, "token_id": str(p.token_id)}).status == 303
    with pytest.raises(CairnError):
        web.svc.resolve_token(secret)


def test_org_members_and_roles(web: Web) -> None:
    slug = "webteam"
    web.svc.org_create(web.alice_p, slug)
    code = web.svc.org_invite(web.alice_p, slug, "member")["code"]
    web.svc.org_accept(web.bob_p, code)
    alice = signed_in(web, web.alice)
    page = alice.get(f"/ui/orgs?org={slug}").text
    assert web.bob_name in page and 'id="role-' in page
    reply = alice.post("/ui/orgs/role", {"csrf": alice.csrf(), "org": slug, "user": web.bob_name, "role": "viewer"})
    assert reply.status == 303
    roles = {m["user"]: m["role"] for m in web.svc.org_members(web.alice_p, slug)["members"]}
    assert roles == {web.alice_name: "owner", web.bob_name: "viewer"}
    bob = signed_in(web, web.bob)
    page = bob.get("/ui/orgs").text
    assert "webteam" in page and 'id="role-' not in page  # a viewer manages nobody
    reply = bob.post("/ui/orgs/remove", {"csrf": bob.csrf(), "org": slug, "user": web.alice_name})
    assert reply.status == 403 and "FORBIDDEN" in reply.text
    assert len(web.svc.org_members(web.alice_p, slug)["members"]) == 2


def test_unknown_pages_and_org_tokens_get_pages_not_json(web: Web) -> None:
    c = signed_in(web, web.alice)
    missing = c.get("/ui/no-such-page")
    assert missing.status == 404 and "text/html" in missing.header("content-type") and "NOT_FOUND" in missing.text
    web.svc.org_create(web.alice_p, "tokenorg")
    org_token = web.svc.token_create(web.alice_p, perm="admin", org="tokenorg")["token"]
    c = signed_in(web, org_token)
    for path in ("/ui/orgs", "/ui/tokens"):
        page = c.get(path)
        assert page.status == 200 and "FORBIDDEN" in page.text, path  # account-wide: the service says no
    assert c.get("/ui/lessons").status == 200


def test_lists_page_with_the_services_cursor(web: Web) -> None:
    scope = "repo::acme/many"
    for i in range(52):
        web.svc.write(web.alice_p, scope, f"many-{i:02d}", f"lesson number {i} of many")
    c = signed_in(web, web.alice)
    first = c.get(f"/ui/lessons?scope={quote(scope)}").text
    keys = re.findall(r">(many-\d\d)</a>", first)
    assert len(keys) == 50 and keys[0] == "many-51"
    link = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', first)
    assert link and "First page" not in first
    second = c.get(link.group(1).replace("&amp;", "&")).text
    assert re.findall(r">(many-\d\d)</a>", second) == ["many-01", "many-00"]
    assert "Next page" not in second and "First page" in second


def test_a_held_lesson_is_marked_in_the_review_queue_and_verify_releases_it(web: Web) -> None:
    """The dashboard shows the tombstone a held lesson resembles (its reason escaped) and its verdicts."""
    scope = "repo::acme/held"
    web.svc.write(web.alice_p, scope, "deploy-key", "The staging deploy key is stored in Vault at ops/deploy/staging.")
    tomb = web.svc.forget(web.alice_p, scope, "deploy-key", f"leaked {XSS}")["tombstone_id"]
    held = web.svc.write(
        web.alice_p, scope, "vault-path", "The deploy key for staging is stored in Vault at ops/deploy/staging."
    )
    assert held["lesson"]["status"] == "held"
    c = signed_in(web, web.alice)
    # The module's server is shared: other tests' candidates may fill the queue's first page.
    page = c.get(f"/ui/review?scope={quote(scope)}").text
    assert "vault-path" in page and f"tombstone {tomb}" in page and "Held:" in page
    assert "<script>window.__pwned" not in page and "&lt;script&gt;" in page
    reply = c.post("/ui/review/bulk", {"csrf": c.csrf("/ui/review"), "op": "verify", "item": f"{scope} vault-path"})
    assert reply.status == 303
    assert state(web, scope, "vault-path")[1] == "verified"
    assert "vault-path" in {x["key"] for x in web.svc.list(web.alice_p, scope)["lessons"]}
