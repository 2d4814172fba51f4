"""The dashboard end to end in a real headless Chromium (Debian's, through Playwright's executable_path).

One SQLite store and one uvicorn for the module, seeded once; each test opens its own browser
context (its own cookie jar). Every check looks at what a person sees and at the store behind it.
The README's screenshots come from the demo store instead (make screenshots).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from cairn.errors import CairnError
from tests.web.conftest import XSS, Web

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)

W = "repo::acme/widget"
BULK = "repo::acme/bulk"
DESKTOP = {"width": 1280, "height": 860}


@dataclasses.dataclass
class Seeded:
    web: Web
    expires_at: float  # monotonic time after which temp-fix has expired


@pytest.fixture(scope="module")
def seeded(web_sqlite: Web) -> Seeded:
    web = web_sqlite
    svc, a = web.svc, web.alice_p
    agent = dataclasses.replace(a, session="sess-7f3a")
    first = "Rebuild with --no-cache after lockfile changes."
    second = "Rebuild with --no-cache after lockfile or base-image changes.\nPin the base image by digest."
    svc.write(agent, W, "docker-cache", first, tags=["docker", "ci"], source_agent="claude-code",
              trigger="docker build: stale layer after npm ci")  # fmt: skip
    svc.write(agent, W, "docker-cache", second)  # an agent's edit: version 2, a candidate again
    svc.write(dataclasses.replace(a, session="sess-9b21"), W, "docker-cache", second)  # a recurrence: version 3
    svc.write(agent, W, "flaky-retry", "Retry flaky billing tests once, then quarantine them.",
              source_agent="codex", trigger="pytest tests/billing failed 2 of 3 runs", tags=["tests"])  # fmt: skip
    svc.write(agent, W, "npm-force", "Use npm install --force to get past peer dependency conflicts.",
              source_agent="cursor", trigger="npm ERR! ERESOLVE unable to resolve dependency tree")  # fmt: skip
    svc.link(a, W, "docker-cache", W, "flaky-retry", "related")
    for i in (1, 2, 3):
        svc.write(agent, BULK, f"bulk-{i}", f"Bulk candidate number {i}: run migrations before seeding.")
    svc.write(a, W, "old-build", "Build with make legacy when the toolchain is older than 2023.")
    svc.archive(a, W, "old-build")
    svc.write(agent, W, "xss-probe", XSS, source_agent="<b>agent</b>")
    svc.write(dataclasses.replace(a, human=True), "global", "commit-style",
              "Write commit subjects in the imperative mood, under 72 characters.", tags=["git"])  # fmt: skip
    svc.write(a, "repo::acme/ro", "ro-target", "A read-only token may look at this but not change it.")
    svc.write(a, W, "temp-fix", "Pin urllib3 below 2 until the proxy is upgraded.", ttl=timedelta(seconds=1))
    svc.write(web.bob_p, "repo::bob/private", "bob-secret", "Bob's own lesson, never shown to alice.")
    svc.write(a, "repo::acme/private", "alice-secret", "Alice's lesson, never shown to bob.")
    return Seeded(web, time.monotonic() + 1.2)


@pytest.fixture
def page_for(browser: Any, seeded: Seeded) -> Iterator[Any]:
    """``page_for(token)``: a new browser context signed in with ``token`` (or not, with None)."""
    contexts: list[Any] = []

    def open_page(token: str | None, viewport: dict[str, int] = DESKTOP) -> Any:
        ctx = browser.new_context(base_url=seeded.web.base, viewport=viewport)
        ctx.set_default_timeout(10_000)
        contexts.append(ctx)
        page = ctx.new_page()
        if token is not None:
            sign_in(page, token)
        return page

    yield open_page
    for ctx in contexts:
        ctx.close()


def sign_in(page: Any, token: str) -> None:
    page.goto("/ui/signin")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui/lessons")


def lesson_path(scope: str, key: str, **extra: Any) -> str:
    tail = "".join(f"&{k}={v}" for k, v in extra.items())
    return f"/ui/lesson?scope={quote(scope)}&key={quote(key)}{tail}"


def flash(page: Any) -> str:
    return page.locator(".flash").inner_text()


def test_sign_in_with_the_keyboard_and_sign_out(page_for: Any, seeded: Seeded) -> None:
    page = page_for(None)
    page.goto("/ui/review")
    assert "/ui/signin" in page.url
    page.get_by_label("Token").fill(seeded.web.alice)  # the token field has focus on arrival
    page.keyboard.press("Enter")
    page.wait_for_url("**/ui/review")  # back where the person was going
    assert page.get_by_role("heading", name="Review queue").is_visible()
    # The first Tab reaches the skip link; following it moves focus to the content.
    page.goto("/ui/lessons")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    assert page.locator("table.lessons").get_by_role("link", name="docker-cache").is_visible()
    assert page.locator("nav[aria-label=Main] a[aria-current=page]").inner_text() == "Lessons"
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies["cairn_ui"]["httpOnly"] and cookies["cairn_ui"]["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # nothing of the session is readable by script
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/ui/signin")
    assert "Signed out." in flash(page)
    page.goto("/ui/lessons")
    assert "/ui/signin" in page.url


def test_review_a_candidate(page_for: Any, seeded: Seeded) -> None:
    page = page_for(seeded.web.alice)
    page.get_by_role("link", name="Review").click()
    row = page.locator("tr", has=page.get_by_role("link", name="flaky-retry"))
    assert "codex" in row.inner_text() and "pytest tests/billing failed" in row.inner_text()  # provenance
    row.get_by_role("button", name=f"Verify {W} flaky-retry").click()
    page.wait_for_load_state()
    assert f"Verified {W} flaky-retry." in flash(page)
    assert page.get_by_role("link", name="flaky-retry").count() == 0
    assert seeded.web.svc.read(seeded.web.alice_p, W, "flaky-retry")["lesson"]["trust"] == "verified"


def test_reject_a_candidate_and_a_later_write_of_its_content_is_refused(page_for: Any, seeded: Seeded) -> None:
    web = seeded.web
    page = page_for(web.alice)
    page.goto("/ui/review")
    page.get_by_label(f"Reason for rejecting {W} npm-force").fill("--force hides real peer conflicts")
    page.get_by_role("button", name=f"Reject {W} npm-force").click()
    page.wait_for_load_state()
    assert f"Rejected {W} npm-force" in flash(page)
    assert page.get_by_role("link", name="npm-force").count() == 0
    page.get_by_role("link", name="Tombstones").click()
    row = page.locator("tr", has_text="npm-force")
    assert "--force hides real peer conflicts" in row.inner_text()
    # The content is refused under any key, in any scope, re-cased: the tombstone holds.
    with pytest.raises(CairnError) as refused:
        web.svc.write(web.alice_p, "global", "npm-tip", "use npm install --force to get past peer dependency conflicts")
    assert refused.value.code == "TOMBSTONED"
    # And its page is gone for readers.
    response = page.goto(lesson_path(W, "npm-force"))
    assert response.status == 404 and page.get_by_role("heading", name="Not found").is_visible()


def test_bulk_verify_with_select_all(page_for: Any, seeded: Seeded) -> None:
    page = page_for(seeded.web.alice)
    page.goto(f"/ui/review?scope={quote(BULK)}")
    assert page.locator("input[name=item]").count() == 3
    page.get_by_label("Select all on this page").check()  # the JS nicety; each box has its own label too
    assert page.locator("input[name=item]:checked").count() == 3
    page.get_by_label("Verify", exact=True).check()
    page.get_by_role("button", name="Apply to selected").click()
    page.wait_for_load_state()
    assert "Verified 3 of 3." in flash(page)
    trusts = {x["key"]: x["trust"] for x in seeded.web.svc.list(seeded.web.alice_p, BULK)["lessons"]}
    assert trusts == {"bulk-1": "verified", "bulk-2": "verified", "bulk-3": "verified"}


def test_compare_two_versions(page_for: Any, seeded: Seeded) -> None:
    page = page_for(seeded.web.alice)
    page.goto("/ui/lessons")
    page.locator("table.lessons").get_by_role("link", name="docker-cache").click()
    page.wait_for_url("**/ui/lesson?**")
    facts = page.locator("dl.facts").all_inner_texts()
    joined = "\n".join(facts)
    assert "claude-code" in joined and "docker build: stale layer" in joined  # source agent and trigger
    assert "sess-7f3a" in joined and "sess-9b21" in joined  # the sessions that wrote and saw it
    assert page.locator("#seen-count").inner_text() == "2"  # recurrence
    assert page.locator("table.versions tbody tr").count() == 3
    assert page.get_by_role("link", name="flaky-retry").count() == 1  # its link
    page.get_by_label("From version").select_option("1")
    page.get_by_label("To version").select_option("3")
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url("**v1=1&v2=3**")
    assert page.get_by_role("heading", name="Changes from v1 to v3").is_visible()
    assert page.locator(".d-del").all_inner_texts() == ["-Rebuild with --no-cache after lockfile changes."]
    assert page.locator(".d-add").all_inner_texts() == [
        "+Rebuild with --no-cache after lockfile or base-image changes.",
        "+Pin the base image by digest.",
    ]
    assert "seen_count" in page.locator("table.fields").inner_text()


def test_restore_an_archived_lesson(page_for: Any, seeded: Seeded) -> None:
    web = seeded.web
    with pytest.raises(CairnError):
        web.svc.read(web.alice_p, W, "old-build")  # archived: hidden from reads
    page = page_for(web.alice)
    page.get_by_role("link", name="Archive").click()
    page.get_by_role("button", name=f"Restore {W} old-build").click()
    page.wait_for_load_state()
    assert f"Restored {W} old-build." in flash(page)
    assert page.get_by_role("link", name="old-build").count() == 0
    assert web.svc.read(web.alice_p, W, "old-build")["lesson"]["status"] == "active"


def test_an_xss_payload_in_a_value_is_rendered_inert(page_for: Any, seeded: Seeded) -> None:
    page = page_for(seeded.web.alice)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    for path in ("/ui/lessons", "/ui/review", lesson_path(W, "xss-probe")):
        page.goto(path)
        assert page.evaluate("typeof window.__pwned") == "undefined", path
        assert page.locator("img").count() == 0, path
    assert page.locator("#lesson-value").inner_text() == XSS  # the literal text, visible as text
    assert page.get_by_text("<b>agent</b>").is_visible()
    page.goto(f"/ui/lessons?q={quote('pwned script')}")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert dialogs == []


def test_a_second_tenant_sees_none_of_the_first_tenants_lessons(page_for: Any, seeded: Seeded) -> None:
    page = page_for(seeded.web.bob)
    table = page.locator("table.lessons")
    assert table.get_by_role("link", name="bob-secret").is_visible()
    body = page.locator("main").inner_text()
    for key in ("docker-cache", "alice-secret", "flaky-retry", "xss-probe"):
        assert key not in body
    response = page.goto(lesson_path("repo::acme/private", "alice-secret"))
    assert response.status == 404
    assert page.get_by_role("heading", name="Not found").is_visible()
    assert "NOT_FOUND" in page.locator(".error-box").inner_text()
    assert "never shown to bob" not in page.content()
    page.goto("/ui/scopes")
    assert "acme" not in page.locator("main").inner_text()


def test_a_read_only_token_sees_no_write_buttons_and_its_forged_posts_are_refused(
    page_for: Any, seeded: Seeded
) -> None:
    web = seeded.web
    before = web.svc.lesson_detail(web.alice_p, "repo::acme/ro", "ro-target")["lesson"]
    page = page_for(web.reader)
    for path in ("/ui/review", lesson_path("repo::acme/ro", "ro-target"), "/ui/archive", "/ui/tombstones"):
        page.goto(path)
        labels = [b.lower() for b in page.locator("main button").all_inner_texts()]
        assert not any(w in " ".join(labels) for w in ("verify", "reject", "archive", "restore", "lift")), path
        assert page.locator("main input[type=checkbox]").count() == 0, path
    page.goto(lesson_path("repo::acme/ro", "ro-target"))
    csrf = page.locator("input[name=csrf]").first.input_value()  # the reader's own, from its sign-out form
    form = {"scope": "repo::acme/ro", "key": "ro-target"}
    no_csrf = page.request.post("/ui/lesson/archive", form=form)
    assert no_csrf.status == 403 and "CSRF" in no_csrf.text()
    for op in ("verify", "archive"):
        forged = page.request.post(f"/ui/lesson/{op}", form={**form, "csrf": csrf})
        assert forged.status == 403 and "FORBIDDEN" in forged.text(), op
    forged = page.request.post("/ui/lesson/reject", form={**form, "csrf": csrf, "reason": "forged"})
    assert forged.status == 403 and "FORBIDDEN" in forged.text()
    after = web.svc.lesson_detail(web.alice_p, "repo::acme/ro", "ro-target")["lesson"]
    assert after == before


def test_expired_scopes_audit_and_tokens_tabs(page_for: Any, seeded: Seeded) -> None:
    time.sleep(max(0.0, seeded.expires_at - time.monotonic()))
    page = page_for(seeded.web.alice)
    page.get_by_role("link", name="Expired").click()
    assert page.get_by_role("link", name="temp-fix").is_visible()
    page.get_by_role("link", name="Scopes").click()
    counts = {x["scope"]: x["active"] for x in seeded.web.svc.scopes(seeded.web.alice_p)["scopes"]}
    row = page.locator("tr", has=page.get_by_role("link", name=W, exact=True))
    assert row.locator("td").first.inner_text() == str(counts[W])
    assert page.locator("#total-active").inner_text() == str(sum(counts.values()))
    page.get_by_role("link", name="Audit").click()
    assert "Chain verified" in page.locator("#chain-status").inner_text()
    page.get_by_label("Lesson scope").fill(W)
    page.get_by_label("Lesson key").fill("docker-cache")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**key=docker-cache**")
    actions = page.locator("table.audit tbody td:nth-child(4)").all_inner_texts()
    assert actions == ["link", "recur", "update", "create"]  # newest first
    page.get_by_role("link", name="Tokens").click()
    page.get_by_label("Name").fill("e2e read token")
    page.get_by_role("button", name="Create token").click()
    secret = page.get_by_label("Secret of token", exact=False).input_value()
    assert secret.startswith("cairn_") and seeded.web.svc.resolve_token(secret).level == "read"
    page.goto("/ui/tokens")
    assert secret not in page.content()


# The controls of the page without a name (label, text or aria-label) and its header cells without a scope.
UNLABELLED = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('input, select, textarea, button')) {
    if (el.type === 'hidden') continue;
    const named = el.tagName === 'BUTTON' ? el.textContent.trim() : (el.labels && el.labels.length);
    if (!named && !el.getAttribute('aria-label')) bad.push(el.outerHTML.slice(0, 80));
  }
  for (const th of document.querySelectorAll('th')) {
    if (!th.getAttribute('scope')) bad.push(th.outerHTML.slice(0, 80));
  }
  return bad;
}"""


