"""Where a session works, read from the ``.git`` files: ``repo_from_url`` for every remote form git accepts, and
``detect`` on real checkouts (made with ``git``): plain, no remote, detached HEAD, linked worktree, none."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cairn.core.scope import ladder
from cairn.runtime.gitinfo import Checkout, detect, find_root, repo_from_url


@pytest.mark.parametrize(
    ("url", "repo"),
    [
        ("git@github.com:Acme/Api.git", "acme/api"),
        ("git@github.com:acme/api", "acme/api"),
        ("github.com:acme/api.git", "acme/api"),
        ("https://github.com/Acme/API", "acme/api"),
        ("https://github.com/acme/api.git", "acme/api"),
        ("https://github.com/acme/api/", "acme/api"),
        ("https://user:token@github.com/acme/api.git", "acme/api"),
        ("ssh://git@github.com/acme/api.git", "acme/api"),
        ("ssh://git@git.example.com:2222/acme/api.git", "acme/api"),
        ("git://github.com/acme/api.git", "acme/api"),
        ("https://gitlab.com/group/subgroup/api.git", "subgroup/api"),
        ("git@gitlab.com:group/sub/deeper/api.git", "deeper/api"),
        ("/srv/git/acme/api.git", "acme/api"),
        ("file:///srv/git/acme/api.git", "acme/api"),
        ("  git@github.com:acme/api.git \n", "acme/api"),
        ("my.org/my_repo-2", "my.org/my_repo-2"),
    ],
)
def test_repo_from_url_reads_owner_and_name_from_every_form(url: str, repo: str) -> None:
    """scp-like, https, ssh with a port, git://, file://, local paths, .git suffix, uppercase, GitLab subgroups
    (the last two parts: the scope grammar has owner/name)."""
    assert repo_from_url(url) == repo


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "https://github.com",
        "https://github.com/",
        "git@github.com:acme",
        "../api",
        "api",
        "https://github.com/acme/my repo.git",
        "https://github.com/acme/ápi",
        "https://github.com/-acme/api",
        "https://github.com/acme/api?ref=main",
    ],
)
def test_repo_from_url_answers_none_for_what_names_no_repo(url: str) -> None:
    """No owner/name, or one the scope grammar would refuse: None, never an error and never a guess."""
    assert repo_from_url(url) is None


# -- detect on real checkouts -----------------------------------------------------------------------------------


def git(cwd: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(cwd), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com")
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    subprocess.run(["git", *args], cwd=cwd, check=True, env=env, capture_output=True)


def make_repo(path: Path, remote: str | None = "git@github.com:Acme/Api.git", branch: str | None = "feat/x") -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    if remote:
        git(path, "remote", "add", "origin", remote)
    if branch:
        git(path, "checkout", "-q", "-b", branch)
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    if find_root(tmp_path) is not None:
        pytest.skip(f"the temporary directory {tmp_path} is inside a git checkout")
    return tmp_path


def test_detect_a_checkout_and_its_ladder(outside: Path) -> None:
    """Origin git@github.com:Acme/Api.git on feat/x: repo acme/api, branch feat/x, project api — from the root
    and from a subdirectory — and the ladder a context walks from it."""
    repo = make_repo(outside / "Api")
    sub = repo / "src" / "pkg"
    sub.mkdir(parents=True)
    expected = Checkout(root=repo.resolve(), repo="acme/api", branch="feat/x", project="api")
    assert detect(repo) == expected
    assert detect(sub) == expected
    found = detect(sub)
    assert ladder(repo=found.repo, branch=found.branch, project=found.project) == [
        "branch::acme/api::feat/x",
        "repo::acme/api",
        "project::api",
        "global",
    ]


def test_detect_without_a_remote_is_a_local_repository_and_says_so(outside: Path) -> None:
    """No remote: the directory name is a local repository (``local/NAME``), so the branch keeps its rung,
    and the note says that this was a guess; a directory name the grammar refuses gives no repo rung."""
    repo = make_repo(outside / "MyProj", remote=None, branch=None)
    found = detect(repo)
    assert (found.repo, found.branch, found.project, found.how) == ("local/myproj", "main", "myproj", "local")
    assert found.note is not None and "no git remote" in found.note and "local/myproj" in found.note
    assert ladder(repo=found.repo, branch=found.branch, project=found.project) == [
        "branch::local/myproj::main",
        "repo::local/myproj",
        "project::myproj",
        "global",
    ]
    spaced = detect(make_repo(outside / "Has Space", remote=None, branch=None))
    assert (spaced.repo, spaced.project) == (None, None)  # not a valid name: no rung rather than an error
    assert spaced.note is not None and "not a valid name" in spaced.note


def test_detect_prefers_origin_but_takes_the_only_other_remote(outside: Path) -> None:
    """Origin wins when there are several remotes (and needs no note); a checkout with only ``upstream``
    still names its repo, with a note; several remotes and no origin is not guessed between."""
    both = make_repo(outside / "both")
    git(both, "remote", "add", "upstream", "https://github.com/upstream-org/api.git")
    assert (detect(both).repo, detect(both).how, detect(both).note) == ("acme/api", "origin", None)
    only = make_repo(outside / "only", remote=None)
    git(only, "remote", "add", "upstream", "https://github.com/Upstream-Org/Tool.git")
    found = detect(only)
    assert (found.repo, found.project, found.how) == ("upstream-org/tool", "tool", "remote")
    assert found.note is not None and "'upstream'" in found.note
    several = make_repo(outside / "several", remote=None)
    git(several, "remote", "add", "github", "https://github.com/acme/several.git")
    git(several, "remote", "add", "gitlab", "https://gitlab.com/acme/several.git")
    found = detect(several)
    assert (found.repo, found.branch, found.how) == ("local/several", "feat/x", "local")
    assert found.note is not None and "github, gitlab" in found.note
    odd = make_repo(outside / "odd", remote="https://example.com/")
    assert (detect(odd).repo, detect(odd).how) == ("local/odd", "local")
    assert "names no OWNER/NAME" in (detect(odd).note or "")


def test_detect_detached_head_has_no_branch(outside: Path) -> None:
    """A detached HEAD (a CI checkout of a commit) gives no branch rung, the rest stays."""
    repo = make_repo(outside / "Api")
    git(repo, "commit", "-q", "--allow-empty", "-m", "init")
    git(repo, "checkout", "-q", "--detach")
    found = detect(repo)
    assert (found.repo, found.branch, found.project) == ("acme/api", None, "api")


def test_detect_a_linked_worktree(outside: Path) -> None:
    """``git worktree add``: ``.git`` is a file; the remote comes from the main repository's config, the branch
    from the worktree's own HEAD, and the root is the worktree."""
    repo = make_repo(outside / "Api")
    git(repo, "commit", "-q", "--allow-empty", "-m", "init")
    tree = outside / "api-retry"
    git(repo, "worktree", "add", "-q", str(tree), "-b", "feat/retry-backoff")
    assert (tree / ".git").is_file()
    assert detect(tree) == Checkout(root=tree.resolve(), repo="acme/api", branch="feat/retry-backoff", project="api")
    assert detect(repo).branch == "feat/x"


