"""The capability table as pure functions: effective permissions, who may manage whom, name checks.

No database: these are the rules the service asks before every org change, so each cell of the
tables below is written out, not recomputed with the same logic the module uses.
"""

from __future__ import annotations

import pytest

from cairn.core import roles
from cairn.errors import CairnError

R, W, A = "read", "write", "admin"

# effective(level, role): the lower of the token's level and the role's level, and everything below.
EFFECTIVE = {
    ("read", "viewer"): {R},
    ("read", "member"): {R},
    ("read", "admin"): {R},
    ("read", "owner"): {R},
    ("write", "viewer"): {R},
    ("write", "member"): {R, W},
    ("write", "admin"): {R, W},
    ("write", "owner"): {R, W},
    ("admin", "viewer"): {R},
    ("admin", "member"): {R, W},
    ("admin", "admin"): {R, W, A},
    ("admin", "owner"): {R, W, A},
}


@pytest.mark.parametrize(("level", "role"), sorted(EFFECTIVE))
def test_effective_is_the_lower_of_level_and_role(level: str, role: str) -> None:
    assert roles.effective(level, role) == frozenset(EFFECTIVE[(level, role)])


def test_permissions_for_is_cumulative() -> None:
    assert roles.permissions_for("read") == {R}
    assert roles.permissions_for("write") == {R, W}
    assert roles.permissions_for("admin") == {R, W, A}


def test_role_levels() -> None:
    assert roles.ROLE_LEVEL == {"viewer": R, "member": W, "admin": A, "owner": A}


# -- require_manage ----------------------------------------------------------------------------

TARGETS = ("viewer", "member", "admin", "owner")
NEW_ROLES = (None, "viewer", "member", "admin", "owner")
# What an admin may do: act on viewers and members, and make them (at most) member.
ADMIN_ALLOWED = {(t, n) for t in ("viewer", "member") for n in (None, "viewer", "member")}


def _cases() -> list[tuple[str | None, str, str | None, bool]]:
    out = []
    for actor in (None, "viewer", "member", "admin", "owner"):
        for target in TARGETS:
            for new in NEW_ROLES:
                if actor == "owner":
                    allowed = True
                elif actor == "admin":
                    allowed = (target, new) in ADMIN_ALLOWED
                else:
                    allowed = False
                out.append((actor, target, new, allowed))
    return out


@pytest.mark.parametrize(("actor", "target", "new", "allowed"), _cases())
def test_require_manage_matrix(actor: str | None, target: str, new: str | None, allowed: bool) -> None:
    if allowed:
        roles.require_manage(actor, target, new, "changing a role")
        return
    with pytest.raises(CairnError) as info:
        roles.require_manage(actor, target, new, "changing a role")
    assert info.value.code == "FORBIDDEN"
    assert info.value.message.startswith("changing a role")


def test_require_manage_explains_the_refusal() -> None:
    with pytest.raises(CairnError) as info:
        roles.require_manage(None, "member", None, "removing a member")
    assert "not a member" in info.value.message
    with pytest.raises(CairnError) as info:
        roles.require_manage("member", "viewer", None, "removing a member")
    assert "admin role or above" in info.value.message and "you are member" in info.value.message
    with pytest.raises(CairnError) as info:
        roles.require_manage("admin", "owner", None, "removing a member")
    assert "ask an owner" in info.value.message
    with pytest.raises(CairnError) as info:
        roles.require_manage("admin", "member", "admin", "changing a role")
    assert "only an owner can make someone admin" in info.value.message


@pytest.mark.parametrize(
    ("role", "at_least", "allowed"),
    [
        ("viewer", "viewer", True),
        ("viewer", "member", False),
        ("member", "member", True),
        ("member", "admin", False),
        ("admin", "admin", True),
        ("admin", "owner", False),
        ("owner", "owner", True),
        ("owner", "viewer", True),
        (None, "viewer", False),
    ],
)
def test_require_role(role: str | None, at_least: str, allowed: bool) -> None:
    if allowed:
        roles.require_role(role, at_least, "x")
    else:
        with pytest.raises(CairnError) as info:
            roles.require_role(role, at_least, "x")
        assert info.value.code == "FORBIDDEN"


# -- input checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "want"), [("admin", "admin"), (" Owner ", "owner"), ("VIEWER", "viewer")])
def test_check_role_normalizes(raw: str, want: str) -> None:
    assert roles.check_role(raw) == want


@pytest.mark.parametrize("raw", ["superuser", "", "admins", "read", None])
def test_check_role_refuses_with_the_choices(raw: str | None) -> None:
    with pytest.raises(CairnError) as info:
        roles.check_role(raw)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_INPUT"
    assert "use one of: viewer, member, admin, owner" in info.value.message


@pytest.mark.parametrize(("raw", "want"), [("read", "read"), (" WRITE ", "write"), ("Admin", "admin")])
def test_check_level_normalizes(raw: str, want: str) -> None:
    assert roles.check_level(raw) == want


@pytest.mark.parametrize("raw", ["owner", "rw", "", None])
def test_check_level_refuses_with_the_choices(raw: str | None) -> None:
    with pytest.raises(CairnError) as info:
        roles.check_level(raw)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_INPUT"
    assert "use one of: read, write, admin" in info.value.message


@pytest.mark.parametrize("name", ["acme", "a", "acme-corp", "a.b_c-9", "9lives", "x" * 39, " acme "])
def test_check_name_accepts(name: str) -> None:
    assert roles.check_name(name, "org") == name.strip()


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("Acme Corp", "acme-corp"),
        ("ACME", "acme"),
        ("-acme", "acme"),
        ("acme/widget", "acme-widget"),
        ("x" * 40, "x" * 39),
        ("Team Ünïcode!", "team-n-code"),
    ],
)
def test_check_name_refusal_carries_a_corrected_form(name: str, hint: str) -> None:
    with pytest.raises(CairnError) as info:
        roles.check_name(name, "org")
    assert info.value.code == "INVALID_INPUT"
    assert info.value.message.startswith(f"org {name!r} is not valid")
    assert info.value.message.endswith(f"try {hint!r}")
    # The hint is itself a valid name.
    assert roles.check_name(hint, "org") == hint


@pytest.mark.parametrize("name", ["", "   ", "@@@", "---"])
def test_check_name_without_a_usable_correction_gives_no_hint(name: str) -> None:
    with pytest.raises(CairnError) as info:
        roles.check_name(name, "account name")
    assert info.value.code == "INVALID_INPUT"
    assert "try" not in info.value.message
    assert info.value.message.startswith("account name")


def test_org_tenant() -> None:
    assert roles.org_tenant("acme") == "org:acme"
    assert roles.org_tenant("org:acme") == "org:acme"
    with pytest.raises(CairnError) as info:
        roles.org_tenant("Acme Corp")
    assert info.value.code == "INVALID_INPUT" and "try 'acme-corp'" in info.value.message