def test_every_control_is_labelled_and_every_header_cell_scoped(page_for: Any, seeded: Seeded) -> None:
    page = page_for(seeded.web.alice)
    paths = ["/ui/lessons", "/ui/review", lesson_path(W, "docker-cache", v1=1, v2=2), "/ui/archive", "/ui/expired",
             "/ui/tombstones", "/ui/consolidation", "/ui/scopes", "/ui/audit", "/ui/tokens", "/ui/orgs",
             "/ui/webhooks"]  # fmt: skip
    if not seeded.web.svc.webhook_list(seeded.web.alice_p)["webhooks"]:  # a row, so its controls are checked too
        seeded.web.svc.webhook_add(seeded.web.alice_p, "acme/a11y")
    for path in paths:
        response = page.goto(path)
        assert response.status == 200, path
        assert page.evaluate(UNLABELLED) == [], path
        assert page.locator("h1").count() == 1, path


def test_small_screens_keep_every_tab_reachable(page_for: Any, seeded: Seeded) -> None:
    page = page_for(seeded.web.alice, viewport={"width": 390, "height": 844})
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390  # wide tables scroll inside their own box, not the page
    for name in ("Lessons", "Review", "Orgs"):
        assert page.get_by_role("link", name=name, exact=True).is_visible()


def test_screenshots_of_the_main_pages(page_for: Any, seeded: Seeded, tmp_path: Path) -> None:
    """Renders the main pages at a desktop width (make screenshots does the same for the demo store)."""
    out = tmp_path
    page = page_for(seeded.web.alice)
    shots = {
        "lessons": "/ui/lessons",
        "lesson": lesson_path(W, "docker-cache", v1=1, v2=3),
        "review": "/ui/review",
        "audit": "/ui/audit",
        "scopes": "/ui/scopes",
    }
    for name, path in shots.items():
        page.goto(path)
        target = out / f"dashboard-{name}.png"
        page.screenshot(path=str(target), full_page=True)
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 10_000
