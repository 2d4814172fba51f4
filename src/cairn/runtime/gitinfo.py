"""Where a session is working: the repository, branch and project a working directory belongs to.

Context and recall default their ladder from the git checkout the agent runs in. This is read from
the ``.git`` files directly rather than by running ``git``: a hook pays for every subprocess on
every session start, and three ``git`` calls cost more than the rest of the hook's client side.
Anything unusual (a detached HEAD, a name the scope grammar refuses, an unreadable config) yields
``None`` for that part, never an error: outside a repository the ladder is just ``global``.

The repository comes from the ``origin`` remote, else from the only remote there is. A checkout with no
remote (or several, none named origin) is still a repository with branches: it becomes the local
repository ``local/<directory name>``, so its branch rung is not silently lost. Whenever detection had
to guess, ``Checkout.note`` says what it did, for ``cairn context`` and ``cairn doctor`` to show (the
hooks stay quiet).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
_BRANCH = re.compile(r"[A-Za-z0-9/._-]+")
LOCAL_OWNER = "local"  # the owner part of a repository known only by its directory name


@dataclass(frozen=True)
class Checkout:
    root: Path | None = None
    repo: str | None = None  # owner/name, lowercased, from the origin remote (see the module docstring)
    branch: str | None = None
    project: str | None = None  # the repository's name
    # How the repository was found: "origin", "remote" (the only one), "local" (no usable remote) or
    # None; and, when that was a guess or failed, one sentence saying so. Not part of equality.
    how: str | None = field(default=None, compare=False)
    note: str | None = field(default=None, compare=False)


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


def _remotes(common: Path) -> dict[str, str] | None:
    """Remote name -> URL, in config order; None when the config cannot be read."""
    import configparser  # only a command that reads the checkout's remote needs it (not finding the root)

    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(common / "config", encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    remotes: dict[str, str] = {}
    for section in parser.sections():
        if section.startswith('remote "') and section.endswith('"') and parser.has_option(section, "url"):
            remotes[section[len('remote "') : -1]] = parser.get(section, "url")
    return remotes


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
    if git_dir is None or not git_dir.is_dir():
        where = f" ({git_dir})" if git_dir is not None else ""
        return Checkout(root=root, project=_project(root.name), note=f"{root}/.git points at no git directory{where}")
    branch = _branch(git_dir)
    common = _common_dir(git_dir)
    remotes = _remotes(common)
    if remotes is None:
        return Checkout(
            root=root, branch=branch, project=_project(root.name), note="the git config cannot be read: no repository"
        )
    # A linked worktree is named after its branch; the repository is the main checkout's directory.
    home = common.parent if common.name == ".git" else root
    repo, how, note = _repo(remotes, home)
    name = repo.split("/", 1)[1] if repo else root.name.lower()
    return Checkout(root=root, repo=repo, branch=branch, project=_project(name), how=how, note=note)


def _project(name: str) -> str | None:
    name = name.lower()
    return name if _NAME.fullmatch(name) else None


def _repo(remotes: dict[str, str], root: Path) -> tuple[str | None, str | None, str | None]:
    """(repo, how, note): origin, else the only remote, else the directory name as a local repository."""
    if "origin" in remotes:
        chosen: str | None = "origin"
    elif len(remotes) == 1:
        chosen = next(iter(remotes))
    else:
        chosen = None
    if chosen is not None:
        repo = repo_from_url(remotes[chosen])
        if repo is not None:
            if chosen == "origin":
                return repo, "origin", None
            return repo, "remote", f"repository {repo} from the only remote, {chosen!r} (no origin)"
        why = f"the {chosen!r} remote's URL names no OWNER/NAME"
    elif remotes:
        why = f"several remotes ({', '.join(sorted(remotes))}) and none named origin"
    else:
        why = "no git remote"
    local = _project(root.name)
    if local is None:
        return None, None, f"{why}, and the directory name {root.name!r} is not a valid name: no repository rung"
    repo = f"{LOCAL_OWNER}/{local}"
    return repo, "local", f"{why}: using {repo} (the directory name) as the repository; pass --repo to choose"
