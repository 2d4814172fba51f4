"""Human-readable text for command results (``--json`` bypasses all of this)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from cairn.core.content import first_line


def _badge(lesson: dict[str, Any]) -> str:
    if lesson["trust"] == "held":
        return "held for review"
    return "verified" if lesson["trust"] == "verified" else "unverified candidate"


def held(mark: dict[str, Any]) -> str:
    """Which tombstone a held lesson resembles (unnamed when it is in a scope the caller cannot see)."""
    if "tombstone_id" not in mark:
        return f"resembles forgotten content (similarity {mark['similarity']})"
    lifted = ", since lifted" if mark.get("tombstone_lifted") else ""
    return (
        f"resembles forgotten {mark['scope']} {mark['key']} (tombstone {mark['tombstone_id']}{lifted}, "
        f"similarity {mark['similarity']}): {mark['reason']}"
    )


def write_result(r: dict[str, Any]) -> str:
    lesson = r["lesson"]
    where = f"{lesson['scope']} {lesson['key']}"
    action = r["action"]
    text = {
        "created": f"created {where} (v{lesson['version']}, {_badge(lesson)})",
        "updated": f"updated {where} -> v{lesson['version']} ({_badge(lesson)})",
        "recurred": f"recurrence of {where}: seen {lesson['seen_count']}x, no copy made",
        "promoted": f"recurrence of {where}: seen {lesson['seen_count']}x, promoted to verified",
        "unchanged": f"unchanged {where}",
    }.get(action, f"{action} {where}")
    # A held write's note is a sentence of its own (what happens next), printed under the tombstone
    # it resembles; the status line would only say "held" a third time.
    if r.get("note") and not r.get("held"):
        text += f" ({r['note']})"
    if r.get("routed_to"):
        text += f" [in {r['routed_to']}: the scope is bound there]"
    if r.get("held"):
        text += f"\nheld: {held(r['held'])}"
        if r.get("note"):
            text += f"\n{r['note']}"
    elif lesson["status"] != "active":
        text += f"\nnote: this lesson is {lesson['status']}; reads will not return it"
    return text


def supersede_result(r: dict[str, Any]) -> str:
    text = write_result(r)
    old = r.get("superseded")
    if old:
        text += f"\nretired {old['scope']} {old['key']} (was v{old['version']})"
    else:
        text += "\nnothing to supersede: plain create"
    return text


def lesson(lesson: dict[str, Any]) -> str:
    meta = [f"v{lesson['version']}", _badge(lesson), f"seen {lesson['seen_count']}x"]
    if lesson.get("tags"):
        meta.append("tags: " + ", ".join(lesson["tags"]))
    if lesson.get("expires_at"):
        meta.append(f"expires {lesson['expires_at']}")
    if lesson.get("valid_from") or lesson.get("valid_to"):
        meta.append(f"valid {lesson.get('valid_from') or '…'} to {lesson.get('valid_to') or '…'}")
    head = f"{lesson['scope']} {lesson['key']} · " + " · ".join(meta)
    if lesson.get("claimed"):
        head += "\n" + claimed(lesson["claimed"])
    return head + "\n\n" + lesson["value"]


def claimed(claims: dict[str, Any]) -> str:
    """What an import said about a lesson and was not granted, labelled as such."""
    shown = ", ".join(f"{k} {v}" for k, v in claims.items() if not isinstance(v, dict))
    return f"imported; claimed by the file, not granted: {shown}"


def lesson_list(r: dict[str, Any]) -> str:
    def line(item: dict[str, Any]) -> str:
        mark = "" if item["trust"] == "verified" else " [unverified]"
        return f"- ({item['scope']}) {item['key']}{mark} — {first_line(item['value'], 100)}"

    return page(r, "lessons", "no lessons", line)


def page(r: dict[str, Any], field: str, empty: str, line: Callable[[dict[str, Any]], str]) -> str:
    """A page of a listing: one line an item, then the next page's hint; ``empty`` when it holds none."""
    if not r[field]:
        return empty
    return "\n".join(line(item) for item in r[field]) + more(r)


def more(r: dict[str, Any]) -> str:
    """The next page's hint: the same command with ``--cursor`` (nothing on the last page)."""
    if not r.get("next_cursor"):
        return ""
    return f"\n… more: rerun with --cursor {r['next_cursor']}"


