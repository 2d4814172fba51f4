"""The HTTP API over a real socket: bearer tokens, problem+json codes, tenancy, input limits."""

from __future__ import annotations

import json

from tests.api.conftest import Api

S = "repo::acme/widget"


def test_health_needs_no_token(api: Api) -> None:
    r = api.http("GET", "/v1/health")
    assert (r.status, r.body) == (200, {"status": "ok"})


def test_no_token_or_a_bad_one_is_401_problem_json(api: Api) -> None:
    for token in (None, "cairn_not-a-real-token", "garbage"):
        r = api.http("GET", "/v1/lessons", token=token)
        assert r.status == 401, r
        assert r.content_type.startswith("application/problem+json")
        assert r.body["code"] == "UNAUTHENTICATED" and r.body["status"] == 401


def test_write_read_history_archive_restore_round_trip(api: Api) -> None:
    w = api.http("POST", "/v1/lessons", {"scope": S, "key": "build-cmd", "value": "Run make build."}, api.alice)
    assert w.status == 200 and w.body["action"] == "created"
    api.http("POST", "/v1/lessons", {"scope": S, "key": "build-cmd", "value": "Run make build, twice."}, api.alice)
    r = api.http("GET", f"/v1/lesson?scope={S}&key=build-cmd", token=api.alice)
    assert r.status == 200 and r.body["lesson"]["value"] == "Run make build, twice."
    h = api.http("GET", f"/v1/lesson/history?scope={S}&key=build-cmd", token=api.alice)
    assert [v["version"] for v in h.body["versions"]] == [1, 2]
    assert api.http("POST", "/v1/lesson/archive", {"scope": S, "key": "build-cmd"}, api.alice).status == 200
    hidden = api.http("GET", f"/v1/lesson?scope={S}&key=build-cmd", token=api.alice)
    assert (hidden.status, hidden.body["code"]) == (404, "NOT_FOUND")  # an archived lesson is not served
    assert api.http("POST", "/v1/lesson/restore", {"scope": S, "key": "build-cmd"}, api.alice).status == 200
    assert api.http("GET", f"/v1/lesson?scope={S}&key=build-cmd", token=api.alice).status == 200


def test_forget_then_the_rewrite_is_refused_409_tombstoned(api: Api) -> None:
    api.http("POST", "/v1/lessons", {"scope": "global", "key": "bad", "value": "Disable the tests."}, api.alice)
    f = api.http("POST", "/v1/lesson/forget", {"scope": "global", "key": "bad", "reason": "wrong"}, api.alice)
    assert f.status == 200
    again = api.http(
        "POST", "/v1/lessons", {"scope": "global", "key": "other", "value": "Disable the tests."}, api.alice
    )
    assert again.status == 409 and again.body["code"] == "TOMBSTONED"


def test_another_tenants_token_sees_nothing(api: Api) -> None:
    api.http("POST", "/v1/lessons", {"scope": S, "key": "alice-secret", "value": "alice only zebra"}, api.alice)
    assert api.http("GET", f"/v1/lesson?scope={S}&key=alice-secret", token=api.bob).status == 404
    listing = api.http("GET", "/v1/lessons", token=api.bob)
    assert listing.status == 200 and "zebra" not in json.dumps(listing.body)
    found = api.http("POST", "/v1/search", {"query": "zebra", "mode": "fts"}, api.bob)
    assert found.status == 200 and found.body["results"] == []
    ctx = api.http("POST", "/v1/context", {"repo": "acme/widget"}, api.bob)
    assert ctx.status == 200 and "zebra" not in ctx.body["text"]


def test_a_read_only_token_cannot_write(api: Api) -> None:
    me = api.svc.resolve_token(api.alice)
    ro = api.svc.token_create(me, perm="read")["token"]
    r = api.http("POST", "/v1/lessons", {"scope": "global", "key": "k", "value": "v"}, ro)
    assert r.status == 403 and r.body["code"] == "FORBIDDEN"
    assert api.http("GET", "/v1/lessons", token=ro).status == 200


def test_a_scope_limited_token_cannot_leave_its_scopes(api: Api) -> None:
    me = api.svc.resolve_token(api.alice)
    narrow = api.svc.token_create(me, perm="write", scope_patterns=["repo::acme/*"])["token"]
    ok = api.http("POST", "/v1/lessons", {"scope": "repo::acme/api", "key": "k", "value": "inside"}, narrow)
    assert ok.status == 200
    out = api.http("POST", "/v1/lessons", {"scope": "repo::other/api", "key": "k", "value": "outside"}, narrow)
    assert out.status == 403 and out.body["code"] == "FORBIDDEN"


