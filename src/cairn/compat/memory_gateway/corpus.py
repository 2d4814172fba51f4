"""The corpus on disk, laid out exactly as memory-gateway lays it out (other tools read these files).

* a live topic is ``<corpus>/<type>/<name>.md``: front matter (``name``, ``description``, ``type``
  between ``---`` lines), then the body;
* ``<corpus>/.archive/<type>/<name>/<NNNN>.md`` holds retired versions (archive and supersession
  move a topic there; nothing in the archive tier is live);
* ``<corpus>/MEMORY.md`` has one ``- [name](type/name.md) — description`` line per live topic;
* ``<corpus>/.gateway/`` holds the gateway's own state: the lock, the write-ahead log, the Cairn
  store (see docs/memory-gateway.md for why the store sits there).

Identity is ``(type, normalize(name))``; the slug ``type/normalize(name)`` addresses a topic. Every
path is resolved and checked to stay inside the corpus before it is read or written, so a
symlink planted in the corpus (a type directory, a topic file, ``.archive``) cannot send an
operation outside it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cairn.compat.memory_gateway.envelope import GatewayError

TYPES = ("user", "feedback", "project", "reference")
STATE_DIR = ".gateway"
ARCHIVE_DIR = ".archive"
INDEX_FILE = "MEMORY.md"
# The Cairn key holds the name; its limit (core.keys.MAX_KEY_CHARS, less "feedback::") bounds it.
MAX_NAME_CHARS = 190
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_STEM = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_WIKILINK = re.compile(r"\[\[([^\[\]\n|#]+)(?:[|#][^\[\]\n]*)?\]\]")
_INDEX_LINE = re.compile(r"^- \[.*\]\(([^()\s]+)\.md\)")
_ARCHIVED = re.compile(r"^(\d+)\.md$")


def normalize(name: str) -> str:
    """memory-gateway's identity form: lowercase, every run of non-[a-z0-9] becomes ``-``, trimmed."""
    return _NON_ALNUM.sub("-", name.lower()).strip("-")


def is_stem(stem: str) -> bool:
    """True for a name already in normal form (every file the gateway writes has one)."""
    return bool(_STEM.match(stem))


def check_line(label: str, text: str) -> None:
    """Front matter values are one line: a newline would end or inject front matter fields."""
    if "\n" in text or "\r" in text or "\x00" in text:
        raise GatewayError("USAGE", f"{label} must be a single line (no newline, carriage return or NUL)")


def check_type(type_: str | None) -> str:
    if not type_:
        raise GatewayError("USAGE", f"--type is required: one of {', '.join(TYPES)}")
    if type_ not in TYPES:
        raise GatewayError("USAGE", f"--type must be one of {', '.join(TYPES)}; got {type_!r}")
    return type_


def slug_for(type_: str, name: str) -> str:
    check_line("name", name)
    stem = normalize(name)
    if not stem:
        raise GatewayError("USAGE", f"name {name!r} has no letter or digit to make a slug from")
    if len(stem) > MAX_NAME_CHARS:
        raise GatewayError("USAGE", f"name is {len(stem)} characters once normalized; the limit is {MAX_NAME_CHARS}")
    return f"{type_}/{stem}"


def parse_slug(slug: str) -> tuple[str, str]:
    """``type/name`` → (type, name); paths that could leave the corpus are BOUNDARY refusals."""
    if not slug:
        raise GatewayError("USAGE", "a slug is required (TYPE/NAME, e.g. user/profile)")
    if "\x00" in slug or "\n" in slug:
        raise GatewayError("BOUNDARY", "slug contains a control character", slug=slug)
    parts = slug.split("/")
    if slug.startswith("/") or os.path.isabs(slug) or ".." in parts or "." in parts or "\\" in slug:
        raise GatewayError("BOUNDARY", f"slug {slug!r} escapes the corpus root", slug=slug)
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise GatewayError("USAGE", f"slug {slug!r} is not TYPE/NAME (e.g. user/profile)", slug=slug)
    if parts[0] not in TYPES:
        raise GatewayError("NOT_FOUND", f"no topic {slug} (type must be one of {', '.join(TYPES)})", slug=slug)
    if parts[1].endswith(".md"):
        parts[1] = parts[1][:-3]
    return parts[0], parts[1]


@dataclass
class Topic:
    """One topic file: its address, front matter and body."""

    slug: str
    type: str
    name: str
    description: str
    body: str

    @property
    def stem(self) -> str:
        return self.slug.split("/", 1)[1]

    @property
    def identity(self) -> tuple[str, str]:
        return self.type, normalize(self.name)

    def render(self) -> bytes:
        return render(self.name, self.description, self.type, self.body)


def render(name: str, description: str, type_: str, body: str, extra: dict[str, str] | None = None) -> bytes:
    """The file's bytes: front matter, then the body with one final newline."""
    lines = ["---", f"name: {name}", f"description: {description}".rstrip(), f"type: {type_}"]
    lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
    lines.append("---")
    return ("\n".join(lines) + "\n" + body.rstrip() + "\n").encode("utf-8")


def parse(slug: str, data: bytes) -> Topic:
    """A topic file (front matter optional: a file planted by hand is a topic too)."""
    type_, stem = slug.split("/", 1)
    text = data.decode("utf-8", errors="replace")
    meta: dict[str, str] = {}
    body = text
    if text.startswith("---\n") or text.startswith("---\r\n"):
        lines = text.splitlines(keepends=True)
        for i in range(1, len(lines)):
            line = lines[i].rstrip("\r\n")
            if line == "---":
                body = "".join(lines[i + 1 :])
                break
            key, sep, value = line.partition(":")
            if sep:
                meta.setdefault(key.strip().lower(), value.strip())
        else:
            meta = {}
    return Topic(slug, type_, meta.get("name") or stem, meta.get("description", ""), body)


