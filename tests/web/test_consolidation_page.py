"""The dashboard's Consolidation tab over real HTTP, on both databases: plan, one action applied and
one dropped from the page, undo, what is escaped, and every refusal (no CSRF, read-only token,
another tenant's run, a bad operation, nothing selected)."""

from __future__ import annotations

import re

import pytest

from cairn.errors import CairnError
from tests.web.conftest import XSS, Web
from tests.web.test_http import signed_in

SCOPE = "repo::acme/tidy"
DUP = "Run pytest with -s to see print output; " + XSS
DUP_AGAIN = "Run pytest with -s to see all the print output; " + XSS
USE = "Use the system python for the release builds in CI."
NEVER = "Never use the system python for the release builds in CI."


@pytest.fixture(scope="module")
def seeded(web: Web) -> Web:
    a = web.alice_p
    web.svc.write(a, SCOPE, "pytest-print", DUP)
    web.svc.write(a, SCOPE, "pytest-output", DUP_AGAIN)
    web.svc.write(a, SCOPE, "system-python", USE)
    web.svc.write(a, SCOPE, "no-system-python", NEVER)
    return web


def _position(page: str, kind: str) -> int:
    """The position of the first action of ``kind`` on the page (its row's id)."""
    for row in page.split('<tr id="action-')[1:]:
        position, _, rest = row.partition('"')
        if f'<th scope="row">{kind}' in rest.split("</tr>", 1)[0]:
            return int(position)
    raise AssertionError(f"no {kind} action on the page")


def test_plan_apply_one_drop_one_and_undo_from_the_page(seeded: Web) -> None:
    web = seeded
    c = signed_in(web, web.alice)
    empty = c.get("/ui/consolidation")
    assert empty.status == 200 and "No consolidation run yet." in empty.text and "Plan now" in empty.text
    assert 'aria-current="page">Consolidation<' in empty.text  # the tab is in the nav bar and marked
    planned = c.post("/ui/consolidation/plan", {"csrf": c.csrf("/ui/consolidation")})
    assert planned.status == 303
    run = int(re.search(r"run=(\d+)", planned.header("location")).group(1))
    page = c.get(f"/ui/consolidation?run={run}")
    assert page.status == 200
    assert "Planned run" in page.text  # the flash
    assert "pytest-print" in page.text and "pytest-output" in page.text and "no-system-python" in page.text
    assert "see all the print output" in page.text  # each lesson's text, to judge the action by
    assert "<script>window.__pwned" not in page.text and "&lt;script&gt;" in page.text  # escaped, never markup
    merge, flag = _position(page.text, "merge"), _position(page.text, "flag-contradiction")
    assert web.svc.read(web.alice_p, SCOPE, "pytest-print")["lesson"]["status"] == "active"  # a plan changes nothing

    csrf = c.csrf(f"/ui/consolidation?run={run}")
    applied = c.post(
        "/ui/consolidation/actions", {"csrf": csrf, "run": str(run), "op": "apply", "position": str(merge)}
    )
    assert applied.status == 303 and f"run={run}" in applied.header("location")
    shown = {a["position"]: a for a in web.svc.consolidate_show(web.alice_p, run)["actions"]}
    assert shown[merge]["status"] == "applied" and shown[flag]["status"] == "planned"
    kept = shown[merge]["keep"]["key"]
    gone = next(x["key"] for x in shown[merge]["lessons"] if x["key"] != kept)
    with pytest.raises(CairnError) as archived:
        web.svc.read(web.alice_p, SCOPE, gone)
    assert archived.value.code == "NOT_FOUND" and archived.value.data["superseded_by"]["key"] == kept

    dropped = c.post("/ui/consolidation/actions", {"csrf": csrf, "run": str(run), "op": "drop", "position": str(flag)})
    assert dropped.status == 303
    after = c.get(f"/ui/consolidation?run={run}")
    assert "Dropped 1 action(s)" in after.text
    shown = {a["position"]: a for a in web.svc.consolidate_show(web.alice_p, run)["actions"]}
    assert shown[flag]["status"] == "dropped"
    assert web.svc.read(web.alice_p, SCOPE, "no-system-python")["lesson"]["status"] == "active"  # no link, no review
    assert "Apply all" not in after.text  # nothing planned is left

    undone = c.post("/ui/consolidation/undo", {"csrf": csrf, "run": str(run)})
    assert undone.status == 303
    assert "Undid run" in c.get(f"/ui/consolidation?run={run}").text
    assert web.svc.read(web.alice_p, SCOPE, gone)["lesson"]["status"] == "active"  # restored


