"""`cairn org`, `cairn token`, `cairn user`, `cairn limits`: thin commands over service/accounts.py.

Secrets (a token, an invite code) are printed once, on stdout, and in ``--json`` as
``data.token`` / ``data.code``; they are never written anywhere else.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cairn.cli.args import CursorOpt, LimitOpt, default_to

# A bare group prints one envelope like every command (tests/cli/test_envelope.py): the listing
# where there is one, else a refusal that names the subcommands.
org_app = typer.Typer(
    help="Orgs: shared stores with members, roles, invites and scope bindings.", invoke_without_command=True
)
member_app = typer.Typer(help="Members of an org: change a role, remove someone.", invoke_without_command=True)
token_app = typer.Typer(help="Bearer tokens: create (shown once), list, revoke.", invoke_without_command=True)
user_app = typer.Typer(
    help="Accounts (operator only: Cairn run with the database's credentials).", invoke_without_command=True
)
limits_app = typer.Typer(help="Per-tenant limits: lessons, value size, writes per minute.", invoke_without_command=True)
org_app.add_typer(member_app, name="member")

ORG = Annotated[str, typer.Argument(help="the org's name (slug), e.g. acme")]


def _svc() -> tuple[Any, Any]:
    from cairn.cli.app import svc

    return svc()


def _call(op: str, *args: Any, **kwargs: Any) -> Any:
    """Run one service operation as the caller (local store or server) and return its result."""
    service, p = _svc()
    return getattr(service, op)(p, *args, **kwargs)


def _ok(data: dict[str, Any], text: str) -> None:
    from cairn.cli.app import S

    S.out.ok(data, text)


def _table(rows: list[dict[str, Any]], cols: list[str], empty: str) -> str:
    if not rows:
        return empty
    widths = {c: max(len(c), *(len(str(r.get(c) if r.get(c) is not None else "-")) for r in rows)) for c in cols}
    lines = ["  ".join(c.upper().ljust(widths[c]) for c in cols)]
    for r in rows:
        lines.append("  ".join(str(r.get(c) if r.get(c) is not None else "-").ljust(widths[c]) for c in cols))
    return "\n".join(lines)


def _needs(ctx: typer.Context, usage: str) -> None:
    from cairn.errors import CairnError

    if ctx.invoked_subcommand is None:
        raise CairnError("INVALID_INPUT", f"missing subcommand: {usage}")


@member_app.callback()
def member_default(ctx: typer.Context) -> None:
    """Change or remove a member (subcommands: role, remove)."""
    _needs(ctx, "cairn org member role ORG USER ROLE | remove ORG USER | leave ORG")


@user_app.callback()
def user_default(ctx: typer.Context) -> None:
    """Accounts (subcommand: create)."""
    _needs(ctx, "cairn user create NAME")


# -- orgs ---------------------------------------------------------------------------------------
@org_app.command("create")
def org_create(org: ORG, name: Annotated[str | None, typer.Option(help="display name")] = None) -> None:
    """Create an org; you become its owner."""
    r = _call("org_create", org, name)
    _ok(r, f"created org {r['org']} (you are its owner); invite people with: cairn org invite {r['org']}")


@org_app.command("list")
def org_list() -> None:
    """The orgs you belong to, with your role in each."""
    r = _call("org_list")
    _ok(r, _table(r["orgs"], ["org", "role", "name"], "you belong to no org"))


default_to(
    org_app,
    org_list,
    """Your orgs (subcommands: create, list, rename, delete, invite, invites, accept, revoke, members,
    member, leave, bind, unbind, bindings).""",
)


@org_app.command("rename")
def org_rename(org: ORG, name: Annotated[str, typer.Argument(help="the new display name")]) -> None:
    """Change an org's display name (admins and owners; the slug never changes)."""
    r = _call("org_rename", org, name)
    _ok(r, f"org {org} is now called {r['name']!r} (was {r['was']!r})")


@org_app.command("delete")
def org_delete(
    org: ORG,
    confirm: Annotated[str | None, typer.Option(help="the org's name again: deleting erases all its lessons")] = None,
) -> None:
    """Delete an org (owners only): erases its lessons, revokes its tokens and invites; the audit log stays."""
    r = _call("org_delete", org, confirm)
    _ok(r, f"deleted org {org}: {r['lessons_erased']} lesson(s) erased")


