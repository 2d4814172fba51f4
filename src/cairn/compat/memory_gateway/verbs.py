"""What each verb does: plan under the corpus lock, log the intent, change the store, then the files.

Order of a mutation (each step idempotent, so recovery can replay it after a crash):

1. plan: validate, resolve the slugs, refuse (dedup, ambiguity, boundary, permissions) with
   nothing changed;
2. ``intent`` in the write-ahead log, fsynced — from here the operation will complete;
3. ``store``: one service operation (its own transaction: version, audit, tombstone check) —
   a service refusal here closes the intent as aborted and nothing on disk has changed;
4. ``archive`` (the retired topic written into ``.archive/``, then the live file removed),
   ``newtopic`` (temp file, fsync, rename), ``index`` (MEMORY.md's lines);
5. ``commit``, then the audit JSONL line.

Files planted by hand are adopted: before a topic is changed its file's current text becomes a
version in the store if the store does not hold it yet, and when a type directory changed outside
the gateway (its mtime moved) its files are read again for identities and adoption.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.compat.memory_gateway import corpus as layout
from cairn.compat.memory_gateway.corpus import TYPES, Corpus, Topic
from cairn.compat.memory_gateway.envelope import GatewayError, from_cairn, note
from cairn.compat.memory_gateway.lock import CorpusLock
from cairn.compat.memory_gateway.wal import Wal, crash_point, intact

if TYPE_CHECKING:
    from collections.abc import Iterator

    from cairn.compat.memory_gateway.mirror import Mirror

AUDIT_ENV = "MEMORY_GATEWAY_DIR"
AUDIT_FILE = "memory-gateway.jsonl"
MAX_DEPTH = 3
DEFAULT_BUDGET = 50
SEARCH_LIMIT = 100


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogateescape")


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Gateway:
    """One corpus: its files, its log, its lock and (opened on first need) its Cairn store."""

    def __init__(self, root: str) -> None:
        self.corpus = Corpus(root)
        self.wal = Wal(self.corpus.state / "wal.jsonl")
        self.lock = CorpusLock(self.corpus.state)
        self._mirror: Mirror | None = None
        self._locked = False

    @property
    def mirror(self) -> Mirror:
        if self._mirror is None:
            from cairn.compat.memory_gateway.mirror import Mirror
            from cairn.errors import CairnError

            try:
                self._mirror = Mirror(self.corpus.root)
            except CairnError as exc:
                raise from_cairn(exc) from None
        return self._mirror

    def close(self) -> None:
        if self._mirror is not None:
            self._mirror.close()
        if self._locked:
            self.lock.release()
            self._locked = False

    # -- the lock, recovery, adoption ------------------------------------------------------------
    @contextmanager
    def locked(self) -> Iterator[None]:
        if self._locked:
            yield
            return
        self.lock.acquire()
        self._locked = True
        try:
            yield
        finally:
            self.lock.release()
            self._locked = False

    @contextmanager
    def writing(self) -> Iterator[None]:
        """The lock for one mutation; the store is opened first, so the lock covers only the change."""
        _ = self.mirror
        with self.locked():
            yield

    def recover(self) -> None:
        """Complete what a crashed call left open, before serving anything."""
        pending, damaged = self.wal.pending()
        if not pending and not damaged:
            return
        with self.locked():
            pending, damaged = self.wal.pending()
            if damaged:
                self.wal.repair()
            for rec in pending:
                txn = str(rec.get("txn"))
                if not intact(rec):
                    self.wal.abort(txn, "sha_mismatch")
                    note(f"memory-gateway: write-ahead intent {txn} does not match its sha256; not replayed")
                    continue
                try:
                    self._apply(rec["payload"], txn, replay=True)
                except GatewayError as exc:
                    if exc.code == "IO_ERROR":
                        raise
                    note(f"memory-gateway: intent {txn} could not be completed: {exc.message}")

    def _identities_path(self) -> Path:
        return self.corpus.state / "identities.json"

    def _identities(self) -> dict[str, Any]:
        try:
            data = json.loads(self._identities_path().read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _changed_types(self) -> list[str]:
        cache = self._identities()
        return [t for t in TYPES if cache.get(t, {}).get("stamp") != self.corpus.dir_stamp(t)]

    def refresh(self, adopt: bool = True) -> None:
        """Re-read type directories changed outside the gateway: identities, and adoption (locked)."""
        changed = self._changed_types()
        if not changed:
            return
        cache = self._identities()
        for type_ in changed:
            stamp = self.corpus.dir_stamp(type_)
            divergent: dict[str, str] = {}
            known = self.mirror.active() if adopt else {}
            for slug in self.corpus.live_slugs(type_):
                topic = self.corpus.load(slug)
                if topic is None:
                    continue
                norm = layout.normalize(topic.name)
                if norm != topic.stem:
                    divergent[topic.stem] = norm
                if adopt and layout.is_stem(topic.stem):
                    held = known.get(slug)
                    from cairn.core.content import content_hash

                    if held is None or held["content_hash"] != content_hash(topic.body.rstrip()):
                        self._adopt(topic)
            cache[type_] = {"stamp": stamp, "divergent": divergent}
        self._save_identities(cache)

    def _save_identities(self, cache: dict[str, Any]) -> None:
        try:
            self.corpus.state.mkdir(parents=True, exist_ok=True)
            tmp = self._identities_path().with_suffix(".tmp")
            tmp.write_text(json.dumps(cache, sort_keys=True))
            os.replace(tmp, self._identities_path())
        except OSError as exc:
            note(f"memory-gateway: cannot save {self._identities_path()}: {exc.strerror}")

    def _restamp(self, types: set[str]) -> None:
        """After our own change to a directory the cache stays valid: record its new mtime."""
        cache = self._identities()
        for t in types:
            entry = cache.setdefault(t, {"stamp": None, "divergent": {}})
            entry["stamp"] = self.corpus.dir_stamp(t)
        self._save_identities(cache)

    def _live_for_write(self, slug: str) -> Topic:
        """Under the writer's lock: finish any interrupted write, mirror the corpus, and return the live
        topic at ``slug`` with its lesson in the store (NOT_FOUND when there is none)."""
        self.recover()
        self.refresh()
        topic = self.corpus.load(slug)
        if topic is None:
            raise GatewayError("NOT_FOUND", f"no live topic {slug}", slug=slug)
        self._adopt(topic)
        return topic

    def _adopt(self, topic: Topic) -> None:
        """A file's current text as a version in the store, if the store does not hold it already."""
        if not topic.body.strip() or not layout.is_stem(topic.stem):
            return
        from cairn.errors import CairnError

        try:
            self.mirror.put(topic.slug, topic.description, topic.body)
        except CairnError as exc:
            note(f"memory-gateway: {topic.slug} not mirrored into the store: {exc.message}")

    def matches(self, type_: str, norm: str) -> list[str]:
        """Live topics whose identity is ``(type_, norm)``: the file of that name, and divergent ones."""
        out = []
        stems = [norm] + sorted(
            s for s, n in self._identities().get(type_, {}).get("divergent", {}).items() if n == norm
        )
        for stem in dict.fromkeys(stems):
            slug = f"{type_}/{stem}"
            try:
                topic = self.corpus.load(slug)
            except GatewayError:
                continue
            if topic is not None and layout.normalize(topic.name) == norm:
                out.append(slug)
        return sorted(out)

    # -- applying a logged operation -------------------------------------------------------------
    def _run(self, verb: str, payload: dict[str, Any]) -> None:
        txn = self.wal.intent(verb, payload)
        crash_point("intent")
        self._apply(payload, txn, replay=False)

    def _apply(self, payload: dict[str, Any], txn: str, *, replay: bool) -> None:
        from cairn.errors import CairnError

        op = payload["op"]
        try:
            self._store_step(payload)
        except CairnError as exc:
            self.wal.abort(txn, exc.code)
            raise from_cairn(exc) from None
        crash_point("store")
        root = self.corpus.root
        touched: set[str] = set()
        arch = payload.get("archive")
        if arch:
            dest = self.corpus.inside(root / arch["to"], arch["from"])
            if not dest.exists():
                self.corpus.write_atomic(dest, _bytes(arch["data"]), arch["from"])
            live = self.corpus.live_path(arch["from"])
            if self.corpus.raw(arch["from"]) == _bytes(arch["live"]):
                self.corpus.remove(live, arch["from"])
            touched.add(arch["from"].split("/")[0])
            crash_point("archive")
        for rel in payload.get("remove", []):
            path = self.corpus.inside(root / rel)
            self.corpus.remove(path)
            if rel.startswith(layout.ARCHIVE_DIR + "/"):
                with suppress(OSError):
                    path.parent.rmdir()
            else:
                touched.add(rel.split("/")[0])
        if payload.get("remove"):
            crash_point("remove")
        if "file" in payload:
            slug = payload["slug"]
            data = _bytes(payload["file"])
            if self.corpus.raw(slug) != data:
                self.corpus.write_atomic(self.corpus.live_path(slug), data, slug)
            touched.add(slug.split("/")[0])
            crash_point("newtopic")
        lines = self.corpus.index_lines()
        before = dict(lines)
        for slug in payload.get("unindex", []):
            lines.pop(slug, None)
        if "line" in payload:
            lines[payload["slug"]] = payload["line"]
        if lines != before or not (root / layout.INDEX_FILE).exists():
            self.corpus.write_index(lines)
        crash_point("index")
        self.wal.commit(txn)
        crash_point("commit")
        self._restamp(touched)
        self._audit(op if op != "supersede" else "update", payload.get("slug"), replay=replay)

    def _store_step(self, payload: dict[str, Any]) -> None:
        op, slug = payload["op"], payload["slug"]
        m = self.mirror
        if op in ("create", "update"):
            m.put(slug, payload["description"], payload["body"])
        elif op == "supersede":
            if payload.get("old"):
                m.supersede(slug, payload["description"], payload["body"], payload["old"])
            else:
                m.put(slug, payload["description"], payload["body"])
        elif op == "archive":
            m.archive(slug)
        elif op == "forget":
            m.forget(slug, payload["reason"])

    def _audit(self, verb: str, slug: str | None, *, replay: bool = False) -> None:
        """The peer's audit JSONL (``$MEMORY_GATEWAY_DIR/memory-gateway.jsonl``); Cairn's own chain is in the store."""
        where = Path(os.environ.get(AUDIT_ENV) or Path.home() / ".claude" / "audit")
        line = {"ts": _stamp(), "verb": verb, "slug": slug, "corpus": str(self.corpus.real)}
        if replay:
            line["recovered"] = True
        try:
            where.mkdir(parents=True, exist_ok=True)
            with open(where / AUDIT_FILE, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        except OSError as exc:
            note(f"memory-gateway: audit line not written to {where}: {exc.strerror}")

    def _archive_plan(self, slug: str, by: str | None) -> dict[str, Any]:
        raw = self.corpus.raw(slug)
        assert raw is not None
        topic = layout.parse(slug, raw)
        dest = self.corpus.next_archive(slug)
        self.corpus.writable(dest, slug)
        self.corpus.writable(self.corpus.live_path(slug), slug)
        extra = {"archived": _stamp()}
        if by:
            extra["superseded_by"] = by
        data = layout.render(topic.name, topic.description, topic.type, topic.body, extra)
        return {
            "from": slug,
            "to": str(dest.relative_to(self.corpus.root)),
            "data": _text(data),
            "live": _text(raw),
        }

    # -- the verbs -------------------------------------------------------------------------------
    def create(self, name: str, type_: str | None, description: str, body: str) -> tuple[str, dict[str, Any]]:
        type_ = layout.check_type(type_)
        layout.check_line("description", description)
        slug = layout.slug_for(type_, name)
        _need_body(body)
        with self.writing():
            self.recover()
            self.refresh()
            path = self.corpus.live_path(slug)
            if path.exists():
                raise GatewayError(
                    "DEDUP_COLLISION", f"{slug} already exists (identity {slug})", {"existing": slug}, slug
                )
            others = self.matches(type_, layout.normalize(name))
            if others:
                raise GatewayError(
                    "DEDUP_COLLISION",
                    f"identity {slug} is already held by {', '.join(others)}",
                    {"existing": others[0]},
                    slug,
                )
            self.corpus.writable(path, slug)
            topic = Topic(slug, type_, name, description, body)
            self._run(
                "create",
                {
                    "op": "create", "slug": slug, "description": description, "body": body,
                    "file": _text(topic.render()), "line": layout.index_line(topic),
                },
            )  # fmt: skip
        return slug, {"path": f"{slug}.md", "created": True}

    def update(self, slug: str, delta: str) -> tuple[str, dict[str, Any]]:
        type_, stem = layout.parse_slug(slug)
        slug = f"{type_}/{stem}"
        _need_body(delta, "the text to append")
        with self.writing():
            topic = self._live_for_write(slug)
            self.corpus.writable(self.corpus.live_path(slug), slug)
            body = topic.body.rstrip("\n") + "\n" + delta
            new = Topic(slug, topic.type, topic.name, topic.description, body)
            self._run(
                "update",
                {
                    "op": "update", "slug": slug, "description": topic.description, "body": body,
                    "file": _text(new.render()), "line": layout.index_line(new),
                },
            )  # fmt: skip
        return slug, {"path": f"{slug}.md", "appended": len(delta.encode("utf-8"))}

    def supersede(
        self, type_: str | None, name: str | None, supersedes: str | None, description: str | None, body: str
    ) -> tuple[str, dict[str, Any]]:
        type_ = layout.check_type(type_)
        if not name:
            raise GatewayError("USAGE", "update --supersede needs --name NAME")
        if description is not None:
            layout.check_line("description", description)
        slug = layout.slug_for(type_, name)
        _need_body(body)
        explicit = None
        if supersedes is not None:
            t, s = layout.parse_slug(supersedes)
            explicit = f"{t}/{s}"
        with self.writing():
            self.recover()
            self.refresh()
            occupied = self.corpus.load(slug)
            if explicit is not None:
                if self.corpus.load(explicit) is None:
                    raise GatewayError("NOT_FOUND", f"no live topic {explicit} to supersede", slug=slug)
                if explicit != slug and occupied is not None:
                    raise GatewayError(
                        "NEW_SLUG_OCCUPIED",
                        f"{slug} is a live topic other than {explicit}; supersede it by name, or choose another name",
                        {"occupant": slug, "supersedes": explicit},
                        slug,
                    )
                old: str | None = explicit
            else:
                found = self.matches(type_, layout.normalize(name))
                if len(found) > 1:
                    raise GatewayError(
                        "SUPERSEDE_AMBIGUOUS",
                        f"{len(found)} live topics have identity {slug}: {', '.join(found)}; "
                        "name one with --supersedes",
                        {"candidates": found},
                        slug,
                    )
                old = found[0] if found else None
                if old is not None and old != slug and occupied is not None:
                    raise GatewayError(
                        "NEW_SLUG_OCCUPIED", f"{slug} is occupied by another topic than {old}", {"occupant": slug}, slug
                    )
                if old is None and occupied is not None:
                    old = slug  # a divergent file at the new address: it is retired, never clobbered
            prior = self.corpus.load(old) if old else None
            if prior is not None and old == slug and prior.body.rstrip() == body.rstrip():
                return slug, {"superseded": None, "unchanged": True, "path": f"{slug}.md"}
            desc = description if description is not None else (prior.description if prior else "")
            if prior is not None:
                self._adopt(prior)
            self.corpus.writable(self.corpus.live_path(slug), slug)
            topic = Topic(slug, type_, name, desc, body)
            payload: dict[str, Any] = {
                "op": "supersede", "slug": slug, "old": old, "description": desc, "body": body,
                "file": _text(topic.render()), "line": layout.index_line(topic),
            }  # fmt: skip
            if old is not None:
                payload["archive"] = self._archive_plan(old, slug)
                if old != slug:
                    payload["unindex"] = [old]
            self._run("supersede", payload)
        data = {"superseded": old, "path": f"{slug}.md"}
        if old is not None:
            data["archived"] = payload["archive"]["to"]
        return slug, data

    def archive(self, slug: str) -> tuple[str, dict[str, Any]]:
        type_, stem = layout.parse_slug(slug)
        slug = f"{type_}/{stem}"
        with self.writing():
            self._live_for_write(slug)
            plan = self._archive_plan(slug, None)
            self._run("archive", {"op": "archive", "slug": slug, "archive": plan, "unindex": [slug]})
        return slug, {"archived": plan["to"]}

    def forget(self, slug: str, reason: str | None) -> tuple[str, dict[str, Any]]:
        """Erase a topic: live file, archive tier, and the store's lesson rejected with a tombstone."""
        type_, stem = layout.parse_slug(slug)
        slug = f"{type_}/{stem}"
        if not reason or not reason.strip():
            raise GatewayError("USAGE", 'forget needs --reason "why this must go"', slug=slug)
        with self.writing():
            self.recover()
            self.refresh()
            topic = self.corpus.load(slug)
            if topic is not None:
                self._adopt(topic)
            archived = [str(p.relative_to(self.corpus.root)) for _, p in self.corpus.archived(slug)]
            row = self.mirror.row(slug)
            if topic is None and not archived and row is None:
                raise GatewayError("NOT_FOUND", f"no topic {slug}", slug=slug)
            remove = ([f"{slug}.md"] if topic is not None else []) + archived
            for rel in remove:
                self.corpus.writable(self.corpus.inside(self.corpus.root / rel), slug)
            self._run("forget", {"op": "forget", "slug": slug, "reason": reason, "remove": remove, "unindex": [slug]})
        return slug, {"removed": remove, "tombstoned": row is not None or topic is not None}

    def read(self, slug: str, archived: bool) -> tuple[str, dict[str, Any]]:
        type_, stem = layout.parse_slug(slug)
        slug = f"{type_}/{stem}"
        self.recover()
        if archived:
            out = []
            for seq, path in self.corpus.archived(slug):
                try:
                    topic = layout.parse(slug, self.corpus.inside(path, slug).read_bytes())
                except OSError:
                    continue
                out.append(
                    {"seq": seq, "path": str(path.relative_to(self.corpus.root)), "name": topic.name,
                     "description": topic.description, "content": topic.body}
                )  # fmt: skip
            if not out and self.corpus.load(slug) is None:
                raise GatewayError("NOT_FOUND", f"no topic {slug}, live or archived", slug=slug)
            return slug, {"archived": out}
        topic = self.corpus.load(slug)
        if topic is None:
            raise GatewayError("NOT_FOUND", f"no live topic {slug}", slug=slug)
        return slug, {
            "type": topic.type, "name": topic.name, "description": topic.description,
            "content": topic.body, "path": f"{slug}.md",
        }  # fmt: skip

    def search(self, query: str) -> dict[str, Any]:
        """Cairn's ranked hybrid search; ``matches`` hold the query's words, ``related`` only its meaning."""
        if not query.strip():
            raise GatewayError("USAGE", "search needs a query")
        self.recover()
        if self._changed_types():
            with self.locked():
                self.refresh()
        from cairn.errors import CairnError

        try:
            hits = self.mirror.search(query, SEARCH_LIMIT)
        except CairnError as exc:
            raise from_cairn(exc) from None
        from cairn.compat.memory_gateway.mirror import slug_of

        matches, related = [], []
        for h in hits:
            slug = slug_of(h["key"])
            if slug is None:
                continue
            try:
                if not self.corpus.live_path(slug).is_file():
                    continue
            except GatewayError:
                continue
            item = {
                "slug": slug,
                "description": h["lesson"]["trigger"] or "",
                "score": h["score"],
                "snippet": h["snippet"],
            }
            (matches if h["fts_rank"] is not None else related).append(item)
        return {"query": query, "matches": matches, "related": related}

    def neighborhood(self, seed: str, depth: int, budget: int) -> tuple[str, dict[str, Any]]:
        type_, stem = layout.parse_slug(seed)
        seed = f"{type_}/{stem}"
        self.recover()
        if self.corpus.load(seed) is None:
            raise GatewayError("NOT_FOUND", f"no live topic {seed}", slug=seed)
        nodes = [seed]
        edges: list[list[str]] = []
        frontier = [seed]
        truncated = False
        for _ in range(depth):
            nxt = []
            for node in frontier:
                topic = self.corpus.load(node)
                if topic is None:
                    continue
                for target in layout.wikilinks(topic.body):
                    try:
                        t, s = layout.parse_slug(target)
                        target = f"{t}/{s}"
                        if not self.corpus.live_path(target).is_file():
                            continue
                    except GatewayError:
                        continue
                    edges.append([node, target])
                    if target in nodes:
                        continue
                    if len(nodes) >= budget:
                        truncated = True
                        continue
                    nodes.append(target)
                    nxt.append(target)
            frontier = nxt
        return seed, {
            "seed": seed,
            "depth": depth,
            "budget": budget,
            "nodes": nodes,
            "edges": edges,
            "truncated": truncated,
        }

    def index(self) -> dict[str, Any]:
        """Rebuild MEMORY.md from the live files and bring the store in line with them."""
        with self.locked():
            self.recover()
            lines = {}
            live = {}
            for slug in self.corpus.all_live():
                topic = self.corpus.load(slug)
                if topic is not None:
                    lines[slug] = layout.index_line(topic)
                    live[slug] = topic
            self.corpus.write_index(lines)
            from cairn.core.content import content_hash

            held = self.mirror.active()
            adopted = 0
            for slug, topic in live.items():
                h = held.get(slug)
                if (h is None or h["content_hash"] != content_hash(topic.body.rstrip())) and topic.body.strip():
                    self._adopt(topic)
                    adopted += 1
            retired = 0
            for slug in held:
                if slug not in live:
                    self.mirror.archive(slug)
                    retired += 1
            cache = self._identities()
            for t in TYPES:
                cache.pop(t, None)
            self._save_identities(cache)
            self.refresh(adopt=False)
        return {"entries": len(lines), "adopted": adopted, "retired": retired}

    def history(self, slug: str) -> tuple[str, dict[str, Any]]:
        """Every version the store holds of a topic (the archive tier keeps only retired files)."""
        type_, stem = layout.parse_slug(slug)
        slug = f"{type_}/{stem}"
        self.recover()
        from cairn.errors import CairnError

        if self.mirror.row(slug) is None:
            raise GatewayError("NOT_FOUND", f"the store holds no topic {slug}", slug=slug)
        try:
            hist = self.mirror.history(slug)
        except CairnError as exc:
            raise from_cairn(exc) from None
        versions = [
            {k: v[k] for k in ("version", "action", "recorded_at", "recorded_until", "archived", "trust", "value")}
            for v in hist["versions"]
        ]
        return slug, {"status": hist["status"], "versions": versions}


def _need_body(body: str, what: str = "the topic body") -> None:
    if not body.strip():
        raise GatewayError("USAGE", f"{what} is read from stdin and must not be empty")
    if "\x00" in body:
        raise GatewayError("USAGE", f"{what} contains a NUL character")
