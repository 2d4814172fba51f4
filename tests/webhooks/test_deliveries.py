"""Signed deliveries sent by a real HTTP client to a real `cairn serve` (SQLite and Postgres).

Each admitted event lands with its provenance; each dropped case is dropped for its reason; what
must be refused or ignored is, and leaves lessons, audit chains and counters exactly as they were.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.webhooks import payloads as gh
from tests.webhooks.conftest import PATH, Served
from tests.webhooks.payloads import signed

A = "acme/widget"
FINDING = "Retry the upload with exponential backoff; a fixed sleep hammers the API under load."


def _lesson(s: Served, key: str) -> dict:
    return s.svc.read(s.alice, f"repo::{A}", key)["lesson"]


def _counts(s: Served, repo: str = A) -> dict[str, int]:
    p = s.alice if repo != "bob/tools" else s.bob
    return next(w["counts"] for w in s.svc.webhook_list(p)["webhooks"] if w["repo"] == repo)


def test_a_review_comment_lands_as_a_candidate_with_its_provenance(served: Served) -> None:
    r = served.deliver(
        A, "pull_request_review_comment", gh.pull_request_review_comment(A, 12, FINDING, path="src/upload.py", line=42)
    )
    assert r.status == 200, r.body
    assert r.body["outcome"] == "created" and r.body["trust"] == "candidate" and not r.body["outside"]
    lesson = _lesson(served, r.body["key"])
    assert lesson["value"] == FINDING and lesson["trust"] == "candidate"
    assert (lesson["origin"], lesson["author"]) == ("webhook", "alice")
    assert lesson["url"].startswith(f"https://github.com/{A}/pull/12#discussion_r")
    prov = lesson["provenance"]
    assert prov == {"login": "alice", "association": "MEMBER", "outside": False, "url": lesson["url"], "pr": 12,
                    "path": "src/upload.py", "line": 42}  # fmt: skip
    # The same finding delivered again (a new delivery, not a redelivery) is a recurrence, not a copy.
    again = served.deliver(
        A, "pull_request_review_comment", gh.pull_request_review_comment(A, 12, FINDING, path="src/upload.py")
    )
    assert again.body["outcome"] == "recurred" and again.body["key"] == r.body["key"]
    assert _lesson(served, r.body["key"])["seen_count"] == 2
    # The context block names where it came from, inside the fence.
    block = served.svc.context(served.alice, repo=A)["text"]
    assert "from @alice on PR #12" in block.split("<<<", 1)[1]


def test_a_review_an_issue_comment_on_a_pr_and_a_resolved_thread_land(served: Served) -> None:
    review = served.deliver(
        A,
        "pull_request_review",
        gh.pull_request_review(A, 13, "Please validate the config path before reading it, not after."),
    )
    assert review.body["outcome"] == "created", review.body
    assert _lesson(served, review.body["key"])["provenance"]["pr"] == 13
    comment = served.deliver(
        A,
        "issue_comment",
        gh.issue_comment(A, 14, "The migration must run before the deploy step or the column is missing."),
    )
    assert comment.body["outcome"] == "created", comment.body
    first = gh.review_comment(
        A, 15, "Close the file handle in a finally block; this leaks on the error path.", "alice", path="src/io.py"
    )
    made = served.deliver(
        A, "pull_request_review_comment", {**gh.pull_request_review_comment(A, 15, ""), "comment": first}
    )
    assert made.body["outcome"] == "created"
    resolved = served.deliver(
        A, "pull_request_review_thread", gh.pull_request_review_thread(A, 15, first, resolver="bob")
    )
    assert resolved.body["outcome"] == "recurred" and resolved.body["key"] == made.body["key"]
    assert resolved.body["resolved_thread"] is True
    assert _lesson(served, made.body["key"])["seen_count"] == 2


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        ("pull_request_review", gh.pull_request_review(A, 20, None, state="approved")),  # no body
        ("pull_request_review", gh.pull_request_review(A, 20, FINDING, action="edited")),
        ("pull_request_review_comment", gh.pull_request_review_comment(A, 20, FINDING, action="edited")),
        ("pull_request_review_comment", gh.pull_request_review_comment(A, 20, FINDING, action="deleted")),
        (
            "pull_request_review_thread",
            gh.pull_request_review_thread(A, 20, gh.review_comment(A, 20, FINDING, "alice"), action="unresolved"),
        ),
        ("issue_comment", gh.issue_comment(A, 21, FINDING, on_pr=False)),  # an issue, not a pull request
        ("push", {"ref": "refs/heads/main", "repository": gh.repository(A), "sender": gh.user("alice")}),
    ],
)
def test_other_events_and_actions_are_acknowledged_ignored_and_counted(
    served: Served, event: str, payload: dict
) -> None:
    before = _counts(served).get("ignored", 0)
    lessons = served.svc.list(served.alice, limit=10_000)["lessons"]
    r = served.deliver(A, event, payload)
    assert r.status == 200 and r.body["outcome"] == "ignored", r.body
    assert _counts(served)["ignored"] == before + 1
    assert served.svc.list(served.alice, limit=10_000)["lessons"] == lessons


def test_ping_answers(served: Served) -> None:
    r = served.deliver(A, "ping", gh.ping(A))
    assert r.status == 200 and r.body["outcome"] == "ping"


@pytest.mark.parametrize(
    ("reason", "payload"),
    [
        ("short", gh.pull_request_review_comment(A, 30, "LGTM, nice one")),
        ("bot", gh.pull_request_review_comment(A, 30, FINDING, login="codecov", kind="Bot")),
        ("bot", gh.issue_comment(A, 30, FINDING, login="some-helper[bot]")),
        ("ci_status", gh.issue_comment(A, 30, "✅ CI build passed\n❌ lint checks failed")),
        ("dependency_bot", gh.issue_comment(A, 30, "@dependabot rebase this please, the lockfile conflicts again")),
        ("dependency_bot", gh.issue_comment(A, 30, "Bumps requests from 2.31.0 to 2.32.0 to fix the CVE in proxies.")),
        ("only_code", gh.pull_request_review_comment(A, 30, "```python\nfor attempt in range(5):\n    upload()\n```")),
        ("only_quote", gh.issue_comment(A, 30, "> Retry the upload with exponential backoff\n> under load")),
    ],
)
def test_each_dropped_case_is_dropped_for_its_reason_and_counted(served: Served, reason: str, payload: dict) -> None:
    event = "issue_comment" if "issue" in payload else "pull_request_review_comment"
    before = served.state()
    counted = _counts(served).get(f"dropped.{reason}", 0)
    r = served.deliver(A, event, payload)
    assert r.status == 200 and r.body["outcome"] == f"dropped.{reason}", r.body
    assert _counts(served)[f"dropped.{reason}"] == counted + 1
    after = served.state()
    assert after[0] == before[0] and after[1] == before[1]  # no lesson, no audit row; only the counter


def test_refused_and_replayed_deliveries_change_nothing(served: Served) -> None:
    payload = gh.pull_request_review_comment(A, 40, "Never log the token; redact it in the request dump too.")
    body, headers = signed("pull_request_review_comment", payload, served.secrets[A])
    ok = served.post(f"{PATH}?repo={A}", body, headers)
    assert ok.body["outcome"] == "created"
    before = served.state()

    replay = served.post(f"{PATH}?repo={A}", body, headers)  # GitHub's redelivery: same id, same body
    assert replay.status == 200 and replay.body["outcome"] == "duplicate"

    unsigned = {k: v for k, v in headers.items() if k != "X-Hub-Signature-256"}
    fresh = {**headers, "X-GitHub-Delivery": "b1c2d3e4-0000-4000-8000-000000000001"}
    refusals = {
        "unsigned": served.post(
            f"{PATH}?repo={A}", body, {**unsigned, "X-GitHub-Delivery": fresh["X-GitHub-Delivery"]}
        ),
        "malformed": served.post(f"{PATH}?repo={A}", body, {**fresh, "X-Hub-Signature-256": "sha1=abc"}),
        "wrong secret": served.post(
            f"{PATH}?repo={A}",
            body,
            {**fresh, "X-Hub-Signature-256": signed("x", payload, "cwh_wrong")[1]["X-Hub-Signature-256"]},
        ),
        "body changed": served.post(f"{PATH}?repo={A}", body.replace(b"token", b"t0ken"), fresh),
        "unknown repo": served.post(f"{PATH}?repo=nobody/nothing", body, fresh),
        "no repo": served.post(PATH, body, fresh),
    }
    for name, reply in refusals.items():
        assert reply.status == 401, (name, reply.body)
        assert reply.body["code"] == "UNAUTHENTICATED"
    # No oracle: an unknown repository and a bad signature get the same answer, word for word.
    assert refusals["unknown repo"].body == refusals["wrong secret"].body == refusals["body changed"].body
    assert served.state() == before


def test_a_secret_writes_only_its_own_repository_and_tenant(served: Served) -> None:
    before = served.state()
    into_b = gh.pull_request_review_comment(
        "bob/tools", 50, "Pin the compiler version; the nightly broke the build twice."
    )
    # Repository A's secret, addressed to B's registration: does not verify there.
    r1 = served.deliver("bob/tools", "pull_request_review_comment", into_b, secret=served.secrets[A])
    # A's secret on A's URL, but the payload is about B's repository: refused the same way.
    r2 = served.deliver(A, "pull_request_review_comment", into_b, secret=served.secrets[A])
    assert (r1.status, r2.status) == (401, 401) and r1.body == r2.body
    assert served.state() == before
    # B's own secret lands in B, and nothing of it is visible in A.
    ok = served.deliver("bob/tools", "pull_request_review_comment", into_b)
    assert ok.body["outcome"] == "created"
    assert served.svc.list(served.bob, "repo::bob/tools")["lessons"]
    assert not served.svc.list(served.alice, "repo::bob/tools")["lessons"]


def test_an_oversized_delivery_is_refused_before_it_is_read(served: Served) -> None:
    """Over 1 MiB: 413 from the declared length, before a byte of the body is sent or any HMAC runs;
    a chunked body is counted as it streams and refused the same way."""
    import http.client
    import json
    from urllib.parse import urlsplit

    before = served.state()
    payload = gh.pull_request_review_comment(A, 60, "x" * (1024 * 1024 + 10))
    body, headers = signed("pull_request_review_comment", payload, served.secrets[A])
    port = urlsplit(served.base).port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.putrequest("POST", f"{PATH}?repo={A}")
    for k, v in {**headers, "Content-Length": str(len(body))}.items():
        conn.putheader(k, v)
    conn.endheaders()  # the headers only: the answer comes without the body
    reply = conn.getresponse()
    assert reply.status == 413 and json.loads(reply.read())["code"] == "VALUE_TOO_LARGE"
    conn.close()
    chunked = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        pieces = iter([body[i : i + 65536] for i in range(0, len(body), 65536)])
        chunked.request("POST", f"{PATH}?repo={A}", body=pieces, headers=headers, encode_chunked=True)
        status = chunked.getresponse().status
    except (BrokenPipeError, ConnectionResetError):
        status = 413  # the server answered and closed while the rest was still streaming
    assert status == 413
    assert served.state() == before


def test_rotation_keeps_the_old_secret_for_the_grace_period_only(served: Served) -> None:
    repo = "acme/rotating"
    old = served.svc.webhook_add(served.alice, repo)["secret"]
    new = served.svc.webhook_rotate(served.alice, repo)["secret"]  # default grace: 24 h
    assert new != old
    first = gh.pull_request_review_comment(repo, 70, "Use the shared HTTP session; a client per call leaks sockets.")
    assert served.deliver(repo, "pull_request_review_comment", first, secret=old).body["outcome"] == "created"
    newest = served.svc.webhook_rotate(served.alice, repo, grace=timedelta(0))["secret"]
    before = served.state()
    late = gh.pull_request_review_comment(
        repo, 71, "Check the return code of the subprocess before parsing its output."
    )
    for stale in (old, new):
        assert served.deliver(repo, "pull_request_review_comment", late, secret=stale).status == 401
    assert served.state() == before
    assert served.deliver(repo, "pull_request_review_comment", late, secret=newest).body["outcome"] == "created"


def test_an_outside_authors_lesson_is_never_promoted_by_recurrence(served: Served) -> None:
    text = "Quote the shell variable in the install script or paths with spaces break it."
    made = served.deliver(
        A,
        "pull_request_review_comment",
        gh.pull_request_review_comment(A, 80, text, login="stranger", association="CONTRIBUTOR", path="install.sh"),
    )
    assert made.body["outcome"] == "created" and made.body["outside"] is True
    key = made.body["key"]
    # Seen again from many people and sessions: insiders re-posting it, an agent writing the same text.
    for login in ("alice", "carol", "dave", "erin"):
        again = gh.pull_request_review_comment(A, 81, text, login=login, association="MEMBER", path="install.sh")
        assert served.deliver(A, "pull_request_review_comment", again).body["outcome"] == "recurred"
    from tests.conftest import session

    for name in ("s1", "s2", "s3"):
        served.svc.write(session(served.alice, name), f"repo::{A}", key, text)
    lesson = _lesson(served, key)
    assert lesson["trust"] == "candidate" and lesson["seen_count"] >= 8
    assert lesson["provenance"]["outside"] is True
    block = served.svc.context(served.alice, repo=A)["text"]
    assert "outside author, from @stranger on PR #80" in block
    # Recall names it the same way, inside its fence (full-text arm: no model in this process).
    recalled = served.svc.recall(served.alice, "quote the shell variable install script paths with spaces",
                                 repo=A, floor=0.0, mode="fts")  # fmt: skip
    hit = next(h for h in recalled["lessons"] if h["key"] == key)
    assert hit["provenance"] == "outside author, from @stranger on PR #80"
    fenced = recalled["text"].split("<<<", 1)[1]
    assert "[outside author, from @stranger on PR #80]" in fenced
    # A person verifies it (the only way up).
    assert served.svc.verify(served.alice, f"repo::{A}", key)["lesson"]["trust"] == "verified"

    # The control: the same shape from members is promoted after three people saw it.
    inside = "Close the database cursor before returning the generator, or SQLite stays locked."
    for login in ("alice", "carol", "dave"):
        r = served.deliver(
            A, "pull_request_review_comment", gh.pull_request_review_comment(A, 82, inside, login=login, path="db.py")
        )
    assert r.body["outcome"] == "promoted" and r.body["trust"] == "verified"


def test_a_forgotten_comment_reposted_is_refused(served: Served) -> None:
    text = "Do not catch BaseException here; it swallows KeyboardInterrupt and SystemExit."
    made = served.deliver(A, "pull_request_review_comment", gh.pull_request_review_comment(A, 90, text, path="cli.py"))
    served.svc.forget(served.alice, f"repo::{A}", made.body["key"], "wrong for this codebase")
    before = served.state()
    again = served.deliver(A, "pull_request_review_comment", gh.pull_request_review_comment(A, 91, text, path="cli.py"))
    assert again.status == 200 and again.body["outcome"] == "tombstoned"
    after = served.state()
    assert after[0] == before[0] and after[1] == before[1]


def test_a_delivery_that_cannot_be_stored_answers_503_and_its_retry_lands(served: Served) -> None:
    """A limit reached: 503 (GitHub retries), nothing stored, the delivery id not remembered; once the
    limit is lifted the same delivery, redelivered with its id, lands."""
    from cairn.runtime.local import local_principal

    operator = local_principal()
    held = len(served.svc.list(served.bob, limit=10_000)["lessons"])
    served.svc.limits_set(operator, "bob", max_lessons=max(held, 1))
    payload = gh.pull_request_review_comment(
        "bob/tools", 95, "Flush the write buffer before closing the socket, always."
    )
    body, headers = signed("pull_request_review_comment", payload, served.secrets["bob/tools"])
    before = served.state()
    try:
        if held == 0:  # the limit counts lessons held: fill the one allowed slot first
            filler = gh.pull_request_review_comment(
                "bob/tools", 96, "Pin the base image digest so rebuilds are reproducible."
            )
            assert served.deliver("bob/tools", "pull_request_review_comment", filler).body["outcome"] == "created"
            before = served.state()
        refused = served.post(f"{PATH}?repo=bob/tools", body, headers)
        assert refused.status == 503 and refused.body["code"] == "SETUP", refused.body
        assert served.state() == before
    finally:
        served.svc.limits_set(operator, "bob", max_lessons=0)  # 0 removes the override
    retried = served.post(f"{PATH}?repo=bob/tools", body, headers)
    assert retried.status == 200 and retried.body["outcome"] == "created"


def test_two_tenants_registering_one_repository_each_get_only_what_their_secret_signed(served: Served) -> None:
    shared = "shared/lib"
    a_secret = served.svc.webhook_add(served.alice, shared)["secret"]
    b_secret = served.svc.webhook_add(served.bob, shared)["secret"]
    text = "Validate the version header before dispatching, or old clients crash the parser."
    landed = served.deliver(shared, "pull_request_review_comment", gh.pull_request_review_comment(shared, 5, text),
                            secret=b_secret)  # fmt: skip
    assert landed.body["outcome"] == "created"
    assert [x["value"] for x in served.svc.list(served.bob, f"repo::{shared}")["lessons"]] == [text]
    assert served.svc.list(served.alice, f"repo::{shared}")["lessons"] == []
    other = "Close the pool on shutdown; idle connections keep the process alive for minutes."
    served.deliver(
        shared, "pull_request_review_comment", gh.pull_request_review_comment(shared, 6, other), secret=a_secret
    )
    assert [x["value"] for x in served.svc.list(served.alice, f"repo::{shared}")["lessons"]] == [other]
    assert len(served.svc.list(served.bob, f"repo::{shared}")["lessons"]) == 1


def test_a_finding_that_restates_forgotten_content_lands_held(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """The webhook path is the one write path: a finding close to a tombstone is held, out of reads."""
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")  # the server's model: the tombstone's vector is of it
    scope = f"repo::{A}"
    forgotten = (
        "Retry the upload with a fixed sleep of five seconds between attempts; the API rate limit resets that fast."
    )
    served.svc.write(served.alice, scope, "upload-sleep", forgotten)
    tomb = served.svc.forget(served.alice, scope, "upload-sleep", "wrong: the limit is per hour")["tombstone_id"]
    restated = (
        "Between attempts, retry the upload with a fixed sleep of five seconds; the API rate limit resets that fast."
    )
    r = served.deliver(A, "pull_request_review_comment", gh.pull_request_review_comment(A, 31, restated, path="up.py"))
    assert r.status == 200, r.body
    assert (r.body["outcome"], r.body["trust"]) == ("created", "held")
    assert r.body["key"] not in {x["key"] for x in served.svc.list(served.alice, scope)["lessons"]}
    queue = {c["key"]: c for c in served.svc.review_queue(served.alice)["candidates"]}
    assert queue[r.body["key"]]["held"]["tombstone_id"] == tomb