def test_detect_a_worktree_file_with_a_relative_gitdir(outside: Path) -> None:
    """A ``.git`` file may point at its git dir with a relative path."""
    repo = make_repo(outside / "Api")
    git(repo, "commit", "-q", "--allow-empty", "-m", "init")
    tree = outside / "wt"
    git(repo, "worktree", "add", "-q", str(tree), "-b", "topic")
    absolute = (tree / ".git").read_text().split(":", 1)[1].strip()
    (tree / ".git").write_text(f"gitdir: {os.path.relpath(absolute, tree)}\n")
    assert (detect(tree).repo, detect(tree).branch) == ("acme/api", "topic")


def test_detect_outside_any_repository_is_all_none(outside: Path) -> None:
    """Not a checkout: every part None, and the ladder is global alone."""
    plain = outside / "plain"
    plain.mkdir()
    assert detect(plain) == Checkout()
    assert ladder() == ["global"]
    assert detect(outside / "does-not-exist") == Checkout()


def test_detect_never_raises_on_odd_checkouts(outside: Path) -> None:
    """A branch name the scope grammar refuses, an unreadable config, a ``.git`` file that points nowhere:
    each part degrades to None instead of failing the session start."""
    odd = make_repo(outside / "Api", branch="feat/ünïcode")
    assert (detect(odd).repo, detect(odd).branch) == ("acme/api", None)
    broken = make_repo(outside / "broken")
    (broken / ".git" / "config").write_bytes(b'\xff\xfe[remote "origin"\n\turl = \x00garbage')
    assert detect(broken).repo is None
    dangling = outside / "dangling"
    dangling.mkdir()
    (dangling / ".git").write_text("gitdir: /nonexistent/.git/worktrees/x\n")
    found = detect(dangling)
    assert (found.repo, found.branch, found.project) == (None, None, "dangling")
