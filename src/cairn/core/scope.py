"""The scope grammar: the one validator every surface uses.

A scope decides who sees a lesson, so it is parsed strictly and fails closed: anything that is not
exactly one of the four forms is refused, never guessed into ``global``. Refusals carry the
corrected form when one can be derived, because the caller is usually an agent that will retry
with whatever the message tells it.

Canonical forms::

    global
    project::{name}
    repo::{owner}/{repo}
    branch::{owner}/{repo}::{branch}

Everything is lowercase except the branch name, which git treats as case-sensitive. Scopes are
ASCII only, so two spellings that look alike can never be two different scopes.
"""

from __future__ import annotations

import re
from functools import lru_cache

from cairn.errors import CairnError

MAX_SCOPE_CHARS = 300
MAX_NAME_CHARS = 100
MAX_BRANCH_CHARS = 200

KINDS = ("global", "project", "repo", "branch")
FORMS = "global, project::{name}, repo::{owner}/{repo}, branch::{owner}/{repo}::{branch}"

_EXAMPLES = {
    "project": "project::name",
    "repo": "repo::owner/name",
    "branch": "branch::owner/name::main",
}
_SHAPES = {
    "project": "project::{name}",
    "repo": "repo::{owner}/{repo}",
    "branch": "branch::{owner}/{repo}::{branch}",
}

_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
_BRANCH_RE = re.compile(r"[A-Za-z0-9/._-]+")
_OWNER_REPO_RE = re.compile(r"[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*")
# A colon run that is not exactly "::" (a lone ":" or ":::" and longer).
_BAD_SEPARATOR_RE = re.compile(r"(?<!:):(?!:)|:{3,}")
_SPACED_SEPARATOR_RE = re.compile(r"\s*(:+)\s*")


class _Refusal(Exception):
    """Internal: why a scope was refused, and the corrected scope if one could be derived."""

    def __init__(self, reason: str, corrected: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.corrected = corrected


def _quote(text: str, limit: int = 80) -> str:
    """Quote user input for a message without letting control characters reach a terminal."""
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    escaped = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in shown)
    return f'"{escaped}"'


def _error(raw: object, message: str, corrected: str | None = None) -> CairnError:
    return CairnError("INVALID_SCOPE", message, {"scope": raw, "corrected": corrected})


def validate_scope(raw: str) -> str:
    """Return the canonical scope, or refuse with a message that says how to fix it.

    Only surrounding whitespace and case are repaired silently; every other repair is offered in
    the message (and in ``data["corrected"]``) rather than applied, so a caller never writes to a
    scope it did not name.
    """
    if not isinstance(raw, str):
        raise _error(raw, f"scope must be a string, not {type(raw).__name__}")
    text = raw.strip()
    if not text:
        raise _error(raw, "scope is empty")
    try:
        return _canonical(text)
    except _Refusal as refusal:
        reason, corrected = _suggest(text, refusal)
    message = f"invalid scope {_quote(text)}: {reason}"
    if corrected is not None:
        message += f'. Example: "{corrected}"'
    raise _error(raw, message, corrected)


def _suggest(text: str, refusal: _Refusal) -> tuple[str, str | None]:
    """Turn a refusal into a reason and, when derivable, a corrected scope.

    The commonest mistakes are a single ``:`` separator and spaces around ``::``; both are fixed
    mechanically and the result is re-validated, so a suggestion is always itself valid.
    """
    candidate = _SPACED_SEPARATOR_RE.sub("::", text)
    if candidate == text:
        return refusal.reason, refusal.corrected
    hints = []
    bad = _BAD_SEPARATOR_RE.search(text)
    if bad is not None:
        hints.append(f'use "::" as the separator, not "{bad.group(0)}"')
    if _SPACED_SEPARATOR_RE.sub(r"\1", text) != text:
        hints.append('remove the spaces around "::"')
    hint = "; ".join(hints) or refusal.reason
    try:
        return hint, _canonical(candidate)
    except _Refusal as second:
        return f"{hint}; and then: {second.reason}", second.corrected