@org_app.command("invite")
def org_invite(
    org: ORG,
    role: Annotated[str, typer.Option(help="viewer, member, admin or owner")] = "member",
    expires: Annotated[str, typer.Option(help="how long the code works, e.g. 7d, 12h")] = "7d",
) -> None:
    """Make a single-use invite code (shown once) for someone to join with `cairn org accept CODE`."""
    r = _call("org_invite", org, role, expires)
    _ok(r, f"{r['code']}\ninvite {r['invite_id']} to {org} as {r['role']}, valid until {r['expires_at']}; "
        "this code is shown once")  # fmt: skip


@org_app.command("invites")
def org_invites(org: ORG) -> None:
    """An org's invites and their state (admins and owners)."""
    r = _call("org_invites", org)
    _ok(r, _table(r["invites"], ["id", "role", "state", "created_by", "expires_at"], "no invites"))


@org_app.command("accept")
def org_accept(code: Annotated[str, typer.Argument(help="the invite code you were given")]) -> None:
    """Join an org with an invite code."""
    r = _call("org_accept", code)
    _ok(r, f"joined org {r['org']} as {r['role']}")


@org_app.command("revoke")
def org_revoke(org: ORG, invite_id: Annotated[int, typer.Argument(help="the invite's id (cairn org invites)")]) -> None:
    """Revoke an unused invite (admins and owners)."""
    r = _call("org_revoke_invite", org, invite_id)
    _ok(r, f"revoked invite {invite_id} of {org}")


@org_app.command("members")
def org_members(
    org: ORG,
    limit: LimitOpt = 1000,
    cursor: CursorOpt = None,
) -> None:
    """Who belongs to an org, with their roles."""
    r = _call("org_members", org, limit=limit, cursor=cursor)
    _ok(r, _table(r["members"], ["user", "role", "since"], "no members") + _more(r))


@org_app.command("leave")
def org_leave(org: ORG) -> None:
    """Leave an org (the last owner cannot); your tokens for it are revoked."""
    r = _call("org_leave", org)
    _ok(r, f"left org {org}")


@org_app.command("bind")
def org_bind(org: ORG, pattern: Annotated[str, typer.Argument(help="a scope or pattern, e.g. repo::acme/*")]) -> None:
    """Route writes on matching scopes to the org, for its members who may write (admins and owners)."""
    r = _call("org_bind", org, pattern)
    _ok(r, f"bound {r['pattern']} to {org}: members' writes there now go to the org")


@org_app.command("unbind")
def org_unbind(org: ORG, pattern: Annotated[str, typer.Argument(help="a bound scope or pattern")]) -> None:
    """Stop routing a scope pattern to the org."""
    r = _call("org_unbind", org, pattern)
    _ok(r, f"unbound {r['pattern']} from {org}")


@org_app.command("bindings")
def org_bindings(org: ORG) -> None:
    """The scope patterns bound to an org."""
    r = _call("org_bindings", org)
    _ok(r, "\n".join(r["bindings"]) or "no bindings")


@member_app.command("role")
def member_role(
    org: ORG,
    user: Annotated[str, typer.Argument(help="the member's account name")],
    role: Annotated[str, typer.Argument(help="viewer, member, admin or owner")],
) -> None:
    """Change a member's role (admins: viewers and members only; owners: anyone but the last owner)."""
    r = _call("member_role", org, user, role)
    _ok(r, f"{user} is now {r['role']} in {org} (was {r['was']})")


@member_app.command("remove")
def member_remove(org: ORG, user: Annotated[str, typer.Argument(help="the member's account name")]) -> None:
    """Remove a member (their tokens for the org are revoked)."""
    _call("member_remove", org, user)
    _ok({"org": org, "user": user, "removed": True}, f"removed {user} from {org}")


@member_app.command("leave")
def member_leave(org: ORG) -> None:
    """Leave an org yourself (same as `cairn org leave`)."""
    org_leave(org)


# -- tokens -------------------------------------------------------------------------------------
@token_app.command("create")
def token_create(
    perm: Annotated[str, typer.Option(help="read, write or admin")] = "read",
    scope_pattern: Annotated[
        list[str] | None,
        typer.Option("--scope-pattern", help="limit to matching scopes (repeatable), e.g. repo::acme/*"),
    ] = None,
    org: Annotated[str | None, typer.Option(help="a token for this org instead of your own store")] = None,
    expires: Annotated[str, typer.Option(help="lifetime, e.g. 90d, 12h, or never")] = "90d",
    name: Annotated[str | None, typer.Option(help="a label, e.g. ci")] = None,
    lorekit: Annotated[
        bool, typer.Option("--lorekit", help="spell it for LoreKit's CLI: lk_rw_… (write, admin) or lk_ro_… (read)")
    ] = False,
) -> None:
    """Create a bearer token; it is printed once (`--json`: data.token) and stored only as a hash."""
    service, p = _svc()
    style = {"style": "lorekit"} if lorekit else {}
    r = service.token_create(p, perm=perm, scope_patterns=scope_pattern, org=org, expires=expires, name=name, **style)
    where = f"org {r['org']}" if r["org"] else f"{r['user']}'s store"
    limits = f", scopes {', '.join(r['scope_patterns'])}" if r["scope_patterns"] else ""
    _ok(r, f"{r['token']}\ntoken {r['id']} ({r['perm']}) for {where}{limits}, expires {r['expires_at'] or 'never'}; "
        "this is the only time it is shown: use it as CAIRN_TOKEN")  # fmt: skip


