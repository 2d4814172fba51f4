"""The dashboard shows a broken audit chain from the service's own refusal (AUDIT_BROKEN and its
data: where it broke and why), as the CLI and the API report it; it re-derives nothing.

Its own server (module fixture): the chain of this store is edited under the guard triggers, which
the other dashboard tests must not see.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from cairn.errors import CairnError
from cairn.store.dialect import drop_guard_triggers, guard_triggers
from tests.contract import raw
from tests.web.conftest import Web


def test_the_audit_page_names_where_the_chain_broke(web_sqlite: Web) -> None:
    web = web_sqlite
    for i in range(3):
        web.svc.write(web.alice_p, "repo::acme/api", f"k{i}", f"Lesson number {i}.")
    admin = web.client()
    admin.signin(web.alice)
    assert "Chain verified" in admin.get("/ui/audit").text

    with raw(web.store, write=True) as conn:  # what someone with database access could do
        for stmt in drop_guard_triggers(web.store.dialect):
            conn.exec_driver_sql(stmt)
        conn.execute(
            text("UPDATE audit_log SET actor = 'mallory' WHERE tenant_id = :alice AND seq = 3"),
            {"alice": web.alice_name},
        )
        for stmt in guard_triggers(web.store.dialect):
            conn.exec_driver_sql(stmt)

    with pytest.raises(CairnError) as refused:  # the service's answer...
        web.svc.audit_verify(web.alice_p, full=False)
    assert refused.value.code == "AUDIT_BROKEN"
    where = refused.value.data["broken_at"]
    page = admin.get("/ui/audit").text  # ...is what the page shows
    assert "Chain verified" not in page
    assert f"Chain BROKEN at entry {where['seq']} ({where['action']})" in page
    assert where["seq"] == 3