def _canonical(text: str) -> str:
    """Parse a stripped scope strictly; raise ``_Refusal`` with the first problem found."""
    if len(text) > MAX_SCOPE_CHARS:
        raise _Refusal(f"scope is {len(text)} characters; the limit is {MAX_SCOPE_CHARS}")
    for ch in text:
        if ord(ch) < 32 or ord(ch) == 127:
            raise _Refusal(f"control character {_quote(ch)} is not allowed")
    if not text.isascii():
        bad = next(ch for ch in text if not ch.isascii())
        raise _Refusal(f"character {_quote(bad)} (U+{ord(bad):04X}) is not allowed: scopes are ASCII")
    if "\\" in text:
        raise _Refusal("backslashes are not allowed: a scope is a name, not a path")
    if ".." in text:
        raise _Refusal('".." is not allowed in a scope')
    if any(ch.isspace() for ch in text):
        raise _Refusal("spaces are not allowed in a scope")
    bad = _BAD_SEPARATOR_RE.search(text)
    if bad is not None:
        raise _Refusal(f'use "::" as the separator, not "{bad.group(0)}"')

    parts = text.split("::")
    kind = parts[0].lower()
    if kind == "global":
        if len(parts) > 1:
            raise _Refusal('"global" takes no name; use "global" alone, or a named scope like "project::x"')
        scope = "global"
    elif kind == "project":
        scope = _project(parts)
    elif kind == "repo":
        scope = _repo(parts)
    elif kind == "branch":
        scope = _branch_scope(parts)
    elif len(parts) == 1 and _OWNER_REPO_RE.fullmatch(kind):
        # "acme/widget" is unambiguous: a bare owner/repo can only mean a repo scope.
        raise _Refusal(f"the scope kind is missing; expected one of: {FORMS}", f"repo::{kind}")
    elif len(parts) == 1:
        raise _Refusal(f"expected one of: {FORMS}")
    else:
        raise _Refusal(f"unknown scope kind {_quote(parts[0])}; expected one of: {FORMS}")

    if len(scope) > MAX_SCOPE_CHARS:
        raise _Refusal(f"scope is {len(scope)} characters; the limit is {MAX_SCOPE_CHARS}")
    return scope


def _needs(kind: str, what: str) -> _Refusal:
    return _Refusal(f'{what}: {kind} scopes are {_SHAPES[kind]}. Example: "{_EXAMPLES[kind]}"')


def _project(parts: list[str]) -> str:
    if len(parts) != 2 or not parts[1]:
        raise _needs("project", "a project scope takes exactly one name")
    return f"project::{_name(parts[1].lower(), 'project name')}"


def _repo(parts: list[str]) -> str:
    if len(parts) == 3:
        # "repo::o/r::b" almost certainly meant the branch scope; offer it if it is valid.
        try:
            corrected: str | None = _branch_scope(["branch", parts[1], parts[2]])
        except _Refusal:
            corrected = None
        raise _Refusal(f"repo scopes have no branch part; for a branch use {_SHAPES['branch']}", corrected)
    if len(parts) != 2:
        raise _needs("repo", "a repo scope takes exactly one owner/repo")
    return f"repo::{_owner_repo(parts[1].lower(), 'repo')}"


def _branch_scope(parts: list[str]) -> str:
    if len(parts) != 3:
        raise _needs("branch", "a branch scope needs an owner/repo and a branch")
    return f"branch::{_owner_repo(parts[1].lower(), 'branch')}::{_branch(parts[2])}"


def _owner_repo(value: str, kind: str) -> str:
    if "/" not in value:
        raise _needs(kind, "the repo part is missing" if value else "owner/repo is missing")
    if value.count("/") > 1:
        raise _needs(kind, f'{_quote(value)} has more than one "/"')
    owner, repo = value.split("/")
    return f"{_name(owner, 'owner')}/{_name(repo, 'repo')}"


def _name(value: str, label: str) -> str:
    if not value:
        raise _Refusal(f"{label} is empty")
    if len(value) > MAX_NAME_CHARS:
        raise _Refusal(f"{label} is {len(value)} characters; the limit is {MAX_NAME_CHARS}")
    if not _NAME_RE.fullmatch(value):
        raise _Refusal(
            f'{label} {_quote(value)} must start with a letter or digit and contain only a-z, 0-9, ".", "_", "-"'
        )
    return value


