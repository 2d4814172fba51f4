"""Accounts, orgs and tokens through real ``cairn`` subprocesses, as the operator and with CAIRN_TOKEN.

The service suite (tests/service/test_accounts.py) covers every rule on both databases; these tests
cover what only the CLI does: reading ``CAIRN_TOKEN``, printing a secret once (``data.token``,
``data.code``), exit codes and ``reason.code`` of refusals, and keeping secrets out of the home.
A subprocess costs a couple of seconds, so the accounts and the org are made once for the module
(``team``), commands that do not depend on each other run two at a time, and "nothing changed" is
checked on the store's rows directly rather than with more commands.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cairn.store.engine import Store, sqlite_url
from tests.cli.conftest import Cli, envelope
from tests.conftest import PgDatabases, run_cli
from tests.contract import snapshot

API = "repo::acme/api"


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Run independent commands; their results in order (an assertion error re-raises).

    One after the other: the commands run in this process (``tests/inprocess.py``), which swaps
    process-wide state for each; they were run concurrently only when each was a process to start."""
    return [call() for call in calls]


class As:
    """``cairn`` run as one account (its token) or as the operator (``token=None``).

    The environment is given in full, so a developer's CAIRN_TOKEN or CAIRN_DATABASE_URL cannot
    change who a command acts as (module-scoped fixtures run before any monkeypatch).
    """

    def __init__(self, home: Path, token: str | None, db: str | None = None) -> None:
        self.cli, self.token, self.db = Cli(home), token, db

    def _args(self, args: tuple[str, ...]) -> tuple[str, ...]:
        return ("--db", self.db, *args) if self.db else args

    def _env(self) -> dict[str, str]:
        return {"CAIRN_TOKEN": self.token or "", "CAIRN_DATABASE_URL": "", "CAIRN_EMBED_MODEL": "hash-test-64"}

    def ok(self, *args: str) -> Any:
        return self.cli.ok(*self._args(args), env=self._env())

    def refused(self, code: str, *args: str) -> dict[str, Any]:
        return self.cli.refused(code, *self._args(args), env=self._env())

    def run(self, *args: str, json: bool = False):  # type: ignore[no-untyped-def]
        full = ("--json", *self._args(args)) if json else self._args(args)
        return run_cli(self.cli.home, *full, env=self._env())

    def user_create(self, name: str) -> As:
        data = self.ok("user", "create", name)
        assert data["user"] == name and data["token"].startswith("cairn_")
        return As(self.cli.home, data["token"], self.db)


@dataclass
class Team:
    home: Path
    bob: As  # owner of acme
    carol: As  # member of acme
    invite_code: str  # already used by carol


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> Team:
    home = tmp_path_factory.mktemp("accounts-cli")
    shutil.copyfile(migrated_sqlite, home / "cairn.db")  # skips the first command's migration
    operator = As(home, None)
    bob = operator.user_create("bob")
    carol, created = together(lambda: operator.user_create("carol"), lambda: bob.ok("org", "create", "acme"))
    assert created["role"] == "owner"
    invite = bob.ok("org", "invite", "acme", "--role", "member")
    assert invite["code"].startswith("cairn-invite-")
    assert carol.ok("org", "accept", invite["code"]) == {"org": "acme", "role": "member"}
    return Team(home, bob, carol, invite["code"])


def store_rows(home: Path) -> dict[str, Any]:
    store = Store(sqlite_url(home))
    try:
        return snapshot(store)
    finally:
        store.dispose()