def test_apply_all_and_drop_all(seeded: Web) -> None:
    web = seeded
    c = signed_in(web, web.alice)
    run = web.svc.consolidate_plan(web.alice_p)["run"]["id"]
    csrf = c.csrf(f"/ui/consolidation?run={run}")
    reply = c.post("/ui/consolidation/actions", {"csrf": csrf, "run": str(run), "op": "drop", "all": "1"})
    assert reply.status == 303
    statuses = {a["status"] for a in web.svc.consolidate_show(web.alice_p, run)["actions"]}
    assert statuses == {"dropped"}
    # Nothing planned is left: applying all applies nothing, and says so.
    again = c.post("/ui/consolidation/actions", {"csrf": csrf, "run": str(run), "op": "apply", "all": "1"})
    assert again.status == 303
    assert {a["status"] for a in web.svc.consolidate_show(web.alice_p, run)["actions"]} == {"dropped"}


def test_refusals(seeded: Web) -> None:
    web = seeded
    run = web.svc.consolidate_plan(web.alice_p)["run"]["id"]
    c = signed_in(web, web.alice)
    csrf = c.csrf("/ui/consolidation")
    # No CSRF token: refused before anything is read.
    assert c.post("/ui/consolidation/plan", {}).status == 403
    assert c.post("/ui/consolidation/actions", {"run": str(run), "op": "apply", "all": "1"}).status == 403
    # A bad operation, a bad run id, a bad position, nothing selected.
    bad_op = c.post("/ui/consolidation/actions", {"csrf": csrf, "run": str(run), "op": "merge", "all": "1"})
    assert bad_op.status == 400 and "INVALID_INPUT" in bad_op.text
    assert c.post("/ui/consolidation/actions", {"csrf": csrf, "op": "apply", "all": "1"}).status == 400
    assert c.get("/ui/consolidation?run=abc").status == 400
    bad_pos = c.post("/ui/consolidation/actions", {"csrf": csrf, "run": str(run), "op": "apply", "position": "x"})
    assert bad_pos.status == 400
    none = c.post("/ui/consolidation/actions", {"csrf": csrf, "run": str(run), "op": "apply"})
    assert none.status == 303 and "Select at least one action" in c.get(f"/ui/consolidation?run={run}").text
    unknown = c.post("/ui/consolidation/actions", {"csrf": csrf, "run": str(run), "op": "apply", "position": "999"})
    assert unknown.status == 404
    assert c.get("/ui/consolidation?run=999999").status == 404
    # Another tenant cannot see or act on alice's run.
    bob = signed_in(web, web.bob)
    assert bob.get(f"/ui/consolidation?run={run}").status == 404
    theirs = bob.post("/ui/consolidation/actions", {"csrf": bob.csrf(), "run": str(run), "op": "apply", "all": "1"})
    assert theirs.status == 404
    # A read-only token sees the plan but no control, and a forged POST is refused by the service.
    ro = signed_in(web, web.reader)
    page = ro.get(f"/ui/consolidation?run={run}")
    assert page.status == 200 and "pytest-print" in page.text
    assert "Plan now" not in page.text and "Apply all" not in page.text and 'name="position"' not in page.text
    forged = ro.post("/ui/consolidation/actions", {"csrf": ro.csrf(), "run": str(run), "op": "apply", "all": "1"})
    assert forged.status == 403 and "FORBIDDEN" in forged.text
    assert ro.post("/ui/consolidation/plan", {"csrf": ro.csrf()}).status == 403
    assert {a["status"] for a in web.svc.consolidate_show(web.alice_p, run)["actions"]} == {"planned"}


def test_the_review_page_names_the_lesson_a_flagged_one_contradicts(seeded: Web) -> None:
    web = seeded
    scope = "repo::acme/argue"
    web.svc.write(web.alice_p, scope, "tabs", "Indent the Makefile recipes with tabs.")
    web.svc.write(web.alice_p, scope, "no-tabs", "Never indent the Makefile recipes with tabs.")
    web.svc.write(web.alice_p, scope, "lint", "Run ruff before every commit.")
    applied = web.svc.consolidate_apply(web.alice_p, scopes=[scope])
    assert [a["kind"] for a in applied["actions"]] == ["flag-contradiction"]
    page = signed_in(web, web.alice).get(f"/ui/review?scope={scope}")
    assert page.status == 200
    rows = {r.split("</tr>", 1)[0] for r in page.text.split("<tr")[1:]}
    tabs = next(r for r in rows if ">tabs</a>" in r.split("Contradicts:")[0])
    no_tabs = next(r for r in rows if ">no-tabs</a>" in r.split("Contradicts:")[0])
    lint = next(r for r in rows if ">lint</a>" in r)
    assert "Contradicts:" in tabs and ">no-tabs</a>" in tabs.split("Contradicts:")[1]
    assert "Contradicts:" in no_tabs and ">tabs</a>" in no_tabs.split("Contradicts:")[1]
    assert "Contradicts:" not in lint