def _branch(value: str) -> str:
    """Check a branch name against the parts of git's ref rules that can make a name unsafe.

    ``..`` and control characters are already refused for the whole scope.
    """
    if not value:
        raise _Refusal("branch name is empty")
    if len(value) > MAX_BRANCH_CHARS:
        raise _Refusal(f"branch name is {len(value)} characters; the limit is {MAX_BRANCH_CHARS}")
    if "@{" in value:
        raise _Refusal('"@{" is not allowed in a branch name')
    if "//" in value:
        raise _Refusal('"//" is not allowed in a branch name')
    if value[0] in "/-":
        raise _Refusal(f'a branch name cannot start with "{value[0]}"')
    if value.endswith(("/", ".")):
        raise _Refusal(f'a branch name cannot end with "{value[-1]}"')
    if not _BRANCH_RE.fullmatch(value):
        raise _Refusal(f'branch {_quote(value)} may contain only letters, digits, "/", ".", "_", "-"')
    for component in value.split("/"):
        if component.startswith("."):
            raise _Refusal(f'a branch name component cannot start with ".": {_quote(component)}')
        if component.endswith(".lock"):
            raise _Refusal(f'a branch name component cannot end with ".lock": {_quote(component)}')
    return value


def scope_kind(scope: str) -> str:
    """Name the kind of a scope; validates first so a malformed scope is never misclassified."""
    canonical = validate_scope(scope)
    return canonical.split("::", 1)[0]


def ladder(repo: str | None = None, branch: str | None = None, project: str | None = None) -> list[str]:
    """Scopes a read for this working context walks, narrowest first, always ending at ``global``.

    A branch without a repo names nothing, so it adds no rung. Empty strings count as absent,
    because hooks pass unset environment variables through as ``""``.
    """
    rungs: list[str] = []
    repo = repo.strip() if repo else None
    branch = branch.strip() if branch else None
    project = project.strip() if project else None
    if repo and branch:
        rungs.append(validate_scope(f"branch::{repo}::{branch}"))
    if repo:
        rungs.append(validate_scope(f"repo::{repo}"))
    if project:
        rungs.append(validate_scope(f"project::{project}"))
    rungs.append("global")
    return list(dict.fromkeys(rungs))


# The grammar as one regular expression, shown to callers in the HTTP API's and MCP's schemas. It
# is documentation, not the check: validate_scope is the authority, and answering with its error
# (INVALID_SCOPE with the corrected form) beats a schema validator's "does not match pattern". So the
# regex admits what validate_scope silently repairs (keyword case, surrounding spaces) and, being a
# regex without look-ahead, still admits a few shapes it refuses: ``..``, a branch's ``//``, a
# trailing ``/`` or ``.``, a ``.lock`` component.
def _any_case(word: str) -> str:
    return "".join(f"[{c.upper()}{c}]" for c in word)


NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"  # lower-cased by validate_scope, so any case is valid
BRANCH_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9/._-]{0,199}"
SCOPE_REGEX = (
    rf"^\s*({_any_case('global')}|{_any_case('project')}::{NAME_PATTERN}"
    rf"|{_any_case('repo')}::{NAME_PATTERN}/{NAME_PATTERN}"
    rf"|{_any_case('branch')}::{NAME_PATTERN}/{NAME_PATTERN}::{BRANCH_PATTERN})\s*$"
)


def normalize_pattern(pattern: str) -> str:
    """A scope pattern case-normalized like a scope: lower case except a branch's name."""
    parts = pattern.strip().split("::")
    if parts[0].lower() == "branch" and len(parts) == 3:
        return "::".join([parts[0].lower(), parts[1].lower(), parts[2]])
    return "::".join(part.lower() for part in parts)


@lru_cache(maxsize=512)
def _pattern_regex(pattern: str) -> re.Pattern[str] | None:
    """Compile a scope pattern; ``None`` means "every scope".

    The pattern is case-normalized like a scope (the branch part keeps its case) so that
    ``repo::Acme/*`` means what its author meant. ``*`` becomes ``[^:]*``: canonical scopes only
    contain ``:`` as part of ``::``, so a star can never cross a separator.
    """
    text = normalize_pattern(pattern)
    if text == "*":
        return None
    regex = "[^:]*".join(re.escape(chunk) for chunk in text.split("*"))
    return re.compile(regex)


def scope_matches(scope: str, pattern: str) -> bool:
    """Whether a scope falls under a pattern, for scope-limited tokens.

    The scope is validated first: a permission check must never say yes to a scope the write
    path would refuse (``repo::acme/../x`` would otherwise match ``repo::acme/*``). An empty
    pattern matches nothing.
    """
    canonical = validate_scope(scope)
    regex = _pattern_regex(pattern)
    return regex is None or regex.fullmatch(canonical) is not None
