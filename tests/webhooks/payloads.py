"""Deliveries in the shapes GitHub documents for the events Cairn takes (written from GitHub's
webhook payload reference; no network). Only the fields a real delivery carries, trimmed of the
many URLs that Cairn never reads; the nesting and names are GitHub's.
"""

from __future__ import annotations

import itertools
import json
import uuid
from typing import Any

from cairn.webhooks.github import signature_header

_ids = itertools.count(1_000_001)


def user(login: str, kind: str = "User") -> dict[str, Any]:
    return {
        "login": login,
        "id": next(_ids),
        "node_id": "U_kgDO",
        "type": kind,
        "site_admin": False,
        "html_url": f"https://github.com/{login}",
    }


def repository(full_name: str) -> dict[str, Any]:
    owner, name = full_name.split("/")
    return {
        "id": next(_ids),
        "node_id": "R_kgDO",
        "name": name,
        "full_name": full_name,
        "private": False,
        "owner": user(owner, "Organization"),
        "html_url": f"https://github.com/{full_name}",
        "default_branch": "main",
    }


def pull_request(full_name: str, number: int) -> dict[str, Any]:
    return {
        "url": f"https://api.github.com/repos/{full_name}/pulls/{number}",
        "id": next(_ids),
        "number": number,
        "state": "open",
        "title": "Retry the upload",
        "user": user("octocat"),
        "body": "This PR retries uploads.",
        "html_url": f"https://github.com/{full_name}/pull/{number}",
        "head": {"ref": "retry", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
        "base": {"ref": "main", "sha": "9049f1265b7d61be4a8904a9a27120d2064dab3b"},
    }


def review_comment(
    full_name: str,
    pr: int,
    body: str,
    login: str,
    association: str = "MEMBER",
    path: str = "src/upload.py",
    line: int = 42,
    kind: str = "User",
) -> dict[str, Any]:
    cid = next(_ids)
    return {
        "url": f"https://api.github.com/repos/{full_name}/pulls/comments/{cid}",
        "pull_request_review_id": cid,
        "id": cid,
        "node_id": "PRRC_kwDO",
        "diff_hunk": "@@ -16,33 +16,40 @@",
        "path": path,
        "commit_id": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
        "user": user(login, kind),
        "body": body,
        "created_at": "2026-12-01T10:00:00Z",
        "updated_at": "2026-12-01T10:00:00Z",
        "html_url": f"https://github.com/{full_name}/pull/{pr}#discussion_r{cid}",
        "author_association": association,
        "start_line": None,
        "original_start_line": None,
        "line": line,
        "original_line": line,
        "side": "RIGHT",
        "subject_type": "line",
    }


def pull_request_review_comment(
    full_name: str,
    pr: int,
    body: str,
    login: str = "alice",
    association: str = "MEMBER",
    action: str = "created",
    **kw: Any,
) -> dict[str, Any]:
    return {
        "action": action,
        "comment": review_comment(full_name, pr, body, login, association, **kw),
        "pull_request": pull_request(full_name, pr),
        "repository": repository(full_name),
        "sender": user(login),
    }


def pull_request_review(
    full_name: str,
    pr: int,
    body: str | None,
    login: str = "alice",
    association: str = "MEMBER",
    action: str = "submitted",
    state: str = "commented",
) -> dict[str, Any]:
    rid = next(_ids)
    review = {
        "id": rid,
        "node_id": "PRR_kwDO",
        "user": user(login),
        "body": body,
        "state": state,
        "commit_id": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
        "submitted_at": "2026-12-01T10:00:00Z",
        "html_url": f"https://github.com/{full_name}/pull/{pr}#pullrequestreview-{rid}",
        "author_association": association,
    }
    return {
        "action": action,
        "review": review,
        "pull_request": pull_request(full_name, pr),
        "repository": repository(full_name),
        "sender": user(login),
    }


def pull_request_review_thread(
    full_name: str, pr: int, first: dict[str, Any], resolver: str = "bob", action: str = "resolved"
) -> dict[str, Any]:
    """``first``: the thread's first review comment, as ``review_comment`` builds it."""
    reply = review_comment(full_name, pr, "Fixed in the next commit, thanks.", "octocat", "CONTRIBUTOR")
    reply["in_reply_to_id"] = first["id"]
    return {
        "action": action,
        "thread": {"node_id": "PRRT_kwDO", "comments": [first, reply]},
        "pull_request": pull_request(full_name, pr),
        "repository": repository(full_name),
        "sender": user(resolver),
    }


def issue_comment(
    full_name: str,
    number: int,
    body: str,
    login: str = "alice",
    association: str = "MEMBER",
    on_pr: bool = True,
    action: str = "created",
) -> dict[str, Any]:
    cid = next(_ids)
    issue: dict[str, Any] = {
        "id": next(_ids),
        "number": number,
        "title": "Retry the upload",
        "state": "open",
        "user": user("octocat"),
        "html_url": f"https://github.com/{full_name}/pull/{number}",
    }
    if on_pr:
        issue["pull_request"] = {
            "url": f"https://api.github.com/repos/{full_name}/pulls/{number}",
            "html_url": f"https://github.com/{full_name}/pull/{number}",
        }
    comment = {
        "id": cid,
        "node_id": "IC_kwDO",
        "user": user(login),
        "body": body,
        "author_association": association,
        "html_url": f"https://github.com/{full_name}/pull/{number}#issuecomment-{cid}",
        "created_at": "2026-12-01T10:00:00Z",
        "updated_at": "2026-12-01T10:00:00Z",
    }
    return {
        "action": action,
        "issue": issue,
        "comment": comment,
        "repository": repository(full_name),
        "sender": user(login),
    }


def ping(full_name: str) -> dict[str, Any]:
    return {
        "zen": "Keep it logically awesome.",
        "hook_id": next(_ids),
        "hook": {
            "type": "Repository",
            "id": next(_ids),
            "name": "web",
            "active": True,
            "events": ["pull_request_review_comment", "pull_request_review", "issue_comment"],
            "config": {"content_type": "json", "insecure_ssl": "0", "url": "https://cairn.example/v1/webhooks/github"},
        },
        "repository": repository(full_name),
        "sender": user("octocat"),
    }


def signed(
    event: str, payload: dict[str, Any], secret: str, delivery: str | None = None
) -> tuple[bytes, dict[str, str]]:
    """The body and headers GitHub sends for ``payload`` signed with ``secret``."""
    body = json.dumps(payload).encode()
    return body, {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/044aadd",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "292430182",
        "X-Hub-Signature-256": signature_header(secret, body),
    }