def test_bad_input_is_4xx_with_a_code_never_500(api: Api) -> None:
    cases = [
        ({"scope": "repo:acme/widget", "key": "k", "value": "v"}, 400, "INVALID_SCOPE"),
        ({"scope": S, "key": "k"}, 400, "INVALID_INPUT"),  # missing value
        ({"scope": S, "key": "k", "value": 5}, 400, "INVALID_INPUT"),  # wrong type
        ({"scope": S, "key": "k", "value": "v", "surprise": 1}, 400, "INVALID_INPUT"),  # unknown field
        ({"scope": S, "key": "k", "value": "v", "ttl": "soonish"}, 400, "INVALID_TTL"),
        ({"scope": S, "key": "k", "value": "x" * 70000}, 413, "VALUE_TOO_LARGE"),  # over 64 KiB: the service says so
        ({"scope": S, "key": "k", "value": "é" * 40000}, 413, "VALUE_TOO_LARGE"),  # 40,000 chars, 80,000 bytes
    ]
    for body, status, code in cases:
        r = api.http("POST", "/v1/lessons", body, api.alice)
        assert (r.status, r.body["code"]) == (status, code), (body, r)
    fixable = api.http("POST", "/v1/lessons", cases[0][0], api.alice).body
    assert fixable["data"]["corrected"] == "repo::acme/widget"  # the corrected form, as the CLI gives it
    malformed = api.http("POST", "/v1/lessons", raw=b'{"scope": ', token=api.alice)
    assert malformed.status == 400 and malformed.body["code"] == "INVALID_INPUT"
    huge = api.http("POST", "/v1/lessons", raw=b"x" * (300 * 1024), token=api.alice)
    assert huge.status == 413 and huge.body["code"] == "VALUE_TOO_LARGE"


