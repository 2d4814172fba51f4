"""Operations the local socket serves, shared by the daemon and the in-process fallback.

A request names an operation and its parameters; this module resolves the working context
(git checkout of the caller's ``cwd``, the repository's ``.cairn.toml``) and calls the service.
Both paths run this same code, so a hook's answer does not depend on whether the daemon is up.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.daemon import protocol
from cairn.errors import CairnError

if TYPE_CHECKING:
    from cairn.core.principal import Principal
    from cairn.service.api import Cairn

OPS = ("ping", "context", "recall")


def where(params: dict[str, Any]) -> tuple[str | None, str | None, str | None, Path | None]:
    """repo, branch, project: the flags given, the rest from the git checkout of ``cwd``.

    Detected parts fill in only when they describe the same repository as an explicit ``--repo``;
    a branch of the current checkout means nothing for another repository.
    """
    repo, branch, project = params.get("repo"), params.get("branch"), params.get("project")
    cwd = Path(params["cwd"]) if params.get("cwd") else None
    if cwd is not None and not (repo and branch and project):
        from cairn.runtime.gitinfo import detect

        found = detect(cwd)
        if not repo or repo == found.repo:
            repo = repo or found.repo
            branch = branch or found.branch
            project = project or found.project
    return repo or None, branch or None, project or None, cwd


def _caller_env(params: dict[str, Any]) -> dict[str, str] | None:
    """The caller's ``CAIRN_*`` settings variables (``cairn.runtime.client`` sends them), so the daemon
    answers with the settings the same call gets in process; None (an older client): this process's."""
    env = params.get("env")
    if env is None:
        return None
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise CairnError("INVALID_INPUT", "env maps variable names to strings")
    return env


def run(svc: Cairn, principal: Principal, home: Path, op: str, params: dict[str, Any]) -> dict[str, Any]:
    if op == "ping":
        import os

        return {"pid": os.getpid(), "home": str(home)}
    if op == "context":
        from cairn.runtime import settings as settings_mod

        repo, branch, project, cwd = where(params)
        cfg = settings_mod.load(home, cwd, _caller_env(params))
        return svc.context(
            principal,
            repo=repo,
            branch=branch,
            project=project,
            task=params.get("task"),
            max_chars=params.get("max_chars"),
            loop_cap=params.get("loop_cap"),
            settings=cfg,
        )
    if op == "recall":
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise CairnError("INVALID_INPUT", protocol.NO_FAILURE_TEXT)
        repo, branch, project, _ = where(params)
        return svc.recall(principal, text, scopes=params.get("scopes"), repo=repo, branch=branch, project=project)
    raise CairnError("INVALID_INPUT", f"unknown operation {op!r}; the daemon serves {', '.join(OPS)}")
