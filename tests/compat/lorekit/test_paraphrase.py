"""LoreKit's surface over a held write: a memory that restates forgotten content is stored held and
no LoreKit read (get, list, search, relevant) returns it (both databases, a real HTTP client)."""

from __future__ import annotations

from tests.compat.lorekit.conftest import LoreKitServer
from tests.compat.lorekit.test_rest import q, read, write

SCOPE = "project::vault"
FORGOTTEN = "The staging deploy key is stored in Vault at ops/deploy/staging."
PARAPHRASE = "The deploy key for staging is stored in Vault at ops/deploy/staging."


def test_a_held_memory_is_out_of_every_lorekit_read(lk: LoreKitServer) -> None:
    p = lk.svc.resolve_token(lk.alice)
    write(lk, SCOPE, "deploy-key", FORGOTTEN)
    lk.svc.forget(p, SCOPE, "deploy-key", "leaked")
    write(lk, SCOPE, "other", "Rotate the staging database password every quarter.")
    assert write(lk, SCOPE, "vault-path", PARAPHRASE).status in (200, 201)
    assert lk.svc.review_queue(p)["candidates"][-1]["held"]["key"] == "deploy-key"
    assert read(lk, SCOPE, "vault-path") == []
    listed = lk.http("GET", "/memories" + q(scope=SCOPE), token=lk.alice).body["entries"]
    assert [e["key"] for e in listed] == ["other"]
    found = lk.http("POST", "/memories/search", {"q": "staging deploy key vault", "scopes": [SCOPE]}, token=lk.alice)
    assert "vault-path" not in {e["key"] for e in found.body["entries"]}
    rel = lk.http("GET", "/memories/relevant" + q(q="staging deploy key vault", scopes=SCOPE), token=lk.alice)
    assert "vault-path" not in {e["key"] for e in rel.body["entries"]}