class Corpus:
    """Paths inside one corpus directory, each checked against the corpus root when resolved."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise GatewayError("SETUP", f"corpus root {root} does not exist or is not a directory")
        self.real = Path(os.path.realpath(self.root))
        self.state = self.root / STATE_DIR

    # -- boundaries ------------------------------------------------------------------------------
    def inside(self, path: Path, slug: str | None = None) -> Path:
        """``path`` if it resolves inside the corpus (symlinks followed), else a BOUNDARY refusal."""
        real = os.path.realpath(path)
        if real != str(self.real) and not real.startswith(str(self.real) + os.sep):
            raise GatewayError("BOUNDARY", f"{path} resolves outside the corpus root ({real})", slug=slug)
        return path

    def live_path(self, slug: str) -> Path:
        type_, stem = slug.split("/", 1)
        return self.inside(self.root / type_ / f"{stem}.md", slug)

    def archive_dir(self, slug: str) -> Path:
        type_, stem = slug.split("/", 1)
        return self.inside(self.root / ARCHIVE_DIR / type_ / stem, slug)

    # -- reading ---------------------------------------------------------------------------------
    def load(self, slug: str) -> Topic | None:
        """The live topic at ``slug``, or None (a path outside the corpus is refused, not read)."""
        path = self.live_path(slug)
        try:
            return parse(slug, path.read_bytes())
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            raise GatewayError("IO_ERROR", f"cannot read {path}: {exc.strerror}", slug=slug) from None

    def raw(self, slug: str) -> bytes | None:
        try:
            return self.live_path(slug).read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def live_slugs(self, type_: str) -> list[str]:
        """Every ``*.md`` in a type directory that resolves inside the corpus, sorted."""
        d = self.root / type_
        try:
            self.inside(d)
            names = sorted(e.name for e in os.scandir(d) if e.name.endswith(".md") and not e.name.startswith("."))
        except (FileNotFoundError, NotADirectoryError, GatewayError):
            return []
        out = []
        for n in names:
            slug = f"{type_}/{n[:-3]}"
            try:
                path = self.live_path(slug)
            except GatewayError:
                continue
            if path.is_file():
                out.append(slug)
        return out

    def all_live(self) -> list[str]:
        return [s for t in TYPES for s in self.live_slugs(t)]

    def archived(self, slug: str) -> list[tuple[int, Path]]:
        """The archive tier's versions of ``slug``: (sequence, path), oldest first."""
        d = self.archive_dir(slug)
        try:
            entries = [(int(m.group(1)), d / e) for e in os.listdir(d) if (m := _ARCHIVED.match(e))]
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(entries)

    def next_archive(self, slug: str) -> Path:
        seqs = [n for n, _ in self.archived(slug)]
        return self.archive_dir(slug) / f"{(max(seqs) + 1) if seqs else 1:04d}.md"

    def dir_stamp(self, type_: str) -> int | None:
        try:
            return os.stat(self.root / type_).st_mtime_ns
        except OSError:
            return None

    # -- writing ---------------------------------------------------------------------------------
    def writable(self, path: Path, slug: str | None = None) -> None:
        """Refuse before anything is changed when ``path``'s directory cannot be written.

        The nearest existing ancestor must be writable (root bypasses the check, as it bypasses
        permissions), so a failure is reported as IO_ERROR with nothing half-applied.
        """
        d = path.parent
        while not d.exists():
            if d == d.parent:
                break
            d = d.parent
        self.inside(d, slug)
        if not os.access(d, os.W_OK | os.X_OK):
            raise GatewayError("IO_ERROR", f"cannot write in {d}: permission denied", slug=slug)

    def write_atomic(self, path: Path, data: bytes, slug: str | None = None) -> None:
        """temp file in the same directory → fsync → rename → fsync the directory."""
        self.inside(path.parent if path.parent.exists() else self.root, slug)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.inside(path.parent, slug)
            tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            _fsync_dir(path.parent)
        except OSError as exc:
            raise GatewayError("IO_ERROR", f"cannot write {path}: {exc.strerror}", slug=slug) from None

    def remove(self, path: Path, slug: str | None = None) -> None:
        try:
            self.inside(path, slug)
            path.unlink()
            _fsync_dir(path.parent)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise GatewayError("IO_ERROR", f"cannot remove {path}: {exc.strerror}", slug=slug) from None

    # -- the index file --------------------------------------------------------------------------
    def index_lines(self) -> dict[str, str]:
        """MEMORY.md's topic lines by slug (other lines are not the gateway's and are dropped)."""
        try:
            text = (self.root / INDEX_FILE).read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            return {}
        out = {}
        for line in text.splitlines():
            m = _INDEX_LINE.match(line)
            if m:
                out[m.group(1)] = line
        return out

    def write_index(self, lines: dict[str, str]) -> None:
        body = "".join(lines[s] + "\n" for s in sorted(lines))
        self.write_atomic(self.inside(self.root / INDEX_FILE), body.encode("utf-8"))


def index_line(topic: Topic) -> str:
    """The MEMORY.md line of a live topic (Claude Code's memory index format)."""
    name = topic.name.replace("]", ")").replace("[", "(")
    line = f"- [{name}]({topic.slug}.md)"
    return f"{line} — {topic.description}" if topic.description else line


def wikilinks(body: str) -> list[str]:
    """``[[type/name]]`` targets in order of appearance, without duplicates."""
    seen: list[str] = []
    for m in _WIKILINK.finditer(body):
        target = m.group(1).strip()
        if target.endswith(".md"):
            target = target[:-3]
        if target and target not in seen:
            seen.append(target)
    return seen


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
