"""Sync and tombstones that catch paraphrases: a restatement of forgotten content lands held on the
store that receives it, never active; a held lesson stays on its store until a person decides."""

from __future__ import annotations

import pytest

from cairn.errors import CairnError
from tests.contract import rows
from tests.service.test_sync import Side, pair  # noqa: F401 - the two-store fixture

S = "repo::acme/widget"
FORGOTTEN = "The staging deploy key is stored in Vault at ops/deploy/staging."
PARAPHRASE = "The deploy key for staging is stored in Vault at ops/deploy/staging."


@pytest.fixture(autouse=True)
def _real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paraphrase is meaning, not words: the shipped model, never the hashing test model."""
    monkeypatch.delenv("CAIRN_EMBED_MODEL", raising=False)


def _trust(side: Side, value: str) -> set[str]:
    return {r["trust"] for r in rows(side.store, "SELECT trust, value FROM lessons") if r["value"] == value}


def test_a_pushed_paraphrase_of_forgotten_content_lands_held(pair) -> None:  # noqa: F811
    laptop, server = pair
    server.svc.write(server.me, S, "deploy-key", FORGOTTEN)
    server.svc.forget(server.me, S, "deploy-key", "leaked secret location")
    laptop.svc.write(laptop.me, "global", "vault", PARAPHRASE)  # offline: the laptop knows nothing of it
    result = server.pull_from(laptop)
    assert result.applied == 1 and result.refused == []
    assert _trust(server, PARAPHRASE) == {"held"}
    with pytest.raises(CairnError):
        server.svc.read(server.me, "global", "vault")
    queue = server.svc.review_queue(server.me)["candidates"]
    assert [(c["key"], c["held"]["code"]) for c in queue] == [("vault", "TOMBSTONE_PARAPHRASE")]
    assert server.svc.audit_verify(server.me)["ok"]


def test_a_store_that_held_the_text_catches_paraphrases_after_the_tombstone_arrives(pair) -> None:  # noqa: F811
    laptop, server = pair
    server.svc.write(server.me, S, "deploy-key", FORGOTTEN)
    laptop.pull_from(server)
    server.svc.forget(server.me, S, "deploy-key", "leaked secret location")
    laptop.pull_from(server)  # the laptop had the text: it keeps the tombstone's vector
    out = laptop.svc.write(laptop.me, "global", "vault", PARAPHRASE)
    assert out["lesson"]["trust"] == "held"
    # A held lesson stays on its store: its text resembles forgotten content.
    feed = laptop.svc.sync_feed(laptop.me, since=0, exclude_origin=server.id)
    assert PARAPHRASE not in feed.model_dump_json()
