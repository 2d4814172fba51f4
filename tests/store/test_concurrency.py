"""Several processes writing one store lose nothing and never surface "database is locked"."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from cairn.runtime.local import local_principal
from cairn.service.api import Cairn

WORKER = textwrap.dedent(
    """
    import json, sys
    from cairn.core.principal import Principal
    from cairn.service.api import Cairn
    from cairn.store.engine import Store

    url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = Store(url)
    svc = Cairn(store)
    p = Principal("local", "agent-" + name, session=name)
    actions = []
    for i in range(n):
        actions.append(svc.write(p, "repo::acme/widget", "shared", "The same lesson, from everyone.")["action"])
        svc.write(p, "repo::acme/widget", f"own-{name}-{i}", f"A lesson only {name} writes, number {i}.")
    print(json.dumps(actions))
    """
)


@pytest.mark.slow
def test_four_processes_writing_one_address_keep_an_exact_count(store, tmp_path) -> None:
    me = local_principal()
    svc = Cairn(store)
    svc.ensure_tenant(me)
    writers, per_writer = 4, 15
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, store.url, f"w{i}", str(per_writer)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in err.lower()
    actions = [a for out, _ in outputs for a in json.loads(out)]
    assert actions.count("created") == 1
    total = writers * per_writer
    lesson = svc.read(me, "repo::acme/widget", "shared")["lesson"]
    assert lesson["seen_count"] == total
    assert lesson["version"] == total
    assert lesson["trust"] == "verified"  # four distinct sessions
    assert len(svc.list(me, "repo::acme/widget", limit=1000)["lessons"]) == 1 + total
    verified = svc.audit_verify(me)
    assert verified["ok"] is True
    assert verified["checked"] == 2 * total  # one audit row per write, promotions included
