"""The pure rules of ``cairn.webhooks.github``: signature parsing, the gate, the filter, the key."""

from __future__ import annotations

import pytest

from cairn.webhooks import github as gh
from tests.webhooks import payloads as p

A = "acme/widget"
TEXT = "Retry the upload with exponential backoff; a fixed sleep hammers the API under load."


@pytest.mark.parametrize("header", [None, "", "sha256=", "sha1=" + "a" * 40, "sha256=" + "A" * 64, "sha256=" + "g" * 64,
                                    "sha256=" + "a" * 63, " sha256=" + "a" * 65])  # fmt: skip
def test_a_malformed_signature_is_refused_before_any_hmac(header: str | None) -> None:
    with pytest.raises(gh.Refused):
        gh.parse_signature(header)


def test_the_signature_is_githubs_hmac_sha256_of_the_raw_body() -> None:
    # GitHub's documented example: secret "It's a Secret to Everybody", payload "Hello, World!".
    header = gh.signature_header("It's a Secret to Everybody", b"Hello, World!")
    assert header == "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    given = gh.parse_signature(header)
    assert gh.matches("It's a Secret to Everybody", b"Hello, World!", given)
    assert not gh.matches("It's a Secret to Everybody", b"Hello, World?", given)


def test_the_gate_takes_four_shapes_and_ping() -> None:
    assert gh.gate("ping", p.ping(A)).outcome == "ping"
    taken = [
        ("pull_request_review_comment", p.pull_request_review_comment(A, 1, TEXT)),
        ("pull_request_review", p.pull_request_review(A, 1, TEXT)),
        ("pull_request_review_thread", p.pull_request_review_thread(A, 1, p.review_comment(A, 1, TEXT, "alice"))),
        ("issue_comment", p.issue_comment(A, 1, TEXT)),
    ]
    for event, payload in taken:
        g = gh.gate(event, payload)
        assert g.outcome == "finding" and g.finding is not None and g.finding.body == TEXT, event
        assert g.finding.pr == 1
    assert gh.gate("issue_comment", p.issue_comment(A, 1, TEXT, on_pr=False)).outcome == "ignored"
    assert gh.gate("pull_request_review", p.pull_request_review(A, 1, "")).outcome == "ignored"
    assert gh.gate("issues", {"action": "opened"}).outcome == "ignored"
    assert gh.gate("pull_request_review_comment", "not an object").outcome == "ignored"


def test_the_filter_keeps_real_findings_that_contain_code_quotes_or_ci_words() -> None:
    def finding(body: str, login: str = "alice", kind: str = "User") -> gh.Finding:
        return gh.Finding(body, login, kind, "MEMBER", None, 1, None, None, "pr")

    kept = [
        TEXT,
        "Use a context manager here:\n```python\nwith open(p) as f:\n    data = f.read()\n```",
        "> why a fixed sleep?\nBecause the API rate-limits bursts; back off exponentially instead.",
        "The tests passed locally but the fixture leaks a temp dir; clean it up in teardown.",
    ]
    for body in kept:
        assert gh.drop_reason(finding(body)) is None, body
    assert gh.drop_reason(finding(TEXT, login="renovate[bot]")) == "bot"
    assert gh.drop_reason(finding(TEXT, kind="Bot")) == "bot"
    assert gh.drop_reason(finding("   ")) == "empty"
    assert gh.drop_reason(finding("All checks have passed")) == "ci_status"


def test_the_key_is_stable_for_a_finding_in_a_place_and_a_resolved_thread_finds_it() -> None:
    first = p.review_comment(A, 7, TEXT, "alice", path="src/Upload.py")
    made = gh.gate("pull_request_review_comment", {**p.pull_request_review_comment(A, 7, ""), "comment": first})
    resolved = gh.gate("pull_request_review_thread", p.pull_request_review_thread(A, 7, first))
    assert made.finding and resolved.finding and resolved.finding.resolved
    key = gh.finding_key(made.finding)
    assert key == gh.finding_key(resolved.finding)
    assert key.startswith("gh::src-upload-py--retry-the-upload")
    other = gh.gate("pull_request_review_comment", p.pull_request_review_comment(A, 7, TEXT, path="src/other.py"))
    assert other.finding and gh.finding_key(other.finding) != key


def test_outside_is_every_association_but_owner_member_collaborator() -> None:
    for association, outside in (("OWNER", False), ("MEMBER", False), ("COLLABORATOR", False),
                                 ("CONTRIBUTOR", True), ("FIRST_TIME_CONTRIBUTOR", True), ("NONE", True)):  # fmt: skip
        g = gh.gate("issue_comment", p.issue_comment(A, 1, TEXT, association=association))
        assert g.finding and g.finding.outside is outside
    assert gh.provenance_label("alice", 12, False) == "from @alice on PR #12"
    assert gh.provenance_label("eve", 3, True) == "outside author, from @eve on PR #3"


def test_a_form_encoded_delivery_is_read_from_its_payload_field() -> None:
    """GitHub's default content type: ``payload=<json>``, form-encoded (the HMAC covers those bytes)."""
    import json
    from urllib.parse import urlencode

    from cairn.errors import CairnError
    from cairn.service.webhooks import _payload

    payload = p.issue_comment(A, 1, TEXT)
    body = urlencode({"payload": json.dumps(payload)}).encode()
    assert _payload(body, "application/x-www-form-urlencoded") == payload
    assert _payload(json.dumps(payload).encode(), "application/json") == payload
    with pytest.raises(CairnError) as bad:
        _payload(b"{not json", "application/json")
    assert bad.value.code == "INVALID_INPUT"
