"""The sync routes over a real server: what each token may move, and what a bad request gets.

The routes are derived from the catalogue (``GET /v1/sync/store``, ``GET /v1/sync/feed``,
``POST /v1/sync/apply``, ``GET /v1/sync/peer``); the exchange itself is proven end to end in
``tests/sync/``. Here: a read-only token reads the feed and is refused the apply (nothing written),
another tenant's feed holds none of this tenant's events, and a malformed, oversized or out-of-range
request is a problem+json with a stable code, never a 500.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from cairn.api.guard import MAX_BODY_BYTES, MAX_SYNC_BYTES
from cairn.core.sync import MAX_BATCH
from tests.api.conftest import Api
from tests.api.test_boundary import _raw_exchange

PROBLEM = "application/problem+json"


def _feed(api: Api, token: str, **query: object) -> dict:
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    reply = api.http("GET", "/v1/sync/feed" + (f"?{qs}" if qs else ""), token=token)
    assert reply.status == 200, reply.body
    return reply.body


def test_a_read_only_token_reads_the_feed_and_is_refused_the_apply(api: Api) -> None:
    api.http("POST", "/v1/lessons", {"scope": "global", "key": "sync-route", "value": "Fed to peers."}, api.alice)
    me = api.svc.resolve_token(api.alice)
    reader = api.svc.token_create(me, perm="read")["token"]
    page = _feed(api, reader)
    assert page["store_id"] == api.http("GET", "/v1/sync/store", token=reader).body["store_id"]
    assert any(e["kind"] == "version" and e["body"].get("key") == "sync-route" for e in page["events"]), page
    before = _feed(api, api.alice)["head"]
    # The page the server itself fed, sent back by a reader: refused before anything is read or written.
    reply = api.http("POST", "/v1/sync/apply", page, reader)
    assert (reply.status, reply.body["code"]) == (403, "FORBIDDEN"), reply.body
    assert _feed(api, api.alice)["head"] == before


def test_another_tenants_feed_holds_none_of_this_tenants_events(api: Api) -> None:
    api.http("POST", "/v1/lessons", {"scope": "global", "key": "alice-only", "value": "Alice's alone."}, api.alice)
    theirs = _feed(api, api.bob, limit=MAX_BATCH)
    assert theirs["store_id"] != _feed(api, api.alice)["store_id"]
    assert "Alice's alone." not in json.dumps(theirs)


def test_bad_sync_requests_get_a_problem_with_a_stable_code(api: Api) -> None:
    t = api.alice
    cases = [
        ("GET", f"/v1/sync/feed?limit={MAX_BATCH + 1}", None, 400, "INVALID_INPUT"),
        ("GET", "/v1/sync/feed?since=-1", None, 400, "INVALID_INPUT"),
        ("GET", "/v1/sync/feed?exclude_origin=not-a-store", None, 400, "INVALID_INPUT"),
        ("GET", "/v1/sync/peer?store_id=../../etc", None, 400, "INVALID_INPUT"),
        ("POST", "/v1/sync/apply", {"events": []}, 400, "INVALID_INPUT"),
        ("POST", "/v1/sync/apply", {**_empty_batch(), "surprise": 1}, 400, "INVALID_INPUT"),
        ("POST", "/v1/sync/apply", {**_empty_batch(), "events": [{"uid": "x", "kind": "nope"}]}, 400, "INVALID_INPUT"),
    ]
    for method, path, body, status, code in cases:
        reply = api.http(method, path, body, t)
        assert (reply.status, reply.body["code"]) == (status, code), (path, body, reply.body)
        assert reply.content_type.startswith(PROBLEM)
    # Over the sync cap (bigger than a lesson route's, and still bounded): 413 before any body byte.
    port = urlsplit(api.http.base).port
    head = (
        f"POST /v1/sync/apply HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {t}\r\nContent-Length: {MAX_SYNC_BYTES + 1}\r\n\r\n"
    ).encode()
    answer = _raw_exchange(api, head)
    assert answer.startswith(b"HTTP/1.1 413") and b'"VALUE_TOO_LARGE"' in answer
    assert f'"limit":{MAX_SYNC_BYTES}'.encode() in answer.replace(b" ", b"")
    # A batch over a lesson route's cap and under the sync cap is read and answered (here: refused
    # as a batch that came from nowhere valid, not for its size).
    big = {**_empty_batch(), "events": [_event(i) for i in range(40)]}
    assert len(json.dumps(big)) > MAX_BODY_BYTES
    reply = api.http("POST", "/v1/sync/apply", big, t)
    assert reply.status != 413, reply.body
    # Unauthenticated: no token, no feed.
    reply = api.http("GET", "/v1/sync/feed")
    assert (reply.status, reply.body["code"]) == (401, "UNAUTHENTICATED")


def _event(i: int) -> dict:
    return {"uid": f"{i:032x}", "kind": "version", "origin_store": "0" * 32, "body": {"value": "x" * 8000}}


def _empty_batch() -> dict:
    return {"store_id": "0" * 32, "events": [], "cursor": 0, "more": False, "head": {"seq": 0, "hash": "0" * 64}}
