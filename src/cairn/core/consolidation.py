"""The consolidation planner: which lessons to merge, promote, archive or flag, and why. Pure.

A store that agents write into for a year fills with near-copies, one-off candidates nobody
confirmed, and lessons that disagree. This module looks at a tenant's active lessons as plain
records (no database, no clock of its own) and proposes named actions, each with the exact lessons
it read and a reason a person can check. ``service/consolidation.py`` stores the plan as a ledger
and applies it one action per transaction.

The actions, in the order a plan lists them:

* ``merge`` — a cluster of near-duplicates in one scope (``core/similarity.is_near_duplicate`` on
  every pair the neighbour search finds). The best member is kept: verified over candidate, then
  recurrence (``seen_count``), then helped ratio, then recency; every member that is a
  near-duplicate *of the keeper itself* is merged into it (a chain a~b~c where a and c differ keeps
  c for a later run rather than merging two lessons that are not alike).
* ``promote`` — the same lesson (near-duplicates, or the same text) in several ``branch::`` scopes of
  one repository becomes a candidate at ``repo::`` scope; in several repositories of one project
  (the repository's name, as git detection derives it) a candidate at ``project::`` scope — unless
  that scope already holds it, or the address it would be written at holds a lesson in any state (an
  archived one there is a person's earlier answer, or a promotion an undo archived: proposing it
  again on every run would only be skipped by the write's address check).
* ``flag-contradiction`` — a pair in one scope that is close in meaning and words but of opposite
  polarity (``core/similarity.is_contradiction``), not already linked ``contradicts``.
* ``archive-stale`` — candidates seen once (one sighting, ``seen_count`` 1), never marked helped,
  and unchanged for more than ``stale_days``; not one linked ``contradicts`` (a person decides those).
  One action per scope (``STALE_BATCH`` lessons at most).

A lesson takes part in at most one action of a plan: every action records the versions it read,
and an earlier action writing a lesson would make a later one that read it fail its guard.

The neighbour search is exact and scales to a whole store: per group (a scope; for promotion a
repository's branches or a project's repositories), the normalized vectors are multiplied block by
block (``block_rows`` rows against the rest of the group at a time) and only the pairs at or above
``similarity.MIN_COSINE`` are kept, so memory stays bounded by one block's products.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import combinations
from typing import TYPE_CHECKING, Literal, get_args

from cairn.core import similarity

if TYPE_CHECKING:
    import numpy as np

ActionKind = Literal["merge", "promote", "flag-contradiction", "archive-stale"]
ACTION_KINDS: tuple[str, ...] = get_args(ActionKind)
# planned: waiting; applied: written; discarded: its sources changed before it applied (a recomputed
# action replaces it); skipped: not written, with the reason; dropped: a person said no.
ActionStatus = Literal["planned", "applied", "discarded", "skipped", "dropped"]
ACTION_STATUSES: tuple[str, ...] = get_args(ActionStatus)
# planned: a plan waiting for a person; applying: an apply started (resume finishes it);
# finished: nothing left to apply; undone: its applied actions were reversed.
RunStatus = Literal["planned", "applying", "finished", "undone"]
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
RunMode = Literal["plan", "apply"]
RUN_MODES: tuple[str, ...] = get_args(RunMode)

DEFAULT_STALE_DAYS = 90
# How often `cairn serve` plans (``[consolidate] schedule``): a name, or a duration ("12h", "2d").
SCHEDULES: dict[str, timedelta | None] = {
    "off": None,
    "hourly": timedelta(hours=1),
    "daily": timedelta(days=1),
    "weekly": timedelta(days=7),
}
DEFAULT_SCHEDULE = "daily"
MIN_SCHEDULE = timedelta(minutes=5)  # a plan reads the whole store: never more often than this
MAX_STALE_DAYS = 36500
PROMOTE_MIN_SCOPES = 2  # distinct narrower scopes a lesson must recur in before it is proposed one rung up
STALE_BATCH = 200  # stale candidates of one scope archived by one action (one transaction)
# Products held at once by the neighbour search: block rows × group size floats (80 MB at 20M).
PRODUCT_BUDGET = 20_000_000


def schedule_interval(text: str) -> timedelta | None:
    """The time between scheduled plans (None: off); a bad value is refused with the accepted forms."""
    from cairn.core.timeparse import parse_duration
    from cairn.errors import CairnError

    name = text.strip().lower()
    if name in SCHEDULES:
        return SCHEDULES[name]
    try:
        return parse_duration(name, minimum=MIN_SCHEDULE, maximum=timedelta(days=365), code="INVALID_INPUT")
    except CairnError as exc:  # the named schedules are the usual answer: name them with the durations
        raise CairnError(
            exc.code,
            f"invalid schedule {text.strip()!r}: use {', '.join(SCHEDULES)} or a duration such as 12h or 2d "
            "(at least 5m, at most 365d)",
        ) from None


def due(last_started: datetime | None, now: datetime, schedule: str) -> bool:
    """Whether a scheduled plan is due: the schedule is on and the newest run (anyone's, scheduled or
    not) started at least one interval ago. Read from the ledger, so a daemon that restarts often (one
    started on demand exits when idle) still plans once per interval, not once per start."""
    interval = schedule_interval(schedule)
    if interval is None:
        return False
    return last_started is None or now - last_started >= interval


@dataclass(frozen=True)
class Record:
    """One lesson as the planner sees it (the service reads these; tests build them by hand)."""

    id: int
    scope: str
    key: str
    value: str
    kind: str
    trust: str
    archived: bool
    version: int
    seen_count: int
    sessions: int
    helped: int
    not_helped: int
    created_at: datetime
    updated_at: datetime
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Params:
    """What a run considers: ``scopes`` (empty: every scope; a ``repo::`` scope includes its
    branches) and the age past which an unconfirmed one-off candidate is stale."""

    scopes: tuple[str, ...] = ()
    stale_days: int = DEFAULT_STALE_DAYS


@dataclass(frozen=True)
class Proposal:
    """One proposed action. ``lesson_ids``: every lesson it reads (for a merge the keeper first, for
    a promotion the best source first); ``keep_id``: the merge's keeper; ``target_scope``: where a
    promotion writes."""

    kind: str
    lesson_ids: tuple[int, ...]
    reason: str
    keep_id: int | None = None
    target_scope: str | None = None


def in_scopes(scope: str, wanted: Sequence[str]) -> bool:
    """Whether a lesson's scope is one the run asked for (a repository includes its branches)."""
    if not wanted:
        return True
    for w in wanted:
        if scope == w:
            return True
        if w.startswith("repo::") and scope.startswith("branch::" + w[len("repo::") :] + "::"):
            return True
    return False


