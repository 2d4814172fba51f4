"""Tombstones that catch paraphrases, on both databases, with the real embedding model.

A write that restates forgotten content in other words lands *held*: out of every read, in the review
queue marked with the tombstone it resembles, until a person verifies or rejects it. Exact and
normalized rewrites stay refused (``TOMBSTONED``); unrelated and negated writes are stored as usual;
the tombstone's vector goes with the forgotten content (purge) and with the tombstone (unforget).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.core.lesson import HELD_CODE
from cairn.core.principal import Principal
from cairn.core.similarity import PARAPHRASE_COSINE
from cairn.runtime.settings import Settings
from cairn.search.embed import MODEL_NAME
from cairn.service.api import Cairn
from cairn.service.catalog.outputs import ReviewQueue, Written
from tests.conftest import human
from tests.contract import refused, rows

SCOPE = "repo::acme/widget"
FORGOTTEN = "The staging deploy key is stored in Vault at ops/deploy/staging."
PARAPHRASE = "The deploy key for staging is stored in Vault at ops/deploy/staging."
PARAPHRASE_2 = "Staging deploy key: stored in Vault, path ops/deploy/staging."
NEGATED = "The staging deploy key is not stored in Vault at ops/deploy/staging."
UNRELATED = "Run the integration suite with pytest -m integration before merging."
REASON = "leaked secret location; moved"


@pytest.fixture(autouse=True)
def _real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paraphrase is meaning, not words: the shipped model, never the hashing test model."""
    monkeypatch.delenv("CAIRN_EMBED_MODEL", raising=False)


def forget_it(svc: Cairn, me: Principal) -> int:
    svc.write(me, SCOPE, "deploy-key", FORGOTTEN)
    return svc.forget(me, SCOPE, "deploy-key", REASON)["tombstone_id"]


def visible_keys(svc: Cairn, p: Principal, query: str) -> dict[str, set[str]]:
    """The keys every read path returns for ``query`` (the queue drained first, as a search does)."""
    svc.drain_embeddings(p)
    out = {"list": {x["key"] for x in svc.list(p, SCOPE)["lessons"]}}
    for mode in ("hybrid", "fts", "vector"):
        out[mode] = {h["key"] for h in svc.search(p, query, scopes=[SCOPE], mode=mode)["results"]}
    out["recall"] = {x["key"] for x in svc.recall(p, query, scopes=[SCOPE], floor=0.0)["lessons"]}
    block = svc.context(p, repo="acme/widget", task=query)
    out["context"] = {x["key"] for x in block["lessons"]}
    return out


def test_a_paraphrase_of_forgotten_content_is_held_out_of_every_read(svc: Cairn, me: Principal) -> None:
    tid = forget_it(svc, me)
    out = svc.write(me, SCOPE, "vault-path", PARAPHRASE)
    assert out["action"] == "created"
    assert out["lesson"]["trust"] == "held" and out["lesson"]["status"] == "held"
    held = out["held"]
    assert Written.model_validate(out).held is not None  # the answer the catalogue declares
    assert held["code"] == HELD_CODE
    assert (held["tombstone_id"], held["scope"], held["key"], held["reason"]) == (tid, SCOPE, "deploy-key", REASON)
    assert held["similarity"] >= PARAPHRASE_COSINE
    svc.write(me, SCOPE, "tests", UNRELATED)  # an ordinary lesson beside it, so the reads do return something
    seen = visible_keys(svc, me, "where is the staging deploy key in vault")
    for path, keys in seen.items():
        assert "vault-path" not in keys, path
    assert "tests" in seen["list"]
    err = refused("NOT_FOUND", svc.read, me, SCOPE, "vault-path")
    assert "held" in err.message
    # The reviewer sees it, marked with the tombstone it resembles.
    page = svc.review_queue(me)
    assert ReviewQueue.model_validate(page).candidates[0].held is not None
    queue = {c["key"]: c for c in page["candidates"]}
    assert queue["vault-path"]["held"]["tombstone_id"] == tid
    assert queue["vault-path"]["held"]["reason"] == REASON
    assert "held" not in queue["tests"]
    # The ledger records why: the tombstone and the cosine, no text.
    (entry,) = [e for e in svc.audit(me, scope=SCOPE, key="vault-path")["entries"] if e["action"] == "create"]
    assert entry["detail"]["held_by"] == tid