def test_a_token_is_shown_once_listed_without_its_secret_and_dies_when_revoked(team: Team) -> None:
    made = team.carol.ok("token", "create", "--perm", "write", "--org", "acme", "--name", "laptop")
    secret = made["token"]
    assert secret.startswith("cairn_") and (made["tenant"], made["perm"]) == ("org:acme", "write")
    laptop = As(team.home, secret)

    # `token list` never shows it, in JSON or in text; the token is there, by its prefix.
    wrote, as_json, as_text = together(
        lambda: laptop.ok("write", API, "retry", "Retry with jitter."),
        lambda: team.carol.run("token", "list", json=True),
        lambda: team.carol.run("token", "list"),
    )
    assert wrote["action"] == "created"
    assert made["id"] in [t["id"] for t in envelope(as_json)["data"]["tokens"]]
    for proc in (as_json, as_text):
        assert proc.returncode == 0, proc.stderr
        assert secret not in proc.stdout + proc.stderr
        assert made["prefix"] in proc.stdout
    # Nor is it anywhere in the home: the store keeps its SHA-256 only.
    for f in team.home.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f

    assert team.carol.ok("token", "revoke", str(made["id"]))["revoked"] is True
    as_json, as_text = together(
        lambda: laptop.run("list", json=True), lambda: laptop.run("write", API, "again", "Refused.")
    )
    env = envelope(as_json)
    assert as_json.returncode == 1
    assert (env["status"], env["reason"]["code"]) == ("refused", "UNAUTHENTICATED")
    assert "revoked" in env["reason"]["message"]
    # Without --json: exit 1, the code on stderr, nothing on stdout.
    assert as_text.returncode == 1 and as_text.stdout == "" and "UNAUTHENTICATED" in as_text.stderr


def test_refusals_exit_1_with_their_code_and_change_nothing(team: Team) -> None:
    before = store_rows(team.home)
    reasons = together(
        lambda: team.bob.refused("INVALID_INPUT", "org", "invite", "acme", "--role", "superuser"),
        lambda: team.bob.refused("INVALID_INPUT", "org", "delete", "acme"),
        lambda: team.bob.refused("FORBIDDEN", "user", "create", "mallory"),  # operator only, whatever the token
        lambda: team.carol.refused("CONFLICT", "org", "accept", team.invite_code),  # single use
        lambda: As(team.home, "cairn_" + "x" * 43).refused("UNAUTHENTICATED", "list"),  # an unknown token is no one
        lambda: team.bob.refused("INVALID_INPUT", "org", "delete", "acme", "--confirm", "acm"),
    )
    assert "viewer, member, admin, owner" in reasons[0]["message"]
    assert "--confirm acme" in reasons[1]["message"]
    assert store_rows(team.home) == before
    # The org is still there for its members.
    assert team.carol.ok("org", "list")["orgs"] == [{"org": "acme", "name": "acme", "role": "member"}]


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    dbs: PgDatabases = request.getfixturevalue("pg_databases")
    name, url = dbs.new()
    request.addfinalizer(lambda: dbs.drop(name))
    return url.replace("postgresql+psycopg://", "postgresql://", 1)  # what a user types


def test_the_team_flow_on_postgres(cairn_home: Path, pg_url: str) -> None:
    operator = As(cairn_home, None, db=pg_url)
    bob = operator.user_create("bob")
    carol, _ = together(lambda: operator.user_create("carol"), lambda: bob.ok("org", "create", "acme"))
    invite, _ = together(
        lambda: bob.ok("org", "invite", "acme", "--role", "member"),
        lambda: bob.ok("org", "bind", "acme", "repo::acme/*"),
    )
    carol.ok("org", "accept", invite["code"])
    # A member's personal write on the bound scope goes to the org; an org token reads it.
    routed, made = together(
        lambda: carol.ok("write", API, "retry", "Retry with jitter."),
        lambda: carol.ok("token", "create", "--perm", "write", "--org", "acme"),
    )
    assert routed["routed_to"] == "org:acme"
    org = As(cairn_home, made["token"], db=pg_url)
    assert org.ok("read", API, "retry")["lesson"]["value"] == "Retry with jitter."
    assert carol.ok("token", "revoke", str(made["id"]))["revoked"] is True
    proc = org.run("read", API, "retry", json=True)
    assert proc.returncode == 1 and envelope(proc)["reason"]["code"] == "UNAUTHENTICATED"
    assert not (cairn_home / "cairn.db").exists()  # everything went to Postgres


def test_the_last_owner_cannot_leave_but_a_member_can(team: Team) -> None:
    refused = team.bob.refused("FORBIDDEN", "org", "member", "leave", "acme")
    assert "last owner" in refused["message"]
    dave = As(team.home, None).user_create("dave")
    code = team.bob.ok("org", "invite", "acme", "--role", "viewer")["code"]
    dave.ok("org", "accept", code)
    assert dave.ok("org", "member", "leave", "acme") == {"org": "acme", "left": True}
    assert dave.ok("org", "list") == {"orgs": []}
