"""The HTTP boundary over a real socket: bounded JSON, bodies over the cap, Host/Origin, routing refusals.

Every refusal here must be problem+json with a stable code -- never a 500, a reset connection or
FastAPI's own text -- and must leave nothing written.
"""

from __future__ import annotations

import http.client
import json
import socket
from urllib.parse import urlsplit

import pytest

from cairn.api.guard import MAX_BODY_BYTES
from cairn.core.jsonin import MAX_DEPTH
from tests.api.conftest import Api, Reply

PROBLEM = "application/problem+json"


def _refused(r: Reply, status: int, code: str) -> None:
    assert r.status == status, r
    assert r.content_type.startswith(PROBLEM), r
    assert r.body["code"] == code and r.body["status"] == status, r


def _deep(levels: int) -> bytes:
    return b'{"scope": "global", "key": "deep", "value": "v", "tags": ' + b"[" * levels + b"]" * levels + b"}"


@pytest.mark.parametrize(
    "raw",
    [
        _deep(MAX_DEPTH + 1),
        _deep(100_000),  # far past the interpreter's recursion limit
        b'{"scope": "global", "key": "n", "value": "v", "tags": [], "kind": ' + b"9" * 5000 + b"}",
        b'{"scope": "global", "key": "n", "value": "v", "valid_from": 1e999}',
        b'{"scope": "global", "key": "n", "value": NaN}',
        b'{"scope": "global", "key": "n", "value": "caf\xe9"}',  # Latin-1, not UTF-8
        b'{"scope": "global", "key": "n", "value": "\xff\xfe"}',
        '{"scope": "global", "key": "n", "value": "v"}'.encode("utf-16"),
    ],
)
def test_bodies_past_the_json_bounds_are_invalid_input(api: Api, raw: bytes) -> None:
    r = api.http("POST", "/v1/lessons", raw=raw, token=api.alice)
    _refused(r, 400, "INVALID_INPUT")
    assert "Traceback" not in json.dumps(r.body)
    assert api.http("GET", "/v1/lesson?scope=global&key=n", token=api.alice).status == 404
    assert api.http("GET", "/v1/lesson?scope=global&key=deep", token=api.alice).status == 404


def test_a_body_within_the_bounds_is_accepted(api: Api) -> None:
    ok = api.http("POST", "/v1/search", raw=b'{"query": "anything", "limit": 3, "mode": "fts"}', token=api.alice)
    assert ok.status == 200, ok


def test_an_import_line_past_the_bounds_names_its_line(api: Api) -> None:
    good = json.dumps({"scope": "global", "key": "import-ok", "value": "A fine line."})
    deep = '{"scope": "global", "key": "d", "value": "v", "tags": ' + "[" * 200 + "]" * 200 + "}"
    huge = '{"scope": "global", "key": "h", "value": "v", "x": ' + "1" * 5000 + "}"
    for lines, bad_line in (([good, deep], 2), ([huge, good], 1)):
        r = api.http("POST", "/v1/import", {"lines": lines}, api.alice)
        _refused(r, 400, "INVALID_INPUT")
        assert r.body["data"]["errors"][0]["line"] == bad_line, r.body
        ndjson = api.http(
            "POST", "/v1/import", raw="\n".join(lines).encode(), token=api.alice,
            headers={"Content-Type": "application/x-ndjson"},
        )  # fmt: skip
        _refused(ndjson, 400, "INVALID_INPUT")
        assert f"line {bad_line}" in ndjson.body["detail"]
    assert api.http("GET", "/v1/lesson?scope=global&key=import-ok", token=api.alice).status == 404  # nothing written
    whole = api.http("POST", "/v1/import", raw=b'{"lines": ' + b"[" * 5000 + b"]" * 5000 + b"}", token=api.alice)
    _refused(whole, 400, "INVALID_INPUT")


def _port(api: Api) -> int:
    return urlsplit(api.http.base).port or 80


@pytest.mark.parametrize("size", [MAX_BODY_BYTES + 1, 8 * 1024 * 1024])
@pytest.mark.parametrize("chunked", [False, True])
def test_a_large_body_sent_whole_gets_413_not_a_reset(api: Api, size: int, chunked: bool) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", _port(api), timeout=60)
    body = b"x" * size
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {api.alice}"}
    if chunked:
        chunks = (body[i : i + 65536] for i in range(0, size, 65536))
        conn.request("POST", "/v1/lessons", body=chunks, headers=headers, encode_chunked=True)
    else:
        conn.request("POST", "/v1/lessons", body=body, headers=headers)
    reply = conn.getresponse()
    payload = json.loads(reply.read())
    conn.close()
    assert reply.status == 413 and reply.getheader("content-type").startswith(PROBLEM)
    assert payload["code"] == "VALUE_TOO_LARGE" and payload["data"]["limit"] == MAX_BODY_BYTES


