"""Many writes at once: ``write``'s own path per lesson, one transaction per batch.

A bulk writer (a script, a migration from another tool, the Python API) pays for a transaction per
lesson on the single-write path: its commit and the pages every index of every table it touches
write to the WAL again and again. Here each lesson still goes through ``Lessons.write_in`` — the
tombstone check, recurrence, promotion, the tenant's limits, its own version row and its own audit
row — but ``BATCH`` lessons share one transaction, so those pages are written once per batch.

A lesson whose scope is bound to an org is written there, alone, through the single-write path
(routing takes the org's lock; one transaction holds one tenant's). A refusal of one lesson
(``TOMBSTONED``, ``LIMIT``) is reported in its place and the others are written: every rule refuses
before the lesson's first row is written, so a refused lesson leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from cairn.core.principal import WRITE, Principal
from cairn.errors import CairnError
from cairn.service import limits
from cairn.service.import_bulk import PlainBulk
from cairn.service.tx import bindings_of, route_by, write_tx
from cairn.service.write_input import WriteInput, make_write

if TYPE_CHECKING:
    from cairn.service.lessons import Lessons

BATCH = 500
# What one lesson's refusal may be without stopping the others: the rules that answer "not this
# lesson" (forgotten content, a limit). Anything else is an error of the whole call.
REFUSALS = ("TOMBSTONED", "LIMIT")
FIELDS = ("scope", "key", "value")


def parse(principal: Principal, items: Iterable[Mapping[str, Any]]) -> list[WriteInput]:
    """Every item checked as ``write`` checks its arguments, before anything is written."""
    inputs = []
    for n, item in enumerate(items):
        if not isinstance(item, Mapping) or any(not isinstance(item.get(f), str) for f in FIELDS):
            raise CairnError(
                "INVALID_INPUT",
                f"item {n}: each item is a mapping with scope, key and value (strings) and write's options",
                {"index": n},
            )
        options = {k: v for k, v in item.items() if k not in FIELDS}
        try:
            inp = make_write(principal, item["scope"], item["key"], item["value"], **options)
        except TypeError:
            unknown = ", ".join(sorted(options))
            raise CairnError("INVALID_INPUT", f"item {n}: unknown option among {unknown}", {"index": n}) from None
        except CairnError as exc:
            raise CairnError(exc.code, f"item {n}: {exc.message}", {**exc.data, "index": n}) from None
        principal.require(WRITE, inp.scope)
        inputs.append(inp)
    return inputs


def write_many(lessons: Lessons, principal: Principal, items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Write ``items`` in order; ``results`` holds one ``write`` result per item, or its refusal."""
    principal.require(WRITE)
    inputs = parse(principal, items)
    results: list[dict[str, Any]] = [{} for _ in inputs]
    routed: list[int] = []
    for start in range(0, len(inputs), BATCH):
        done = _batch(lessons, principal, inputs, start, min(start + BATCH, len(inputs)))
        for n, result in done:
            if result is None:
                routed.append(n)
            else:
                results[n] = result
    for n in routed:  # bound to an org: written there, one at a time, as ``write`` does
        results[n] = _one(lessons, principal, inputs[n])
    counts: dict[str, int] = {}
    for r in results:
        counts[r["action"]] = counts.get(r["action"], 0) + 1
    return {"results": results, "counts": counts}


def _batch(
    lessons: Lessons, principal: Principal, inputs: list[WriteInput], start: int, end: int
) -> list[tuple[int, dict[str, Any] | None]]:
    """One transaction: plainly new lessons through the import's create lane, the rest one by one.

    The lane (``import_bulk.PlainBulk``) takes exactly the lessons ``write_in`` would create without
    a question (free address, no twin in the scope, no live tombstone, no session to count) and
    writes them with one statement per table; every other lesson takes ``write_in`` itself, after
    the pending creates are written, so lessons are written and audited in the caller's order. With
    a writes-per-minute or lesson-count limit every lesson takes ``write_in``, which checks them.
    """

    def tx(conn: Connection, acting: Principal) -> list[tuple[int, dict[str, Any] | None]]:
        out: list[tuple[int, dict[str, Any] | None]] = []
        lim, _ = limits.effective(conn, lessons.settings, acting.tenant_id)
        lane = PlainBulk(lessons, conn, acting, inputs[start:end], restore=False, candidate=False)
        lane.enabled = lane.enabled and not (lim.writes_per_minute or lim.max_lessons)
        pending: list[int] = []

        def flush() -> None:
            out.extend((n, lessons.created(row, lane.now)) for n, row in zip(pending, lane.flush(), strict=True))
            pending.clear()

        bindings = bindings_of(conn, acting)
        for n in range(start, end):
            inp = inputs[n]
            if route_by(acting, bindings, inp.scope) is not acting:
                out.append((n, None))
                continue
            if lane.can_create(inp) and _fits(lim, inp):
                lane.add(inp)
                pending.append(n)
                continue
            flush()
            out.append((n, _refusable(lambda: lessons.write_in(conn, acting, inp))))  # noqa: B023
            lane.touched(inp)
        flush()
        return out

    return write_tx(lessons.store, principal, tx)


def _fits(lim: limits.Limits, inp: WriteInput) -> bool:
    """Within the value-size limit (one that is not takes ``write_in``, which refuses it by name)."""
    return not lim.max_value_bytes or len(inp.value.encode()) <= lim.max_value_bytes


def _one(lessons: Lessons, principal: Principal, inp: WriteInput) -> dict[str, Any]:
    def tx(conn: Connection, acting: Principal) -> dict[str, Any]:
        return lessons.write_in(conn, acting, inp)

    return _refusable(lambda: write_tx(lessons.store, principal, tx, route=inp.scope))


def _refusable(write: Any) -> dict[str, Any]:
    try:
        result: dict[str, Any] = write()
    except CairnError as exc:
        if exc.code not in REFUSALS:
            raise
        return {"action": "refused", "code": exc.code, "message": exc.message, "data": exc.data}
    return result