@token_app.command("list")
def token_list(
    org: Annotated[str | None, typer.Option(help="every token of this org (admins, owners)")] = None,
    limit: LimitOpt = 1000,
    cursor: CursorOpt = None,
) -> None:
    """Your tokens (never their secrets), or an org's."""
    r = _call("token_list", org, limit=limit, cursor=cursor)
    rows = [{**t, "scopes": ",".join(t["scope_patterns"]) or "all"} for t in r["tokens"]]
    columns = ["id", "prefix", "name", "user", "tenant", "perm", "scopes", "state", "expires_at"]
    _ok(r, _table(rows, columns, "no tokens") + _more(r))


default_to(token_app, lambda: token_list(None), "Your tokens (subcommands: create, list, revoke).")


def _more(r: dict[str, Any]) -> str:
    from cairn.cli.render import more

    return more(r)


def whoami() -> None:
    """Who this command acts as: account, store, permission, scope limits (and which server)."""
    service, p = _svc()
    r = service.whoami(p)
    limits = ", ".join(r["scope_patterns"]) or "every scope"
    where = getattr(getattr(service, "http", None), "url", None) or "the local store"
    _ok(r, f"{r['user']} in {r['tenant']} ({r['permission']}; {limits}) on {where}")


@token_app.command("revoke")
def token_revoke(token_id: Annotated[int, typer.Argument(help="the token's id (cairn token list)")]) -> None:
    """Revoke a token at once; requests presenting it are refused from now on."""
    r = _call("token_revoke", token_id)
    _ok(r, f"revoked token {token_id}" + (f" ({r['note']})" if r.get("note") else ""))


# -- accounts -----------------------------------------------------------------------------------
@user_app.command("create")
def user_create(name: Annotated[str, typer.Argument(help="account name: lowercase letters, digits, . _ -")]) -> None:
    """Create an account and its own store; prints its first admin token once (give it to them)."""
    r = _call("create_user", name)
    _ok(r, f"{r['token']}\naccount {r['user']} created; the token above (admin, expires {r['expires_at']}) "
        "is shown once")  # fmt: skip


# -- limits -------------------------------------------------------------------------------------
@limits_app.command("show")
def limits_show(
    tenant: Annotated[str | None, typer.Argument(help="a tenant (operator only); default: yours")] = None,
) -> None:
    """The limits that apply to a tenant and where each comes from."""
    r = _call("limits_show", tenant)
    lines = [f"{r['tenant']}: {r['lessons']} lesson(s)"]
    for k, v in r["limits"].items():
        lines.append(f"  {k} = {v if v is not None else 'none'}  ({r['sources'][k]})")
    _ok(r, "\n".join(lines))


default_to(limits_app, lambda: limits_show(None), "Your limits (subcommands: show, set).")


@limits_app.command("set")
def limits_set(
    tenant: Annotated[str, typer.Argument(help="account name, or org:NAME")],
    max_lessons: Annotated[int | None, typer.Option(help="0 removes the override")] = None,
    max_value_bytes: Annotated[int | None, typer.Option(help="0 removes the override")] = None,
    writes_per_minute: Annotated[int | None, typer.Option(help="0 removes the override")] = None,
) -> None:
    """Override the configured limits for one tenant (operator only)."""
    r = _call(
        "limits_set",
        tenant,
        max_lessons=max_lessons,
        max_value_bytes=max_value_bytes,
        writes_per_minute=writes_per_minute,
    )
    _ok(r, f"limits of {tenant}: " + ", ".join(f"{k}={v if v is not None else 'none'}" for k, v in r["limits"].items()))


def register(app: typer.Typer) -> None:
    app.add_typer(org_app, name="org")
    app.add_typer(token_app, name="token")
    app.add_typer(user_app, name="user")
    app.add_typer(limits_app, name="limits")
    app.command("whoami")(whoami)