def test_an_edit_into_a_paraphrase_holds_the_new_version(svc: Cairn, me: Principal) -> None:
    forget_it(svc, me)
    svc.write(me, SCOPE, "notes", UNRELATED)
    out = svc.write(me, SCOPE, "notes", PARAPHRASE)
    assert (out["action"], out["lesson"]["status"], out["lesson"]["version"]) == ("updated", "held", 2)
    assert "notes" not in {x["key"] for x in svc.list(me, SCOPE)["lessons"]}
    # Writing it again is a recurrence of the held lesson: still held, never promoted.
    again = svc.write(human(me), SCOPE, "notes", PARAPHRASE)
    assert again["lesson"]["status"] == "held"


def test_unrelated_and_negated_writes_are_stored_as_usual(svc: Cairn, me: Principal) -> None:
    forget_it(svc, me)
    for key, text in (("tests", UNRELATED), ("not-in-vault", NEGATED)):
        out = svc.write(me, SCOPE, key, text)
        assert "held" not in out
        assert out["lesson"]["status"] == "active"
    assert {x["key"] for x in svc.list(me, SCOPE)["lessons"]} == {"tests", "not-in-vault"}


def test_exact_and_normalized_rewrites_stay_refused(svc: Cairn, me: Principal) -> None:
    tid = forget_it(svc, me)
    for text in (FORGOTTEN, FORGOTTEN.upper(), "  the staging deploy-key is stored in vault at ops deploy staging "):
        err = refused("TOMBSTONED", svc.write, me, SCOPE, "again", text)
        assert err.data["tombstone_id"] == tid


def test_verify_releases_a_held_lesson_and_reject_keeps_it_out(svc: Cairn, me: Principal) -> None:
    forget_it(svc, me)
    svc.write(me, SCOPE, "vault-path", PARAPHRASE)
    svc.write(me, SCOPE, "vault-path-2", PARAPHRASE_2)
    out = svc.verify(me, SCOPE, "vault-path")
    assert out["changed"] is True and out["lesson"]["trust"] == "verified" and out["lesson"]["status"] == "active"
    svc.reject(me, SCOPE, "vault-path-2", "still the leaked location")
    seen = visible_keys(svc, me, "where is the staging deploy key in vault")
    for path in ("list", "hybrid", "fts"):
        assert "vault-path" in seen[path], path
    for path, keys in seen.items():
        assert "vault-path-2" not in keys, path
    assert svc.read(me, SCOPE, "vault-path")["lesson"]["status"] == "active"
    refused("NOT_FOUND", svc.read, me, SCOPE, "vault-path-2")
    assert {c["key"] for c in svc.review_queue(me)["candidates"]} == set()


def test_purge_erases_the_tombstone_vector(svc: Cairn, me: Principal, store) -> None:
    tid = forget_it(svc, me)
    (vec,) = rows(store, "SELECT vector FROM tombstone_vectors WHERE tombstone_id = :t", t=tid)
    blob = bytes(vec["vector"])
    svc.erase_forgotten(me, SCOPE, "deploy-key")
    assert rows(store, "SELECT * FROM tombstone_vectors") == []
    assert len(rows(store, "SELECT * FROM tombstones WHERE id = :t", t=tid)) == 1  # the tombstone stays
    # With the text and its vector gone, only the exact refusal remains: the paraphrase is stored.
    refused("TOMBSTONED", svc.write, me, SCOPE, "again", FORGOTTEN)
    assert svc.write(me, SCOPE, "vault-path", PARAPHRASE)["lesson"]["status"] == "active"
    if store.dialect == "sqlite":
        store.dispose()  # checkpoint the WAL into the file
        db = Path(store.engine.url.database)
        data = db.read_bytes() + (
            db.with_name(db.name + "-wal").read_bytes() if db.with_name(db.name + "-wal").exists() else b""
        )
        assert blob not in data


def test_the_archived_sweep_erases_the_tombstone_vector(svc: Cairn, me: Principal, store) -> None:
    from datetime import timedelta

    forget_it(svc, me)
    svc.purge(me, archived=True, older_than=timedelta(seconds=0))
    assert rows(store, "SELECT * FROM tombstone_vectors") == []


def test_unforget_removes_the_vector_and_the_hold(svc: Cairn, me: Principal, store) -> None:
    tid = forget_it(svc, me)
    svc.unforget(me, tid, "it was fine after all")
    assert rows(store, "SELECT * FROM tombstone_vectors") == []
    assert svc.write(me, SCOPE, "vault-path", PARAPHRASE)["lesson"]["status"] == "active"