def history(r: dict[str, Any]) -> str:
    versions = r["versions"]
    # Only a history that branched (versions written beside each other on two stores, then synced)
    # says what each version was written on and which tips there are; a line reads as it always did.
    tips = [v for v in versions if v.get("tip")]
    branched = len(tips) > 1 or any(
        v.get("parents") is not None and v["parents"] != ([prev["version"]] if prev else [])
        for prev, v in zip([None, *versions], versions, strict=False)
    )
    lines = [f"{r['scope']} {r['key']} ({r['status']})"]
    if len(tips) > 1:
        lines[0] += f": {len(tips)} versions written beside each other (a conflict); the current one is marked"
    for v in versions:
        valid = ""
        if v["valid_from"] or v["valid_to"]:
            valid = f" valid {v['valid_from'] or '…'}..{v['valid_to'] or '…'}"
        graph = ""
        if branched and v.get("parents") is not None:
            marks = [f"on {', '.join(f'v{p}' for p in v['parents'])}"] if v["parents"] else []
            marks += ["current"] if v.get("current") else ["tip"] if v.get("tip") else []
            graph = f"  ({' · '.join(marks)})" if marks else ""
        lines.append(
            f"v{v['version']:<3} {v['recorded_at']}  {v['action']:<10} by {v['actor']}"
            f"  [{v['trust']}{', archived' if v['archived'] else ''}]{valid}{graph}"
        )
        lines.append(f"     {first_line(v['value'], 100)}")
    return "\n".join(lines)


def diff(r: dict[str, Any]) -> str:
    lines = [f"{r['scope']} {r['key']}: v{r['from']} -> v{r['to']}"]
    for name, change in r["fields"].items():
        lines.append(f"  {name}: {change['from']} -> {change['to']}")
    lines.append(r["value_diff"] or "(value unchanged)")
    return "\n".join(lines)


def changed(verb: str, r: dict[str, Any]) -> str:
    lesson = r["lesson"]
    where = f"{lesson['scope']} {lesson['key']}"
    return f"{verb} {where}" if r["changed"] else f"{where} was already {verb}"


def forgot(r: dict[str, Any]) -> str:
    if r.get("already"):
        return f"{r['scope']} {r['key']} was already forgotten (tombstone {r['tombstone_id']})"
    return f"forgot {r['scope']} {r['key']}: rejected, tombstone {r['tombstone_id']}"


def tombstones(r: dict[str, Any]) -> str:
    def line(t: dict[str, Any]) -> str:
        lifted = f" (lifted {t['lifted_at']}: {t['lift_reason']})" if t["lifted_at"] else ""
        return f"{t['id']:>5}  {t['scope']} {t['key']} — {t['reason']}{lifted}"

    return page(r, "tombstones", "no tombstones", line)


def review(r: dict[str, Any]) -> str:
    if not r["candidates"]:
        return "no candidates awaiting review"
    lines = [f"{len(r['candidates'])} candidate(s):"]
    for c in r["candidates"]:
        by = c["source_agent"] or c["created_by"]
        lines.append(f"- ({c['scope']}) {c['key']} — by {by}, seen {c['seen_count']}x — {first_line(c['value'], 90)}")
        if c.get("held"):
            lines.append(f"  held: {held(c['held'])}")
        if c.get("contradicts"):
            others = ", ".join(f"{o['scope']} {o['key']}" for o in c["contradicts"])
            lines.append(f"  contradicts: {others} (keep one: verify it, reject the other)")
        if c.get("conflict"):
            lines.append(f"  conflict: changed on two stores; both versions in: cairn history {c['scope']} {c['key']}")
    lines.append("verify: cairn review verify SCOPE KEY · reject: cairn review reject SCOPE KEY --reason R")
    return "\n".join(lines) + more(r)


def audit(r: dict[str, Any]) -> str:
    def line(e: dict[str, Any]) -> str:
        where = f" {e['scope']} {e['key']}" if e["scope"] else ""
        versions = ""
        if e["version_before"] is not None or e["version_after"] is not None:
            versions = f" v{e['version_before'] or '-'}->v{e['version_after'] or '-'}"
        return f"{e['seq']:>6} {e['at']} {e['actor']:<12} {e['action']:<10}{where}{versions}{_run_of(e)}{_sync_of(e)}"

    return page(r, "entries", "no audit entries", line)


