"""``status``: the counts ``cairn status`` shows, on both databases."""

from __future__ import annotations

import pytest

from cairn.core.principal import Principal
from cairn.service.api import Cairn


def test_status_counts_active_lessons_and_the_embedding_queue_the_caller_may_see(
    svc: Cairn, me: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_EMBED_MODEL", "hash-test-64")
    svc.write(me, "repo::acme/api", "kept", "Cap retries at three.")
    svc.write(me, "repo::acme/web", "web", "The grid breaks below 600px.")
    svc.write(me, "global", "gone", "Archived below: not active.")
    svc.archive(me, "global", "gone")
    assert svc.status(me) == {"active_lessons": 2, "pending_embeddings": 2, "embedding_model": "hash-test-64"}
    narrow = Principal(me.tenant_id, me.actor, scope_patterns=("repo::acme/web",), user_id=me.user_id)
    assert svc.status(narrow)["active_lessons"] == 1  # never counts a scope it may not read
    assert svc.status(narrow)["pending_embeddings"] == 1
    svc.drain_embeddings(me)
    assert svc.status(me)["pending_embeddings"] == 0
