"""The Consolidation tab in a real headless Chromium: plan from the page, apply one action through the
selection form, drop another with its own button, select all; lesson text never runs as script."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import XSS, Web
from tests.web.test_e2e import DESKTOP, UNLABELLED, flash, sign_in

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)

SCOPE = "repo::acme/tidy-ui"


@pytest.fixture(scope="module")
def seeded(web_sqlite: Web) -> Web:
    web, a = web_sqlite, web_sqlite.alice_p
    web.svc.write(a, SCOPE, "pytest-print", "Run pytest with -s to see print output; " + XSS)
    web.svc.write(a, SCOPE, "pytest-output", "Run pytest with -s to see all the print output; " + XSS)
    web.svc.write(a, SCOPE, "system-python", "Use the system python for the release builds in CI.")
    web.svc.write(a, SCOPE, "no-system-python", "Never use the system python for the release builds in CI.")
    return web


def test_plan_apply_and_drop_in_the_browser(browser: Any, seeded: Web) -> None:
    web = seeded
    ctx = browser.new_context(base_url=web.base, viewport=DESKTOP)
    ctx.set_default_timeout(10_000)
    try:
        page = ctx.new_page()
        sign_in(page, web.alice)
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Consolidation").click()
        page.wait_for_url("**/ui/consolidation")
        assert page.get_by_text("No consolidation run yet.").is_visible()
        page.get_by_role("button", name="Plan now").click()
        page.wait_for_url("**/ui/consolidation?run=*")
        assert "Planned run" in flash(page) and "2 action(s)" in flash(page)
        table = page.locator("table.actions")
        merge_row = table.locator("tr", has=page.get_by_role("rowheader", name="merge"))
        flag_row = table.locator("tr", has=page.get_by_role("rowheader", name="flag-contradiction"))
        assert merge_row.get_by_role("link", name="pytest-output").is_visible()
        assert "(kept)" in merge_row.inner_text()
        assert page.evaluate("window.__pwned") is None  # the lessons' text is shown, never run
        assert page.evaluate(UNLABELLED) == []  # every control named, every header cell scoped

        # One action through the selection form (Apply is the default operation).
        merge_row.get_by_role("checkbox").check()
        page.get_by_role("button", name="Do it to the selected").click()
        page.wait_for_load_state()
        assert "Applied 1 action(s)" in flash(page)
        assert "applied" in merge_row.inner_text()
        run = int(page.url.rsplit("run=", 1)[1])
        shown = {a["kind"]: a for a in web.svc.consolidate_show(web.alice_p, run)["actions"]}
        assert shown["merge"]["status"] == "applied" and shown["flag-contradiction"]["status"] == "planned"

        # Another with its own button.
        flag_row.get_by_role("button", name="Drop").click()
        page.wait_for_load_state()
        assert "Dropped 1 action(s)" in flash(page)
        assert web.svc.consolidate_show(web.alice_p, run)["actions"][-1]["status"] == "dropped"
        assert page.get_by_role("button", name="Undo run").is_visible()

        # A new plan proposes the dropped flag again; "select all" (the script's) selects every row.
        page.get_by_role("button", name="Plan now").click()
        page.wait_for_url(f"**/ui/consolidation?run={run + 1}")
        page.get_by_label("Select all planned actions").check()
        boxes = page.locator('input[type="checkbox"][name="position"]')
        assert boxes.count() >= 1 and all(boxes.nth(i).is_checked() for i in range(boxes.count()))
        assert page.evaluate("window.__pwned") is None
    finally:
        ctx.close()