def _sync_of(entry: dict[str, Any]) -> str:
    """For a row a sync wrote: the peer store it came from and, for an exchange, the peer's chain head
    then (what this store received, and from where); empty for every other row. Ids are shortened."""
    detail = entry.get("detail")
    if not isinstance(detail, dict):
        return ""
    head = detail.get("peer_head")
    if entry.get("action") == "sync-exchange" and isinstance(detail.get("peer"), str):
        text = f"  (peer {detail['peer'][:12]}"
        if isinstance(head, dict) and head.get("seq") is not None:
            text += f", its head seq {head['seq']} {str(head.get('hash') or '')[:16]}"
        counts = [f"{detail[k]} {k}" for k in ("applied", "conflicts", "refused") if detail.get(k)]
        return text + (f"; {', '.join(counts)})" if counts else ")")
    sync = detail.get("sync")
    if isinstance(sync, dict) and isinstance(sync.get("peer"), str):
        code = f"{detail['code']}, " if entry.get("action") == "sync-refused" and detail.get("code") else ""
        return f"  ({code}sync from {sync['peer'][:12]})"
    return ""


def _run_of(entry: dict[str, Any]) -> str:
    """The consolidation run (and action) a row was written by, so `cairn consolidate show RUN` gives
    its reason; empty for every other row."""
    detail = entry.get("detail")
    if not isinstance(detail, dict) or not isinstance(detail.get("consolidation"), int):
        return ""
    action = detail.get("action")
    at = f", action {action}" if isinstance(action, int) else ""
    return f"  (consolidation run {detail['consolidation']}{at})"


def neighborhood(r: dict[str, Any]) -> str:
    seed = r["seed"]
    lines = [f"{seed['scope']} {seed['key']} — {first_line(seed['value'], 100)}"]
    for n in r["nodes"]:
        arrow = "->" if n["direction"] == "out" else "<-"
        lines.append(f"{'  ' * n['depth']}{arrow} {n['rel']}: ({n['scope']}) {n['key']} — {n['summary']}")
    lines.append(f"{r['chars']}/{r['budget']} chars" + (f", {r['omitted']} left out" if r["omitted"] else ""))
    return "\n".join(lines)


def search(r: dict[str, Any]) -> str:
    if not r["results"]:
        return "no matches"
    lines = []
    for n, h in enumerate(r["results"], start=1):
        mark = "" if h["trust"] == "verified" else " [unverified]"
        lines.append(f"{n:>2}. ({h['scope']}) {h['key']}{mark}  score {h['score']:.4f}")
        lines.append(f"    {h['snippet']}")
    return "\n".join(lines)


def import_result(r: dict[str, Any]) -> str:
    text = (
        f"{'restored' if r.get('restore') else 'imported'} {r['records']} record(s): {r['created']} created, "
        f"{r['updated']} updated, {r['unchanged']} unchanged, {r['tombstones']} tombstone(s), "
        f"{r['links']} link(s), {len(r['refused'])} refused"
    )
    if not r.get("restore") and r["created"] + r["updated"]:
        text += "\nnew lessons are candidates by you; what the file claimed is kept as claims (cairn review)"
    return text


def embedded(n: int | None, pending: int, who: str) -> str:
    """The tail of an import's summary: ``n`` embedded (None: not tried) and ``pending`` still queued."""
    done = "" if n is None else f"; {n} embedded"
    if not pending:
        return done + ": searchable by meaning"
    return done + "\n" + still_queued(pending, who)


def still_queued(pending: int, who: str) -> str:
    """What an import says of the lessons it leaves queued for their embedding."""
    return (
        f"{pending} lesson(s) still queued for embedding: searches find them by their words now, and by "
        f"meaning once {who} embeds them (cairn status shows the queue)"
    )


@contextmanager
def progress(enabled: bool, label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on a terminal ("label: N of M"); nothing when piped or in JSON mode."""
    with progress_bars(enabled, [label]) as ticks:
        yield ticks[0]


@contextmanager
def progress_bars(enabled: bool, labels: list[str]) -> Iterator[list[Callable[[int, int], None] | None]]:
    """One bar per label on a terminal, shown together (work that runs side by side, such as an import's
    writing and its embedding); nothing when piped or in JSON mode."""
    if not enabled:
        yield [None for _ in labels]
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    # On stderr: stdout carries the result (and may be piped while a person watches the terminal).
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:

        def ticker(label: str) -> Callable[[int, int], None]:
            task = bar.add_task(label, total=None)

            def tick(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total, description=f"{label}: {done:,} of {total:,}")

            return tick

        yield [ticker(label) for label in labels]
