"""Where a lesson is in its life, defined once: for a row in Python and for a query in SQL.

A lesson is *rejected* (its trust), *held* (its trust: its text restates forgotten content and waits
for a person, ``service/paraphrase.py``), *superseded* (a newer lesson replaced it), *archived*,
*expired* (its TTL ran out) or else *active*. Every read asks one of these questions — read, list, search,
context, export, the dashboard, the ranking index, the full-text arm's raw SQL — and each takes its
answer from here, so "an archived, expired, rejected, held or superseded lesson never comes back" holds
on every path at once. ``status`` and the clauses below say the same thing; ``tests/store/
test_predicates.py`` checks them against each other on real rows.

Expiry is against a ``now`` the caller passes (one clock read per transaction), never read here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Table, and_, literal_column, or_
from sqlalchemy.sql.elements import ColumnElement

from cairn.core.lesson import HELD
from cairn.store.schema import lessons

REJECTED = "rejected"
STATUSES = ("active", "rejected", "held", "superseded", "archived", "expired")


def status(row: dict[str, Any], now: datetime) -> str:
    """The lesson's state, in the order the states win: rejected, held, superseded, archived, expired,
    active. Held wins over the rest: no read, not even the archived list, shows held text."""
    if row["trust"] == REJECTED:
        return "rejected"
    if row["trust"] == HELD:
        return "held"
    if row["superseded_by"] is not None:
        return "superseded"
    if row["archived_at"] is not None:
        return "archived"
    if row["expires_at"] is not None and row["expires_at"] <= now:
        return "expired"
    return "active"


def current(t: Table = lessons) -> list[ColumnElement[bool]]:
    """Neither rejected nor superseded: the lesson still stands at its address (archived or held or
    not): a write at its address edits it, the same text in its scope recurs on it."""
    return [t.c.trust != REJECTED, t.c.superseded_by.is_(None)]


def shown(t: Table = lessons) -> list[ColumnElement[bool]]:
    """Current and not held: a read may show it in one of its states (active, archived, expired)."""
    return [*current(t), t.c.trust != HELD]


def unarchived(t: Table = lessons) -> list[ColumnElement[bool]]:
    """Shown and not archived: active apart from expiry, which moves with the clock, not with a write."""
    return [*shown(t), t.c.archived_at.is_(None)]


def unexpired(now: Any, t: Table = lessons) -> ColumnElement[bool]:
    return or_(t.c.expires_at.is_(None), t.c.expires_at > now)


def active(now: Any, t: Table = lessons) -> ColumnElement[bool]:
    """May be returned by a read of active lessons."""
    return and_(*unarchived(t), unexpired(now, t))


def archived(t: Table = lessons) -> ColumnElement[bool]:
    """Archived, and still standing (a rejected, held or superseded lesson is not listed as archived)."""
    return and_(*shown(t), t.c.archived_at.is_not(None))


def held(now: Any, t: Table = lessons) -> ColumnElement[bool]:
    """Held for a person's review, and otherwise active (what the review queue lists)."""
    return and_(*current(t), t.c.trust == HELD, t.c.archived_at.is_(None), unexpired(now, t))


def expired(now: Any, t: Table = lessons) -> ColumnElement[bool]:
    """Its TTL ran out while it was otherwise active."""
    return and_(*unarchived(t), t.c.expires_at.is_not(None), t.c.expires_at <= now)


def active_sql(alias: str = "l", now_param: str = "now") -> str:
    """``active`` as a SQL fragment over ``alias``, with ``:now_param`` bound by the caller (raw SQL
    that cannot take a SQLAlchemy clause). Rendered from the same clause, so the two cannot drift."""
    clause = active(literal_column(f":{now_param}"), lessons.alias(alias))
    return str(clause.compile(compile_kwargs={"literal_binds": True}))
