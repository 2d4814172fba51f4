"""A lesson's version history as a graph, and the rules sync merges two of them by. Pure, stdlib only.

Every version has a global ``uid`` and names the versions it was written on top of (``parents``;
migration 0013). Two stores that hold the same versions of a lesson hold the same graph, whatever
order the versions arrived in, so every rule here is a function of the set alone: the *tips* (the
versions no other version names as a parent), and among them the one the *conflict rule* makes
current. One tip is the normal case; two or more mean the lesson was changed on two stores since
they last synced: both versions are kept, the rule picks the current one, and the lesson waits in
the review queue. The next local write names every tip as its parent, which joins the histories.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cairn.core.principal import ADMIN, WRITE, Principal


def rank(version: dict[str, Any]) -> tuple[bool, datetime, datetime, str]:
    """The conflict rule as a sort key: the greatest version is the lesson's current one.

    In order: a person's write over an agent's; then the later valid time (``valid_from``, a
    version without one counts from its record time); then the later record time; then the greater
    uid, so that two stores holding the same versions always pick the same one.
    """
    recorded = version["recorded_at"]
    return (bool(version.get("human")), version.get("valid_from") or recorded, recorded, version["uid"])


def tips(versions: list[dict[str, Any]]) -> list[str]:
    """The uids of the versions that no other version names as a parent, in uid order.

    ``versions``: each with ``uid`` and ``parents`` (a list). A function of the set alone, so
    two stores holding the same versions find the same tips whatever order they arrived in.
    """
    named = {p for v in versions for p in v["parents"]}
    return sorted(v["uid"] for v in versions if v["uid"] not in named)


def head(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """The version the conflict rule makes current among ``candidates`` (the tips)."""
    return max(candidates, key=rank)


def shape(versions: list[dict[str, Any]]) -> dict[str, dict[str, Any]] | None:
    """Per uid: ``parents`` (the uids it was written on top of that are here), ``superseded_at`` (the
    record time of its earliest child: until when it was a tip; None while it is one), ``tip`` and
    ``current`` (the tip the conflict rule picks). What a history shows so that two versions written
    beside each other on two stores read as siblings, not as one after the other.

    None when a version has no uid (a history that was never given one): then it is a plain line.
    """
    if not versions or any(not v.get("uid") for v in versions):
        return None
    held = {v["uid"] for v in versions}
    out: dict[str, dict[str, Any]] = {
        v["uid"]: {"parents": [p for p in v["parents"] if p in held], "superseded_at": None} for v in versions
    }
    for v in versions:
        for p in out[v["uid"]]["parents"]:
            until = out[p]["superseded_at"]
            out[p]["superseded_at"] = v["recorded_at"] if until is None else min(until, v["recorded_at"])
    tip_uids = tips([{"uid": v["uid"], "parents": out[v["uid"]]["parents"]} for v in versions])
    current = head([v for v in versions if v["uid"] in tip_uids])["uid"]
    for uid, entry in out.items():
        entry["tip"], entry["current"] = uid in tip_uids, uid == current
    return out


# -- trust --------------------------------------------------------------------------------------------


def may_grant_trust(principal: Principal, scope: str) -> bool:
    """Whether an incoming "verified" may land as verified when ``principal`` applies it.

    The rule an import follows (data, not authority): trust is granted by a person acting here
    (``human``) or by an admin of this store, in a scope it may write. Anyone else's sync carries
    the claim, and the lesson lands as a candidate for a person here to verify.
    """
    if WRITE not in principal.permissions or not principal.can_see(scope):
        return False
    return principal.human or ADMIN in principal.permissions
