"""``cairn`` (the real entry point, the shipped model): a write that restates forgotten content is
written held, says so, is absent from every read command, and waits in ``cairn review`` marked with
the tombstone it resembles until ``cairn review verify`` releases it."""

from __future__ import annotations

from tests.cli.conftest import Cli

SCOPE = "repo::acme/vault"
FORGOTTEN = "The staging deploy key is stored in Vault at ops/deploy/staging."
PARAPHRASE = "The deploy key for staging is stored in Vault at ops/deploy/staging."
UNRELATED = "Run the integration suite with pytest -m integration before merging."
QUERY = "where is the staging deploy key in vault"


def keys_everywhere(cli: Cli) -> dict[str, set[str]]:
    out = {"list": {x["key"] for x in cli.ok("list", SCOPE)["lessons"]}}
    for mode in ("hybrid", "fts", "vector"):
        out[mode] = {x["key"] for x in cli.ok("search", QUERY, "--scope", SCOPE, "--mode", mode)["results"]}
    out["recall"] = {x["key"] for x in cli.ok("recall", QUERY, "--scope", SCOPE)["lessons"]}
    out["context"] = {x["key"] for x in cli.ok("context", "--repo", "acme/vault", "--task", QUERY)["lessons"]}
    return out


def test_a_paraphrase_is_held_out_of_every_command_until_verified(cli: Cli) -> None:
    cli.ok("write", SCOPE, "deploy-key", FORGOTTEN)
    tid = cli.ok("forget", SCOPE, "deploy-key", "--reason", "leaked location")["tombstone_id"]
    cli.refused("TOMBSTONED", "write", SCOPE, "again", FORGOTTEN)
    cli.ok("write", SCOPE, "tests", UNRELATED)
    held = cli.ok("write", SCOPE, "vault-path", PARAPHRASE)
    assert held["lesson"]["status"] == "held" and held["held"]["tombstone_id"] == tid
    text = cli("write", SCOPE, "vault-path", PARAPHRASE).stdout  # a recurrence of the held lesson
    assert "held" in text
    shown = cli("write", SCOPE, "vault-path-2", "Staging deploy key: stored in Vault, path ops/deploy/staging.").stdout
    assert f"held: resembles forgotten {SCOPE} deploy-key (tombstone {tid}" in shown and "leaked location" in shown
    # One line says it is held, one names the tombstone, one says what happens next; no repeats.
    first, mark, then = shown.strip().splitlines()
    assert first == f"created {SCOPE} vault-path-2 (v1, held for review)"
    assert mark.startswith("held: ") and "cairn review verify" in then and "cairn review reject" in then
    for path, keys in keys_everywhere(cli).items():
        assert "vault-path" not in keys and "vault-path-2" not in keys, path
    cli.refused("NOT_FOUND", "read", SCOPE, "vault-path")
    queue = cli("review").stdout
    assert "vault-path" in queue and f"tombstone {tid}" in queue
    cli.ok("review", "verify", SCOPE, "vault-path")
    cli.ok("review", "reject", SCOPE, "vault-path-2", "--reason", "same leak")
    after = keys_everywhere(cli)
    assert "vault-path" in after["list"] and "vault-path" in after["fts"]
    assert all("vault-path-2" not in keys for keys in after.values())
    assert [c["key"] for c in cli.ok("review")["candidates"]] == ["tests"]  # an ordinary candidate