def _raw_exchange(api: Api, head: bytes, body: bytes = b"") -> bytes:
    """Send ``head`` (and ``body``) and read the answer WITHOUT finishing the request body."""
    with socket.create_connection(("127.0.0.1", _port(api)), timeout=30) as sock:
        sock.sendall(head + body)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            part = sock.recv(65536)
            if not part:
                break
            answer += part
        return answer


def test_an_announced_length_over_the_cap_is_refused_before_any_body_byte(api: Api) -> None:
    head = (
        f"POST /v1/lessons HTTP/1.1\r\nHost: 127.0.0.1:{_port(api)}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {api.alice}\r\nContent-Length: {10**12}\r\n\r\n"
    ).encode()
    answer = _raw_exchange(api, head)  # not one byte of the terabyte is ever sent
    assert answer.startswith(b"HTTP/1.1 413") and b'"VALUE_TOO_LARGE"' in answer


def test_a_chunked_body_is_refused_while_it_streams(api: Api) -> None:
    head = (
        f"POST /v1/lessons HTTP/1.1\r\nHost: 127.0.0.1:{_port(api)}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {api.alice}\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    chunk = b"x" * 65536
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(MAX_BODY_BYTES // len(chunk) + 2))
    answer = _raw_exchange(api, head, body)  # the terminating chunk never comes: the cap decides
    assert answer.startswith(b"HTTP/1.1 413") and b'"VALUE_TOO_LARGE"' in answer


def test_a_small_chunked_body_still_works(api: Api) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", _port(api), timeout=60)
    body = json.dumps({"query": "chunked", "mode": "fts"}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {api.alice}"}
    conn.request("POST", "/v1/search", body=iter([body[:10], body[10:]]), headers=headers, encode_chunked=True)
    reply = conn.getresponse()
    assert reply.status == 200, reply.read()
    conn.close()


@pytest.mark.parametrize("path", ["/v1/health", "/v1/lessons", "/mcp/", "/ui/", "/docs"])
def test_a_foreign_host_or_origin_is_refused_403_everywhere(api: Api, path: str) -> None:
    port = _port(api)
    for headers in (
        {"Host": "evil.example"},
        {"Host": f"evil.example:{port}"},
        {"Host": f"127.0.0.1:{port + 1}"},  # loopback, but not this server's port
        {"Origin": "http://evil.example"},
        {"Origin": f"http://evil.example:{port}"},
        {"Origin": "null"},
    ):
        r = api.http("GET", path, token=api.alice, headers=headers)
        _refused(r, 403, "FORBIDDEN")
    mcp = api.http("POST", "/mcp/", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, api.alice,
                   headers={"Origin": "http://evil.example"})  # fmt: skip
    _refused(mcp, 403, "FORBIDDEN")


def test_loopback_names_and_origins_on_this_port_are_allowed(api: Api) -> None:
    port = _port(api)
    for headers in (
        {"Host": f"localhost:{port}"},
        {"Host": f"[::1]:{port}"},
        {"Host": "127.0.0.1"},
        {"Origin": f"http://localhost:{port}"},
        {"Origin": f"http://127.0.0.1:{port}"},
    ):
        assert api.http("GET", "/v1/health", headers=headers).status == 200, headers


def test_an_allowed_name_is_served_and_others_still_refused(api: Api) -> None:
    from cairn.api.app import create_app
    from tests.api.conftest import Http
    from tests.http_server import serving

    # A server of its own: the allowed host names are the app's configuration, not the shared server's.
    with serving(create_app(api.svc, mcp=False, allowed_hosts=["cairn.example.com"])) as base:
        http = Http(base)
        assert http("GET", "/v1/health", headers={"Host": "cairn.example.com"}).status == 200
        assert http("GET", "/v1/health", headers={"Origin": "https://cairn.example.com"}).status == 200
        _refused(http("GET", "/v1/health", headers={"Host": "other.example.com"}), 403, "FORBIDDEN")


def test_the_root_leads_to_the_dashboard(api: Api) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", _port(api), timeout=30)
    conn.request("GET", "/")
    reply = conn.getresponse()
    reply.read()
    conn.close()
    assert reply.status in (302, 303, 307) and reply.getheader("location") == "/ui/"


def test_wrong_method_and_unknown_path_are_problem_json(api: Api) -> None:
    wrong = api.http("DELETE", "/v1/lessons", token=api.alice)
    _refused(wrong, 405, "INVALID_INPUT")
    conn = http.client.HTTPConnection("127.0.0.1", _port(api), timeout=30)
    conn.request("PUT", "/v1/lessons")
    reply = conn.getresponse()
    reply.read()
    conn.close()
    assert reply.status == 405 and reply.getheader("allow") == "GET, POST"  # both routes at that path
    _refused(api.http("GET", "/v1/nothing-here", token=api.alice), 404, "NOT_FOUND")
