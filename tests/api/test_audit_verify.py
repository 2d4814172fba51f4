"""`GET /v1/audit/verify` reports a ledger that does not prove the state the same way the CLI does:
409 problem+json, code AUDIT_BROKEN, the address in ``data.broken_at`` (the rule is the service's)."""

from __future__ import annotations

from sqlalchemy import text

from tests.api.conftest import Api
from tests.contract import raw


def test_a_direct_edit_is_a_409_with_the_address(api: Api) -> None:
    made = api.http("POST", "/v1/lessons", {"scope": "global", "key": "proved", "value": "A proved lesson."}, api.bob)
    assert made.status == 200
    assert api.http("GET", "/v1/audit/verify", token=api.bob).body["state"]["lessons"] == 1
    with raw(api.store, write=True) as conn:
        conn.execute(
            text("UPDATE lessons SET trust = 'verified' WHERE tenant_id = :bob AND key = 'proved'"),
            {"bob": api.bob_name},
        )
    out = api.http("GET", "/v1/audit/verify", token=api.bob)
    assert out.status == 409 and out.body["code"] == "AUDIT_BROKEN", out.body
    where = out.body["data"]["broken_at"]
    assert (where["table"], where["scope"], where["key"]) == ("lessons", "global", "proved")
    assert "lessons id" in out.body["detail"]
    fast = api.http("GET", "/v1/audit/verify?fast=true", token=api.bob)
    assert fast.status == 200 and fast.body["ok"] is True and fast.body["state"] is None
    # Another tenant's state is its own: alice's verifies.
    assert api.http("GET", "/v1/audit/verify", token=api.alice).status == 200
