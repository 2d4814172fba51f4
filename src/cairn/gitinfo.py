"""Where a session is working: the repository, branch and project a working directory belongs to.

Context and recall default their ladder from the git checkout the agent runs in. This is read from
the ``.git`` files directly rather than by running ``git``: a hook pays for every subprocess on
every session start, and three ``git`` calls cost more than the rest of the hook's client side.
Anything unusual (no remote, a detached HEAD, a name the scope grammar refuses) yields ``None`` for
that part, never an error: outside a repository the ladder is just ``global``.
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from pathlib import Path

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
_BRANCH = re.compile(r"[A-Za-z0-9/._-]+")


@dataclass(frozen=True)
class Checkout:
    root: Path | None = None
    repo: str | None = None  # owner/name, lowercased, from the origin remote
    branch: str | None = None
    project: str | None = None  # the repository's name


def find_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git`` (a directory or a worktree file)."""
    try:
        here = start.resolve()
    except OSError:
        return None
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _git_dir(root: Path) -> Path | None:
    dot = root / ".git"
    if dot.is_dir():
        return dot
    try:  # a worktree or submodule: ".git" is a file "gitdir: <path>"
        text = dot.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if text.startswith("gitdir:"):
        target = Path(text.split(":", 1)[1].strip())
        return target if target.is_absolute() else (root / target).resolve()
    return None


def _common_dir(git_dir: Path) -> Path:
    """A linked worktree keeps its config in the main repository's git dir (``commondir``)."""
    try:
        rel = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    target = Path(rel)
    return target if target.is_absolute() else (git_dir / target).resolve()


def repo_from_url(url: str) -> str | None:
    """``owner/name`` from a remote URL in any of git's forms, or None.

    ``git@github.com:Acme/API.git``, ``https://github.com/acme/api``, ``ssh://git@host:22/acme/api.git``
    and GitLab subgroups (``group/sub/name`` → ``sub/name``: the scope grammar has two parts).
    """
    url = url.strip()
    if not url:
        return None
    if "://" in url:
        path = url.split("://", 1)[1]
        path = path.split("/", 1)[1] if "/" in path else ""
    elif ":" in url and not url.startswith("/"):
        path = url.split(":", 1)[1]  # scp-like: user@host:owner/name
    else:
        path = url  # a local path remote
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    parts = [p.lower() for p in path.split("/") if p]
    if len(parts) < 2:
        return None
    owner, name = parts[-2], parts[-1]
    if _NAME.fullmatch(owner) and _NAME.fullmatch(name):
        return f"{owner}/{name}"
    return None


def _origin(common: Path) -> str | None:
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(common / "config", encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    for section in ('remote "origin"', *[s for s in parser.sections() if s.startswith("remote ")]):
        if parser.has_option(section, "url"):
            return parser.get(section, "url")
    return None


def _branch(git_dir: Path) -> str | None:
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not head.startswith("ref: refs/heads/"):
        return None  # detached HEAD: no branch rung
    branch = head[len("ref: refs/heads/") :]
    return branch if _BRANCH.fullmatch(branch) and ".." not in branch else None


def detect(cwd: Path) -> Checkout:
    root = find_root(cwd)
    if root is None:
        return Checkout()
    git_dir = _git_dir(root)
    if git_dir is None:
        return Checkout(root=root)
    url = _origin(_common_dir(git_dir))
    repo = repo_from_url(url) if url else None
    name = repo.split("/", 1)[1] if repo else root.name.lower()
    project = name if _NAME.fullmatch(name) else None
    return Checkout(root=root, repo=repo, branch=_branch(git_dir), project=project)