def test_another_tenants_tombstone_never_holds_my_write(svc: Cairn, me: Principal) -> None:
    alice = svc.resolve_token(svc.create_user(me, "alice")["token"])
    bob = svc.resolve_token(svc.create_user(me, "bob")["token"])
    svc.write(bob, SCOPE, "deploy-key", FORGOTTEN)
    svc.forget(bob, SCOPE, "deploy-key", REASON)
    out = svc.write(alice, SCOPE, "vault-path", PARAPHRASE)
    assert "held" not in out and out["lesson"]["status"] == "active"
    assert svc.write(alice, SCOPE, "deploy-key", FORGOTTEN)["lesson"]["status"] == "active"


def test_imports_meet_the_same_check(svc: Cairn, me: Principal, second_store) -> None:
    """A plain record (the bulk lane included) and an exported lesson imported without --restore."""
    forget_it(svc, me)
    plain = [json.dumps({"scope": SCOPE, "key": f"plain-{i}", "value": f"{UNRELATED} ({i})"}) for i in range(3)]
    plain.append(json.dumps({"scope": SCOPE, "key": "plain-held", "value": PARAPHRASE}))
    svc.import_lines(me, plain)
    other = Cairn(second_store, Settings())
    other.ensure_tenant(me)
    other.write(me, SCOPE, "exported", PARAPHRASE_2)
    svc.import_lines(me, list(other.export(me)))
    listed = {x["key"] for x in svc.list(me, SCOPE)["lessons"]}
    assert listed == {"plain-0", "plain-1", "plain-2"}
    queue = {c["key"]: c for c in svc.review_queue(me)["candidates"]}
    assert queue["plain-held"]["held"]["key"] == "deploy-key"
    assert queue["exported"]["held"]["key"] == "deploy-key"


def test_reindex_embeds_the_tombstones_with_the_configured_model(
    svc: Cairn, me: Principal, store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tombstone whose vector is of another model is never compared; reindex re-embeds it."""
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")
    tid = forget_it(svc, me)
    monkeypatch.delenv("CAIRN_EMBED_MODEL")
    assert svc.write(me, SCOPE, "before-reindex", PARAPHRASE)["lesson"]["status"] == "active"
    svc.forget(me, SCOPE, "before-reindex", "clean up")  # its own tombstone, vector of the real model
    out = svc.reindex(me)
    assert out["tombstones_embedded"] == 2
    models = {r["tombstone_id"]: r["model"] for r in rows(store, "SELECT tombstone_id, model FROM tombstone_vectors")}
    assert models[tid] == MODEL_NAME
    assert svc.write(me, SCOPE, "after-reindex", PARAPHRASE_2)["held"]["tombstone_id"] in models


def test_write_many_holds_the_paraphrase_and_writes_the_rest(svc: Cairn, me: Principal) -> None:
    """The batch lane creates plainly new lessons together; one close to a tombstone takes the one
    write path and is held there."""
    forget_it(svc, me)
    items = [{"scope": SCOPE, "key": f"note-{i}", "value": f"{UNRELATED} ({i})"} for i in range(3)]
    items.insert(1, {"scope": SCOPE, "key": "vault-path", "value": PARAPHRASE})
    out = svc.write_many(me, items)
    assert out["results"][1]["held"]["key"] == "deploy-key"
    assert [r["lesson"]["status"] for r in out["results"]] == ["active", "held", "active", "active"]
    assert {x["key"] for x in svc.list(me, SCOPE)["lessons"]} == {"note-0", "note-1", "note-2"}


def test_a_scope_limited_writer_is_held_without_learning_the_tombstone(svc: Cairn, me: Principal) -> None:
    """The tombstone's scope, key and reason are that scope's business, as the exact refusal's are."""
    forget_it(svc, me)  # forgotten in repo::acme/widget
    narrow = svc.resolve_token(svc.token_create(me, perm="write", scope_patterns=["project::*"])["token"])
    out = svc.write(narrow, "project::ops", "vault-path", PARAPHRASE)
    assert out["lesson"]["status"] == "held"
    assert set(out["held"]) == {"code", "similarity"}
    assert REASON not in json.dumps(out)


def test_restoring_an_archived_restatement_of_content_forgotten_since_holds_it(svc: Cairn, me: Principal) -> None:
    """Every transition that makes content active meets the check: a restore as a write does."""
    svc.write(me, SCOPE, "vault-path", PARAPHRASE)
    svc.archive(me, SCOPE, "vault-path")
    tid = forget_it(svc, me)
    out = svc.restore(me, SCOPE, "vault-path")
    assert out["lesson"]["status"] == "held" and out["held"]["tombstone_id"] == tid
    assert "vault-path" not in {x["key"] for x in svc.list(me, SCOPE)["lessons"]}
