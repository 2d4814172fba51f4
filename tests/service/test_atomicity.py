"""Every mutation is one transaction: a failure at its last step leaves nothing behind."""

from __future__ import annotations

import pytest

from cairn.service import audit
from cairn.service.api import Cairn
from tests.contract import snapshot

S = "repo::acme/widget"


class Boom(RuntimeError):
    pass


def fail_audit_on_call(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Make the n-th audit append of the next operation fail (the audit row is written last)."""
    real = audit.record_many  # every audit append (record() too) goes through record_many
    calls = {"n": 0}

    def record_many(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == n:
            raise Boom("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(audit, "record_many", record_many)


@pytest.fixture
def seeded(svc: Cairn, me) -> Cairn:
    svc.write(me, S, "k", "first value", tags=["a"])
    svc.write(me, S, "old", "old way")
    return svc


OPERATIONS = {
    "create": (1, lambda svc, me: svc.write(me, S, "new", "brand new", tags=["x", "y"])),
    "edit": (1, lambda svc, me: svc.write(me, S, "k", "second value", tags=["b"])),
    "recur": (1, lambda svc, me: svc.write(me, S, "k", "first value")),
    "archive": (1, lambda svc, me: svc.archive(me, S, "k")),
    "forget": (1, lambda svc, me: svc.forget(me, S, "k", "wrong")),
    "supersede, second lesson": (2, lambda svc, me: svc.supersede(me, S, "new", "new way", supersedes=(S, "old"))),
    "link": (1, lambda svc, me: svc.link(me, S, "k", S, "old", "related")),
    "import": (1, lambda svc, me: svc.import_lines(me, ['{"scope": "global", "key": "a", "value": "x"}'])),
}


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_a_failed_mutation_leaves_the_store_as_it_was(seeded: Cairn, me, store, monkeypatch, name: str) -> None:
    n, op = OPERATIONS[name]
    before = snapshot(store)
    fail_audit_on_call(monkeypatch, n)
    with pytest.raises(Boom):
        op(seeded, me)
    assert snapshot(store) == before
    monkeypatch.undo()
    assert seeded.audit_verify(me)["ok"] is True
