"""``cairn token create --lorekit``: a token spelled for LoreKit's CLI (it reads the permission off
the prefix) that authenticates like any Cairn token and is kept only as a hash."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.conftest import run_cli


def test_lorekit_tokens_carry_lorekits_prefix_and_authenticate(cairn_home: Path) -> None:
    env = {"CAIRN_NO_DAEMON": "1"}
    made = {}
    for perm, prefix in (("read", "lk_ro_"), ("write", "lk_rw_"), ("admin", "lk_rw_")):
        r = run_cli(cairn_home, "--json", "token", "create", "--perm", perm, "--lorekit", env=env)
        assert r.returncode == 0, r.stderr
        token = json.loads(r.stdout)["data"]["token"]
        assert token.startswith(prefix) and len(token) > 40
        made[perm] = token
    plain = json.loads(run_cli(cairn_home, "--json", "token", "create", env=env).stdout)["data"]["token"]
    assert plain.startswith("cairn_")
    who = run_cli(cairn_home, "--json", "whoami", env={**env, "CAIRN_TOKEN": made["read"]})
    assert who.returncode == 0, who.stderr
    assert json.loads(who.stdout)["data"]["permission"] == "read"
    db = sqlite3.connect(cairn_home / "cairn.db")
    stored = " ".join(str(v) for row in db.execute("select * from tokens") for v in row)
    assert all(t not in stored for t in made.values())
    bad = run_cli(cairn_home, "--json", "whoami", env={**env, "CAIRN_TOKEN": "lk_rw_forged"})
    assert bad.returncode != 0 and json.loads(bad.stdout)["reason"]["code"] == "UNAUTHENTICATED"