def rank_key(r: Record) -> tuple[int, int, float, float, int]:
    """Sort key, best first: verified, seen most, best helped ratio (0.5 prior), newest, oldest id."""
    ratio = (r.helped + 1) / (r.helped + r.not_helped + 2)
    return (0 if r.trust == "verified" else 1, -r.seen_count, -ratio, -r.updated_at.timestamp(), r.id)


def _why_kept(best: Record, others: Sequence[Record]) -> str:
    """The first criterion on which the keeper beats the runner-up, in words."""
    runner = min(others, key=rank_key)
    a, b = rank_key(best), rank_key(runner)
    if a[0] != b[0]:
        return "verified"
    if a[1] != b[1]:
        return f"seen {best.seen_count} times"
    if a[2] != b[2]:
        return "helped most"
    if a[3] != b[3]:
        return "most recent"
    return "oldest"


def neighbour_pairs(vectors: np.ndarray, floor: float) -> list[tuple[int, int, float]]:
    """Every pair (i < j) of rows whose cosine is at least ``floor``, exactly.

    ``vectors``: (n, d) float rows; normalized here, so a dot product is the cosine. Blocked: each
    step multiplies ``block`` rows by the rows after them, bounding memory to one block's products.
    """
    import numpy as np  # here, not at import: settings check a schedule on the hooks' path

    n = len(vectors)
    if n < 2:
        return []
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    v = v / np.where(norms == 0, 1.0, norms)
    # The transpose laid out once: a product against a transposed *view* takes a path in OpenBLAS
    # that was twenty times slower here than against a contiguous matrix.
    vt = np.ascontiguousarray(v.T)
    block = max(1, min(n, PRODUCT_BUDGET // n))
    out: list[tuple[int, int, float]] = []
    for start in range(0, n, block):
        stop = min(n, start + block)
        sims = v[start:stop] @ vt[:, start:]  # rows start..stop against start..n
        rows, cols = np.nonzero(sims >= floor)
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            i, j = start + r, start + c
            if j > i:
                out.append((i, j, float(sims[r, c])))
    return out


class _Union:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self) -> list[list[int]]:
        out: dict[int, list[int]] = defaultdict(list)
        for x in self.parent:
            out[self.find(x)].append(x)
        return [sorted(g) for g in out.values()]


@dataclass
class _Pairs:
    """What the rules said about each close pair of one group (ids, not rows)."""

    duplicate: dict[frozenset[int], float] = field(default_factory=dict)
    contradiction: dict[frozenset[int], float] = field(default_factory=dict)


def _judge(records: Sequence[Record], *, contradictions: bool = True) -> _Pairs:
    """The pairs of ``records`` the similarity rules call near-duplicates or contradictions."""
    pairs = _Pairs()
    with_vec = [r for r in records if r.vector is not None]
    # Without a vector (not embedded yet), identical words are still a duplicate. With vectors the
    # neighbour search finds identical text anyway (cosine 1), without tokenizing every lesson.
    by_text: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.vector is None:
            by_text[" ".join(similarity.tokens(r.value))].append(r)
    for same in by_text.values():
        for a, b in combinations(same, 2):
            pairs.duplicate[frozenset((a.id, b.id))] = 1.0
    if len(with_vec) < 2:
        return pairs
    import numpy as np

    matrix = np.stack([np.asarray(r.vector, dtype=np.float32) for r in with_vec])
    for i, j, cos in neighbour_pairs(matrix, similarity.MIN_COSINE):
        a, b = with_vec[i], with_vec[j]
        pair = frozenset((a.id, b.id))
        verdict = similarity.judge(a.value, b.value, cos)  # one reading of the pair for both rules
        if verdict == "duplicate":
            pairs.duplicate[pair] = max(cos, pairs.duplicate.get(pair, 0.0))
        elif contradictions and verdict == "contradiction":
            pairs.contradiction[pair] = cos
    return pairs


def _clusters(ids: Iterable[int], duplicate: Iterable[frozenset[int]]) -> list[list[int]]:
    u = _Union()
    for i in ids:
        u.find(i)
    for pair in duplicate:
        a, b = tuple(pair)
        u.union(a, b)
    return [g for g in u.groups() if len(g) > 1]


def _merges(records: Sequence[Record], used: set[int]) -> tuple[list[Proposal], dict[frozenset[int], float]]:
    """Merges within each scope, and the contradiction pairs found on the way."""
    by_scope: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_scope[r.scope].append(r)
    proposals: list[Proposal] = []
    contradictions: dict[frozenset[int], float] = {}
    for scope in sorted(by_scope):
        group = by_scope[scope]
        pairs = _judge(group)
        contradictions.update(pairs.contradiction)
        by_id = {r.id: r for r in group}
        for cluster in _clusters(by_id, pairs.duplicate):
            members = sorted((by_id[i] for i in cluster), key=rank_key)
            keeper = members[0]
            merged = [m for m in members[1:] if frozenset((keeper.id, m.id)) in pairs.duplicate]
            if not merged:
                continue
            cos = min(pairs.duplicate[frozenset((keeper.id, m.id))] for m in merged)
            reason = (
                f"{len(merged) + 1} near-duplicates in {scope} (cosine ≥ {cos:.2f} with the keeper, same "
                f"polarity, shared words): keeping {keeper.key} ({_why_kept(keeper, merged)}), merging "
                + ", ".join(m.key for m in merged)
            )
            ids = (keeper.id, *(m.id for m in merged))
            proposals.append(Proposal("merge", ids, reason, keep_id=keeper.id))
            used.update(ids)
    return proposals, contradictions


def _parent(scope: str) -> tuple[str, str] | None:
    """(the group a lesson promotes within, the scope one rung up) for branch and repo scopes."""
    if scope.startswith("branch::"):
        repo = scope[len("branch::") :].split("::", 1)[0]
        return repo, f"repo::{repo}"
    if scope.startswith("repo::"):
        name = scope[len("repo::") :].split("/", 1)[-1]
        return name, f"project::{name}"
    return None


def _promotions(
    records: Sequence[Record], everything: Sequence[Record], used: set[int], taken: Iterable[tuple[str, str]] = ()
) -> list[Proposal]:
    """A lesson recurring in several narrower scopes of one parent, proposed one rung up; ``taken``:
    addresses (scope, key) held by lessons that are not active, where a promotion cannot be written."""
    occupied = {*taken, *((r.scope, r.key) for r in everything)}
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.id in used:
            continue
        parent = _parent(r.scope)
        if parent is not None:
            groups[parent[1]].append(r)
    held: dict[str, list[Record]] = defaultdict(list)
    for r in everything:
        if r.scope in groups:
            held[r.scope].append(r)
    proposals: list[Proposal] = []
    for target in sorted(groups):
        sources = groups[target]
        already = held[target]
        pairs = _judge([*sources, *already], contradictions=False)
        by_id = {r.id: r for r in [*sources, *already]}
        for cluster in _clusters(by_id, pairs.duplicate):
            if any(by_id[i].scope == target for i in cluster):
                continue  # the rung above holds it already
            members = sorted((by_id[i] for i in cluster), key=rank_key)
            scopes = sorted({m.scope for m in members})
            if len(scopes) < PROMOTE_MIN_SCOPES:
                continue
            best = members[0]
            if (target, best.key) in occupied:
                continue
            what = "branches" if target.startswith("repo::") else "repositories"
            reason = (
                f"the same lesson in {len(scopes)} {what} ({', '.join(scopes)}): a candidate at {target}, "
                f"key {best.key}, derived from {len(members)} lesson(s)"
            )
            ids = tuple(m.id for m in members)
            proposals.append(Proposal("promote", ids, reason, target_scope=target))
            used.update(ids)
    return proposals


def _contradiction_flags(
    found: dict[frozenset[int], float], by_id: dict[int, Record], flagged: set[frozenset[int]], used: set[int]
) -> list[Proposal]:
    proposals = []
    for pair in sorted(found, key=lambda p: sorted(p)):
        if pair in flagged or pair & used:
            continue
        a, b = (by_id[i] for i in sorted(pair))
        # The kind of disagreement only: its detail quotes the lessons' words, and a reason outlives
        # a purge of their text.
        found_why = similarity.disagreement(a.value, b.value)
        how = found_why.kind if found_why is not None else "disagreement"
        reason = (
            f"{a.key} and {b.key} in {a.scope} are alike (cosine {found[pair]:.2f}, shared words) but "
            f"disagree ({how}): linked 'contradicts' and both sent to review"
        )
        proposals.append(Proposal("flag-contradiction", (a.id, b.id), reason))
        used.update(pair)
    return proposals


def _stale(records: Sequence[Record], now: datetime, stale_days: int, used: set[int]) -> list[Proposal]:
    """Stale candidates, one action per scope (at most ``STALE_BATCH`` lessons each, oldest first):
    a person reviews "these 40 one-off notes in repo::x" at once, and an action is one transaction,
    so a store with thousands of them is not thousands of commits."""
    cutoff = now - timedelta(days=stale_days)
    by_scope: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.id in used or r.trust != "candidate" or r.seen_count > 1 or r.sessions > 1 or r.helped > 0:
            continue
        if r.updated_at <= cutoff:
            by_scope[r.scope].append(r)
    proposals = []
    for scope in sorted(by_scope):
        group = sorted(by_scope[scope], key=lambda r: (r.updated_at, r.id))
        for start in range(0, len(group), STALE_BATCH):
            chunk = group[start : start + STALE_BATCH]
            oldest, newest = (now - chunk[0].updated_at).days, (now - chunk[-1].updated_at).days
            days = f"{newest}" if oldest == newest else f"{newest}-{oldest}"
            reason = (
                f"{len(chunk)} candidate(s) in {scope} seen once, never marked helped, unchanged for {days} days "
                f"(stale after {stale_days}): archived, restorable: " + ", ".join(r.key for r in chunk)
            )
            proposals.append(Proposal("archive-stale", tuple(r.id for r in chunk), reason))
            used.update(r.id for r in chunk)
    return proposals


def plan(
    records: Sequence[Record],
    now: datetime,
    params: Params = Params(),  # noqa: B008 - frozen, never mutated
    *,
    flagged: Iterable[Iterable[int]] = (),
    taken: Iterable[tuple[str, str]] = (),
) -> list[Proposal]:
    """The ordered actions for these lessons: merges, promotions, contradiction flags, stale archives.

    ``records``: the tenant's active lessons (archived ones are ignored); ``flagged``: pairs already
    linked ``contradicts`` (not flagged again); ``taken``: addresses held by lessons that are not
    active (no promotion is proposed at one). A lesson appears in at most one action.
    """
    live = [r for r in records if not r.archived and r.trust != "rejected"]
    chosen = [r for r in live if in_scopes(r.scope, params.scopes)]
    used: set[int] = set()
    merges, contradictions = _merges(chosen, used)
    promotions = _promotions(chosen, live, used, taken)
    done = {frozenset(p) for p in flagged}
    flags = _contradiction_flags(contradictions, {r.id: r for r in chosen}, done, used)
    # A lesson in a flagged contradiction waits for a person's verdict; it is not archived as stale.
    awaiting = used | {i for pair in done for i in pair}
    stale = _stale(chosen, now, params.stale_days, awaiting)
    return [*merges, *promotions, *flags, *stale]


def recompute(
    kind: str,
    records: Sequence[Record],
    now: datetime,
    params: Params = Params(),  # noqa: B008 - frozen, never mutated
    *,
    everything: Sequence[Record] = (),
    flagged: Iterable[Iterable[int]] = (),
    taken: Iterable[tuple[str, str]] = (),
) -> Proposal | None:
    """The action of ``kind`` these lessons call for now (their current state), or None.

    Used when an action's sources changed between plan and apply: the same lessons are looked at
    again, and the first action of the same kind over them replaces the discarded one.
    ``everything``: for a promotion, the lessons of the rung above (so it is not proposed twice).
    """
    live = [r for r in records if not r.archived and r.trust != "rejected"]
    used: set[int] = set()
    if kind == "merge":
        found = _merges(live, used)[0]
    elif kind == "promote":
        found = _promotions(live, [*live, *everything], used, taken)
    elif kind == "flag-contradiction":
        pairs = _judge(live)
        done = {frozenset(p) for p in flagged}
        found = _contradiction_flags(pairs.contradiction, {r.id: r for r in live}, done, used)
    elif kind == "archive-stale":
        found = _stale(live, now, params.stale_days, used)
    else:
        raise ValueError(f"unknown action kind {kind!r}")
    return found[0] if found else None