def test_the_openapi_schema_lists_every_endpoint(api: Api) -> None:
    schema = api.http("GET", "/openapi.json").body
    paths = set(schema["paths"])
    assert {"/v1/lessons", "/v1/lesson", "/v1/search", "/v1/recall", "/v1/context", "/v1/audit/verify"} <= paths
    bearer = schema["components"]["securitySchemes"]["HTTPBearer"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")  # Swagger's Authorize; clients send it
    ops = {(m, p): op for p, item in schema["paths"].items() for m, op in item.items()}
    assert ops[("post", "/v1/lessons")]["operationId"] == "writeLesson"
    assert ops[("get", "/v1/lessons")]["operationId"] == "listLessons"
    assert len({op["operationId"] for op in ops.values()}) == len(ops)  # unique
    for (method, path), op in ops.items():
        assert "422" not in op["responses"], (method, path)  # never sent: invalid input is 400 problem+json
        if path == "/v1/health":
            assert "security" not in op
            continue
        assert op["security"] == [{"HTTPBearer": []}], (method, path)
        for status in ("400", "401", "403", "404", "409", "413", "429"):
            content = op["responses"][status]["content"]
            assert content == {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    assert {"code", "detail", "status"} <= set(schema["components"]["schemas"]["Problem"]["required"])
    typed = {
        ("post", "/v1/lessons"): "Written",
        ("get", "/v1/lessons"): "LessonPage",
        ("post", "/v1/search"): "SearchResults",
    }
    for (method, path), model in typed.items():
        body = ops[(method, path)]["responses"]["200"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{model}"}, (method, path, body)
    assert "lesson" in schema["components"]["schemas"]["Written"]["required"]


def test_every_operation_documents_a_typed_success_body(api: Api) -> None:
    schema = api.http("GET", "/openapi.json").body
    components = schema["components"]["schemas"]

    def fields(body: dict) -> set[str]:
        """The named fields a success schema promises (a bare object or ``{}`` promises none)."""
        if "$ref" in body:
            body = components[body["$ref"].rsplit("/", 1)[-1]]
        return set(body.get("properties", {}))

    checked = 0
    for path, item in schema["paths"].items():
        for method, op in item.items():
            ok = [s for s in ("200", "201") if s in op["responses"]]
            assert ok, (method, path)
            for media, content in op["responses"][ok[0]]["content"].items():
                if (method, path, media) == ("get", "/v1/export", "application/x-ndjson"):
                    assert content["schema"] == {"type": "string"}  # the streamed alternative: lines of text
                    continue
                assert fields(content["schema"]), (method, path, media, content["schema"])
                checked += 1
    assert checked >= 40  # every endpoint, not a handful
    # The secrets a create answers with once are part of its documented shape.
    assert {"token", "token_id", "prefix"} <= set(components["NewToken"]["required"])
    assert "code" in components["NewInvite"]["required"]
    # What the service sometimes leaves out or sends as null is optional, never a required field.
    assert "next_cursor" not in components["AuditPage"].get("required", [])
    assert "note" not in components["TokenRevoked"].get("required", [])


def test_audit_through_the_api_verifies(api: Api) -> None:
    api.http("POST", "/v1/lessons", {"scope": "global", "key": "audited", "value": "an audited lesson"}, api.bob)
    assert api.http("GET", "/v1/audit/verify", token=api.bob).body["ok"] is True
    entries = api.http("GET", "/v1/audit?limit=50", token=api.bob).body["entries"]
    assert any(e.get("key") == "audited" for e in entries)


def test_an_org_through_the_api_invite_accept_and_an_org_token(api: Api) -> None:
    made = api.http("POST", "/v1/orgs", {"org": "apiorg"}, api.alice)
    assert made.status == 200 and made.body["role"] == "owner"
    invite = api.http("POST", "/v1/orgs/apiorg/invites", {"role": "member"}, api.alice).body
    assert api.http("POST", "/v1/invites/accept", {"code": invite["code"]}, api.bob).body["role"] == "member"
    again = api.http("POST", "/v1/invites/accept", {"code": invite["code"]}, api.bob)
    assert again.status == 409 and again.body["code"] == "CONFLICT"
    # bob, a member, cannot invite (403) and cannot mint an admin token for the org
    assert api.http("POST", "/v1/orgs/apiorg/invites", {"role": "viewer"}, api.bob).status == 403
    assert api.http("POST", "/v1/tokens", {"perm": "admin", "org": "apiorg"}, api.bob).status == 403
    tok = api.http("POST", "/v1/tokens", {"perm": "write", "org": "apiorg", "name": "ci"}, api.bob).body
    assert tok["token"].startswith("cairn_")
    listed = api.http("GET", "/v1/tokens", token=api.bob).body["tokens"]
    assert tok["token"] not in json.dumps(listed)  # a secret is shown once, never listed
    w = api.http("POST", "/v1/lessons", {"scope": "repo::apiorg/x", "key": "k", "value": "org lesson"}, tok["token"])
    assert w.status == 200
    members = api.http("GET", "/v1/orgs/apiorg/members", token=api.alice).body["members"]
    assert {m["user"]: m["role"] for m in members} == {api.alice_name: "owner", api.bob_name: "member"}
    assert api.http("POST", f"/v1/tokens/{tok['id']}/revoke", {}, api.bob).status == 200
    gone = api.http("GET", "/v1/lessons", token=tok["token"])
    assert gone.status == 401 and gone.body["code"] == "UNAUTHENTICATED"
    assert api.http("DELETE", "/v1/orgs/apiorg", token=api.bob).status in (400, 403)
    assert api.http("DELETE", "/v1/orgs/apiorg?confirm=apiorg", token=api.alice).body["deleted"] is True


def test_supersede_link_neighborhood_review_and_export_round_trip(api: Api) -> None:
    t = api.bob
    api.http("POST", "/v1/lessons", {"scope": "global", "key": "old-way", "value": "Use pip."}, t)
    sup = api.http("POST", "/v1/lesson/supersede", {"scope": "global", "key": "new-way", "value": "Use uv.",
                                                    "old_scope": "global", "old_key": "old-way"}, t)  # fmt: skip
    assert sup.status == 200 and sup.body["superseded"]["key"] == "old-way"
    api.http("POST", "/v1/lessons", {"scope": "global", "key": "lock", "value": "Commit the lockfile."}, t)
    assert api.http("POST", "/v1/lesson/link", {"scope": "global", "key": "new-way", "other_scope": "global",
                                                "other_key": "lock", "rel": "related"}, t).status == 200  # fmt: skip
    hood = api.http("GET", "/v1/lesson/neighborhood?scope=global&key=new-way", token=t).body
    assert "lock" in json.dumps(hood)
    queue = api.http("GET", "/v1/review", token=t).body
    assert any(c["key"] == "lock" for c in queue["candidates"])
    assert api.http("POST", "/v1/review/verify", {"scope": "global", "key": "lock"}, t).status == 200
    lines = api.http("GET", "/v1/export", token=t).body["lines"]
    assert any('"new-way"' in line for line in lines)
    assert api.http("POST", "/v1/import", {"lines": lines}, t).body["created"] == 0  # idempotent


def test_the_schema_carries_the_scope_grammar_sizes_and_enums(api: Api) -> None:
    schema = api.http("GET", "/openapi.json").body
    write = schema["components"]["schemas"]["WriteBody"]["properties"]
    assert write["scope"]["pattern"].startswith("^\\s*([Gg]")
    assert write["value"]["maxLength"] == 65536 and write["key"]["maxLength"] == 200
    assert set(write["kind"]["enum"]) == {"lesson", "fact", "preference", "reference"}


def test_the_scope_map_through_the_api_counts_only_the_tokens_store(api: Api) -> None:
    api.http("POST", "/v1/lessons", {"scope": "repo::mapco/one", "key": "k", "value": "mapped lesson"}, api.bob)
    mine = {s["scope"]: s for s in api.http("GET", "/v1/scopes", token=api.bob).body["scopes"]}
    assert mine["repo::mapco/one"]["active"] == 1
    theirs = {s["scope"] for s in api.http("GET", "/v1/scopes", token=api.alice).body["scopes"]}
    assert "repo::mapco/one" not in theirs


def test_lists_page_with_cursors_and_refuse_a_bad_one(api: Api) -> None:
    for i in range(5):
        body = {"scope": "project::paging", "key": f"p{i}", "value": f"page me {i}"}
        api.http("POST", "/v1/lessons", body, api.alice)
    seen, cursor = [], None
    while True:
        query = "/v1/lessons?scope=project::paging&limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = api.http("GET", query, token=api.alice).body
        seen += [r["key"] for r in page["lessons"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == [f"p{i}" for i in range(5)] and len(seen) == 5
    bad = api.http("GET", "/v1/lessons?cursor=bm9wZQ", token=api.alice)
    assert bad.status == 400 and bad.body["code"] == "INVALID_INPUT" and "next_cursor" in bad.body["detail"]
    other = api.http("GET", "/v1/audit?limit=1", token=api.alice).body["next_cursor"]
    assert api.http("GET", f"/v1/lessons?cursor={other}", token=api.alice).status == 400  # another list's cursor


def test_ndjson_import_takes_a_whole_file_and_export_streams_it(api: Api) -> None:
    records = [{"scope": "project::bulk", "key": f"b{i}", "value": f"bulk {i} " + "y" * 900} for i in range(400)]
    lines = [json.dumps(r) for r in records]
    payload = ("\n".join(lines) + "\n").encode()
    assert len(payload) > 256 * 1024  # over the JSON body limit, under the NDJSON one
    as_json = api.http("POST", "/v1/import", {"lines": lines}, api.alice)
    assert as_json.status == 413 and as_json.body["code"] == "VALUE_TOO_LARGE"
    ndjson = {"Content-Type": "application/x-ndjson"}
    done = api.http("POST", "/v1/import", raw=payload, token=api.alice, headers=ndjson)
    assert done.status == 200 and done.body["created"] == 400
    broken = api.http("POST", "/v1/import", raw=b'{"scope": "global", "key": "a", "value": "ok"}\n{oops\n',
                      token=api.alice, headers=ndjson)  # fmt: skip
    assert broken.status == 400 and "line 2" in broken.body["detail"]
    assert api.http("GET", "/v1/lesson?scope=global&key=a", token=api.alice).status == 404  # nothing imported
    import urllib.request

    req = urllib.request.Request(
        api.http.base + "/v1/export?scope=project::bulk",
        headers={"Authorization": f"Bearer {api.alice}", "Accept": "application/x-ndjson"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.headers["content-type"].startswith("application/x-ndjson")
        streamed = [json.loads(line) for line in resp.read().decode().splitlines()]
    assert streamed[0]["type"] == "header"
    assert sum(1 for r in streamed if r.get("type") == "lesson") == 400
    # Bob's export has none of it.
    assert "project::bulk" not in json.dumps(api.http("GET", "/v1/export", token=api.bob).body)


def test_whoami_and_purge(api: Api) -> None:
    me = api.http("GET", "/v1/whoami", token=api.alice).body
    assert (me["user"], me["permission"], me["scope_patterns"]) == (api.alice_name, "admin", [])
    assert api.http("GET", "/v1/whoami", token="cairn_" + "z" * 43).status == 401
    assert api.http("POST", "/v1/purge", {"sweep": "sometime"}, api.alice).status == 400
    done = api.http("POST", "/v1/purge", {"sweep": "archived", "older_than": "1s"}, api.alice)
    assert done.status == 200 and done.body["sweep"] == "archived"
    reader = api.http("POST", "/v1/tokens", {"perm": "read"}, api.alice).body["token"]
    refused = api.http("POST", "/v1/purge", {"sweep": "expired"}, reader)
    assert refused.status == 403 and refused.body["code"] == "FORBIDDEN"


def test_import_carries_data_not_authority_over_http(api: Api) -> None:
    from dataclasses import replace

    from cairn.errors import CairnError
    from cairn.runtime.remote import RemoteCairn

    alice = api.svc.resolve_token(api.alice)
    api.svc.write(replace(alice, human=True), "global", "claimed-lesson", "Alice vouched for this, in her store.")
    lines = [
        line for line in api.http("GET", "/v1/export", token=api.alice).body["lines"]
        if '"claimed-lesson"' in line or '"header"' in line
    ]  # fmt: skip
    bob = api.svc.resolve_token(api.bob)
    writer = api.svc.token_create(bob, perm="write")["token"]
    before = api.svc.audit(bob, limit=1000)["entries"]
    # A write token may not restore: 403, nothing written, over the API and through the remote client.
    denied = api.http("POST", "/v1/import?restore=true", {"lines": lines}, writer)
    assert denied.status == 403 and denied.body["code"] == "FORBIDDEN"
    try:
        RemoteCairn(api.http.base, writer).import_lines(None, lines, restore=True)
        raise AssertionError("a write token restored an import")
    except CairnError as exc:
        assert exc.code == "FORBIDDEN"
    assert api.svc.audit(bob, limit=1000)["entries"] == before
    # Without restore the lesson lands as the writer's candidate; the file's word is a claim.
    landed = api.http("POST", "/v1/import", {"lines": lines}, writer)
    assert landed.status == 200 and landed.body["created"] == 1 and landed.body["restore"] is False
    read = api.http("GET", "/v1/lesson?scope=global&key=claimed-lesson", token=api.bob).body["lesson"]
    assert (read["trust"], read["origin"], read["author"]) == ("candidate", "import", api.bob_name)
    assert (read["claimed"]["trust"], read["claimed"]["author"], read["claimed"]["origin"]) == (
        "verified",
        api.alice_name,
        "human",
    )
    # Tags as a string are refused with the line, not split into characters; nothing is imported.
    bad = json.dumps({"scope": "global", "key": "tagged", "value": "tags as a string", "tags": "deploy"})
    refused = api.http("POST", "/v1/import", {"lines": [bad]}, writer)
    assert refused.status == 400 and refused.body["code"] == "INVALID_INPUT" and "line 1" in refused.body["detail"]
    assert api.http("GET", "/v1/lesson?scope=global&key=tagged", token=api.bob).status == 404


def test_an_admin_restore_over_http_is_exact_and_audited(api: Api) -> None:
    from dataclasses import replace

    from cairn.runtime.remote import RemoteCairn

    alice = api.svc.resolve_token(api.alice)
    api.svc.write(replace(alice, human=True), "project::restore", "exact", "Restored exactly as written.")
    lines = api.http("GET", "/v1/export?scope=project::restore", token=api.alice).body["lines"]
    bob = api.svc.resolve_token(api.bob)
    out = RemoteCairn(api.http.base, api.bob).import_lines(None, lines, restore=True)
    assert out["restore"] is True and out["created"] == 1
    read = api.http("GET", "/v1/lesson?scope=project::restore&key=exact", token=api.bob).body["lesson"]
    assert (read["trust"], read["author"], read["claimed"]) == ("verified", api.alice_name, None)
    entry = [e for e in api.svc.audit(bob, limit=1000)["entries"] if e["action"] == "import"][-1]
    assert entry["detail"]["restore"] is True


def test_restoring_an_archived_twin_of_forgotten_content_is_409_tombstoned(api: Api) -> None:
    t = api.alice
    api.http("POST", "/v1/lessons", {"scope": "project::twins", "key": "twin", "value": "Skip the lint step."}, t)
    api.http("POST", "/v1/lesson/archive", {"scope": "project::twins", "key": "twin"}, t)
    look_alike = "Skip the lіnt step."  # Cyrillic і: the same text to a reader
    api.http("POST", "/v1/lessons", {"scope": "global", "key": "orig", "value": look_alike}, t)
    api.http("POST", "/v1/lesson/forget", {"scope": "global", "key": "orig", "reason": "lint is required"}, t)
    r = api.http("POST", "/v1/lesson/restore", {"scope": "project::twins", "key": "twin"}, t)
    assert r.status == 409 and r.body["code"] == "TOMBSTONED"
    assert api.http("GET", "/v1/lesson?scope=project::twins&key=twin", token=t).status == 404  # still archived
