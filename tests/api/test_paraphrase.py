"""Over HTTP (a real server on loopback, both databases): a restatement of forgotten content is written
held, said so in the write's answer, absent from every read endpoint, and waits in the review queue
marked with the tombstone it resembles until a person verifies it."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Api

SCOPE = "repo::acme/vault"
FORGOTTEN = "The staging deploy key is stored in Vault at ops/deploy/staging."
PARAPHRASE = "The deploy key for staging is stored in Vault at ops/deploy/staging."
NEGATED = "The staging deploy key is not stored in Vault at ops/deploy/staging."
UNRELATED = "Run the integration suite with pytest -m integration before merging."
QUERY = "staging deploy key vault"


def keys_everywhere(api: Api, token: str) -> dict[str, set[str]]:
    """The keys each read endpoint returns for the query."""
    h = api.http
    out = {"list": {x["key"] for x in h("GET", f"/v1/lessons?scope={SCOPE}", token=token).body["lessons"]}}
    for mode in ("hybrid", "fts", "vector"):
        body = h("POST", "/v1/search", {"query": QUERY, "scopes": [SCOPE], "mode": mode}, token).body
        out[mode] = {x["key"] for x in body["results"]}
    out["recall"] = {
        x["key"] for x in h("POST", "/v1/recall", {"text": QUERY, "scopes": [SCOPE]}, token).body["lessons"]
    }
    block = h("POST", "/v1/context", {"repo": "acme/vault", "task": QUERY}, token).body
    out["context"] = {x["key"] for x in block["lessons"]}
    out["context text"] = {"vault-path"} if "deploy key for staging" in block["text"] else set()
    return out


def write(api: Api, key: str, value: str) -> dict[str, Any]:
    reply = api.http("POST", "/v1/lessons", {"scope": SCOPE, "key": key, "value": value}, api.alice)
    assert reply.status == 200, reply.body
    return reply.body


def test_a_paraphrase_is_held_out_of_every_endpoint_until_verified(api: Api) -> None:
    write(api, "deploy-key", FORGOTTEN)
    forgot = api.http("POST", "/v1/lesson/forget", {"scope": SCOPE, "key": "deploy-key", "reason": "leaked"}, api.alice)
    tid = forgot.body["tombstone_id"]
    exact = api.http("POST", "/v1/lessons", {"scope": SCOPE, "key": "again", "value": FORGOTTEN}, api.alice)
    assert exact.status == 409 and exact.body["code"] == "TOMBSTONED"
    held = write(api, "vault-path", PARAPHRASE)
    assert held["lesson"]["status"] == "held"
    assert held["held"]["code"] == "TOMBSTONE_PARAPHRASE" and held["held"]["tombstone_id"] == tid
    assert held["held"]["reason"] == "leaked"
    assert "held" not in write(api, "not-in-vault", NEGATED)
    assert "held" not in write(api, "tests", UNRELATED)
    seen = keys_everywhere(api, api.alice)
    for path, keys in seen.items():
        assert "vault-path" not in keys, path
    assert "not-in-vault" in seen["list"]
    read = api.http("GET", f"/v1/lesson?scope={SCOPE}&key=vault-path", token=api.alice)
    assert read.status == 404
    queue = {c["key"]: c for c in api.http("GET", "/v1/review", token=api.alice).body["candidates"]}
    assert queue["vault-path"]["held"]["tombstone_id"] == tid
    # Another tenant's reads never see it either, and its own write of the same text is not held.
    assert "vault-path" not in keys_everywhere(api, api.bob)["list"]
    other = api.http("POST", "/v1/lessons", {"scope": SCOPE, "key": "vault-path", "value": PARAPHRASE}, api.bob)
    assert other.status == 200 and "held" not in other.body
    # A person's verify releases it.
    assert api.http("POST", "/v1/review/verify", {"scope": SCOPE, "key": "vault-path"}, api.alice).status == 200
    released = keys_everywhere(api, api.alice)
    assert "vault-path" in released["list"] and "vault-path" in released["fts"]
    assert api.http("GET", f"/v1/lesson?scope={SCOPE}&key=vault-path", token=api.alice).status == 200
