"""Every operation the catalogue declares is reachable on every surface that should have it.

Over a real server: the HTTP route answers with the declared output model, the MCP tool is listed
by the SDK's own client (over ``/mcp``), and the remote client has a method that reaches it. And
the negative: a read-only token is refused (403 ``FORBIDDEN``) on every operation that writes,
on each surface, the list of such operations taken from the catalogue itself.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

import anyio

from cairn.errors import CairnError
from cairn.runtime.remote import RemoteCairn
from cairn.service.catalog import OPERATIONS, Operation, input_model, output_model
from tests.api.conftest import Api
from tests.mcp.test_http import _with

ORG = "catorg"
# A valid value for every required input field of every operation, by field name.
SAMPLE: dict[str, Any] = {
    "scope": "project::catalogue",
    "key": "cat-one",
    "value": "Declared once, served everywhere.",
    "reason": "wrong",
    "outcome": "helped",
    "other_scope": "project::catalogue",
    "other_key": "cat-two",
    "rel": "related",
    "tombstone_id": 1,
    "query": "declared",
    "text": "declared once error",
    "v1": 1,
    "v2": 2,
    "org": ORG,
    "user": "bob",
    "role": "member",
    "invite_id": 1,
    "code": "no-such-code",
    "pattern": f"repo::{ORG}/*",
    "sweep": "expired",
    "name": "Catalogue Org",
    "lines": ['{"scope": "global", "key": "imported", "value": "imported once"}'],
    "token_id": 1,
    "conversation_id": 1,  # the gateway conversation _setup records (its id set there)
    "run_id": 1,  # the consolidation run _setup plans (its id set there)
    "repo": "catorg/widget",
    "confirm": ORG,  # optional, but deleting an org without it is refused before the permission is
    # sync: a peer store's id, and an empty page of its feed (the apply is refused a reader before it reads)
    "store_id": "5" * 32,
    "events": [],
    "cursor": 0,
    "more": False,
    "head": {"seq": 0, "hash": "0" * 64},
}


def _required(op: Operation) -> dict[str, Any]:
    return {n: SAMPLE[n] for n, f in input_model(op).model_fields.items() if f.is_required() or n == "confirm"}


def _request(api: Api, op: Operation, token: str) -> Any:
    """``op``'s route with its required input, placed by hand (not through the derivation under test)."""
    assert op.http is not None
    fields = _required(op)
    path = op.http.path
    for name in op.http.path_fields:
        path = path.replace("{" + name + "}", str(fields.pop(name)))
    if op.http.method == "POST":
        return api.http("POST", path, fields, token)
    return api.http(op.http.method, path + ("?" + urllib.parse.urlencode(fields) if fields else ""), token=token)


def _setup(api: Api) -> None:
    t = api.alice
    for value in ("Declared once, served everywhere.", "Declared once, served on every surface."):
        api.http("POST", "/v1/lessons", {"scope": "project::catalogue", "key": "cat-one", "value": value}, t)
    api.http("POST", "/v1/lessons", {"scope": "project::catalogue", "key": "cat-two", "value": "The other."}, t)
    api.http("POST", "/v1/orgs", {"org": ORG}, t)
    # A conversation as the gateway records one (its first turn; later calls are replays).
    from cairn.core.gateway import Attribution
    from cairn.service.conversations import Conversations

    p, ledger = api.svc.resolve_token(t), Conversations(api.svc)
    where = Attribution("acme/catalogue", None, None, "headers")
    recorded = ledger.record(
        p, where, protocol="openai", thread="catalogue", model="m", messages=[("user", "Declared once.")],
        answer="Served everywhere.", snapshot=ledger.epoch(p),
    )  # fmt: skip
    # Ids are the server's (other modules' tenants share it): the one this module's tenant recorded.
    if recorded["recorded"]:
        SAMPLE["conversation_id"] = recorded["conversation"]
    SAMPLE["run_id"] = api.http("POST", "/v1/consolidation/plan", {}, t).body["run"]["id"]


def test_every_reading_operation_answers_with_its_declared_model_over_http_and_remote(api: Api) -> None:
    _setup(api)
    remote = RemoteCairn(api.http.base, api.alice)
    checked = 0
    for op in OPERATIONS:
        if op.http is None or op.writes:
            continue
        reply = _request(api, op, api.alice)
        assert reply.status == 200, (op.name, reply.body)
        output_model(op).model_validate(reply.body)
        if op.remote:  # the derived method reaches the same route and gets the same answer's shape
            answer = getattr(remote, op.name)(None, **_required(op))
            output_model(op).model_validate(answer)
            assert set(answer) == set(reply.body), op.name
        checked += 1
    assert checked >= 20


def test_the_openapi_document_has_every_declared_route_with_its_models(api: Api) -> None:
    doc = api.http("GET", "/openapi.json").body
    for op in OPERATIONS:
        if op.http is None:
            continue
        route = doc["paths"][op.http.path][op.http.method.lower()]
        assert route["operationId"] == op.http.operation_id, op.name
        schema = route["responses"]["200"]["content"]["application/json"]["schema"]
        assert schema == {"$ref": f"#/components/schemas/{output_model(op).__name__}"}, op.name


def test_every_declared_tool_is_listed_by_the_sdk_client_with_its_hints(api: Api) -> None:
    async def script(c):  # type: ignore[no-untyped-def]
        return {t.name: t for t in (await c.list_tools()).tools}

    tools = anyio.run(_with, api, api.alice, script)
    declared = {op.mcp.name: op for op in OPERATIONS if op.mcp is not None}
    assert set(tools) == set(declared)
    for name, op in declared.items():
        assert tools[name].annotations.read_only_hint is (not op.writes), name


def test_the_remote_client_has_every_operation_with_a_route() -> None:
    for op in OPERATIONS:
        if op.http is not None:
            assert callable(getattr(RemoteCairn, op.name, None)), op.name


def test_a_read_only_token_is_refused_on_every_writing_operation_on_every_surface(api: Api) -> None:
    _setup(api)
    me = api.svc.resolve_token(api.alice)
    reader = api.svc.token_create(me, perm="read")["token"]
    before = json.dumps(api.http("GET", "/v1/audit?limit=1000", token=api.alice).body["entries"])
    writing = [op for op in OPERATIONS if op.writes and op.permission in ("write", "admin")]
    assert len(writing) >= 20
    remote = RemoteCairn(api.http.base, reader)
    for op in writing:
        if op.http is not None:
            reply = _request(api, op, reader)
            assert (reply.status, reply.body["code"]) == (403, "FORBIDDEN"), (op.name, reply.body)
        if op.http is not None and op.remote:
            try:
                getattr(remote, op.name)(None, **_required(op))
                raise AssertionError(f"the remote {op.name} wrote with a read-only token")
            except CairnError as exc:
                assert exc.code == "FORBIDDEN", (op.name, exc)

    async def script(c):  # type: ignore[no-untyped-def]
        codes = {}
        for op in writing:
            if op.mcp is not None:
                args = {n: v for n, v in _required(op).items() if n in (op.mcp.fields or input_model(op).model_fields)}
                out = await c.call_tool(op.mcp.name, args)
                codes[op.name] = (out.is_error, out.structured_content.get("code"))
        return codes

    codes = anyio.run(_with, api, reader, script)
    assert codes and set(codes.values()) == {(True, "FORBIDDEN")}, codes
    after = json.dumps(api.http("GET", "/v1/audit?limit=1000", token=api.alice).body["entries"])
    assert after == before  # nothing was written anywhere
