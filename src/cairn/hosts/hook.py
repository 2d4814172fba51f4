"""``cairn hook session-start|prompt-submit|tool-failure [--host claude-code|cursor|codex]``.

A host runs this with its hook JSON on stdin and reads stdout back into the agent's context. Three
promises shape the code:

* **Never break the host.** Whatever goes wrong (no store, a refused operation, a timeout, garbage on
  stdin) the hook prints only what the host reads as "nothing to add", writes one line to stderr and
  exits 0. A failing session-start hook must not block a session; a failing tool-failure hook must not
  turn one failure into two. (A wrong command line is the installer's bug, not the session's: it is
  refused like any command's, ``INVALID_INPUT`` and exit 1, which every host treats as a non-blocking
  hook error.)
* **Say each thing once.** The context block goes into a session once (re-sent after the host compacts
  the conversation, which drops it); a recalled lesson is shown at most once per session. State lives in
  ``<home>/state/hooks/``, one small JSON file per host session, pruned after two weeks.
* **Stay cheap.** Only the standard library loads at import time. The work goes through
  :func:`cairn.runtime.client.call`, which asks the ``cairn serve`` daemon and falls back to in-process work.
  A prompt-submit hook that has nothing to do decides so from one small file, without importing Cairn's
  store or model at all.

Nothing from a lesson or the host payload is ever written to stderr or to the state files, except
lesson addresses (scope and key) used to dedupe recalls.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cairn.hosts import EVENTS, HOSTS
from cairn.hosts import protocols as P

STATE_TTL_SECONDS = 14 * 24 * 3600
# Wall-clock budgets (seconds): the host has its own timeout (we install 30 s); ours is shorter so we
# can still answer "nothing" cleanly. ``CAIRN_HOOK_TIMEOUT`` overrides both.
BUDGET = {"session-start": 20.0, "prompt-submit": 20.0, "tool-failure": 10.0}

USAGE = (
    "usage: cairn hook session-start|prompt-submit|tool-failure [--host claude-code|cursor|codex]\n"
    "Reads the host's hook JSON on stdin and prints what the host expects (see docs/hosts.md)."
)


class _Usage(Exception):
    pass


def main(argv: list[str], g: Any) -> int:
    """Entry from ``cairn hook``: 0 whatever happened to the work; a wrong command line raises ``INVALID_INPUT``."""
    try:
        event, hint = _parse_argv(argv)
    except _Usage as exc:
        if str(exc) == "help":
            sys.stdout.write(USAGE + "\n")
            return 0
        from cairn.errors import CairnError

        # The CLI maps this once, like any command's: exit 1, one line on stderr (one envelope with --json).
        raise CairnError("INVALID_INPUT", f"{exc} ({USAGE.splitlines()[0]})") from None

    raw = "" if sys.stdin is None or sys.stdin.isatty() else _read_stdin()
    try:
        payload = json.loads(raw) if raw.strip() else None
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        _note(event, "stdin is not a hook JSON object; nothing added")
        _emit(P.empty(hint, event))
        return 0

    host = P.detect_host(payload, hint)
    try:
        ev = P.parse(host, event, payload)
    except Exception as exc:  # noqa: BLE001 - a payload we cannot read must not break the host
        _note(event, f"unreadable {host} payload ({type(exc).__name__}); nothing added")
        _emit(P.empty(host, event))
        return 0

    budget = _budget(event)
    result: dict[str, Any] = {}
    worker = threading.Thread(target=_run, args=(ev, g, result), daemon=True)
    worker.start()
    worker.join(budget)
    if worker.is_alive():
        _note(event, f"timed out after {budget:g}s; nothing added")
        _emit(P.empty(host, event))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # the worker may be inside a model load; do not wait for it
    if "error" in result:
        _note(event, result["error"])
    _emit(P.render(ev, result.get("text", "")))
    return 0


def _parse_argv(argv: list[str]) -> tuple[str, str]:
    event: str | None = None
    host = "claude-code"
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            raise _Usage("help")
        if arg == "--host":
            if i + 1 >= len(argv):
                raise _Usage("--host needs a value")
            host = argv[i + 1]
            i += 1
        elif arg.startswith("--host="):
            host = arg.split("=", 1)[1]
        elif arg.startswith("-"):
            raise _Usage(f"unknown option {arg}")
        elif event is None:
            event = arg
        else:
            raise _Usage(f"unexpected argument {arg!r}")
        i += 1
    if event is None:
        raise _Usage("which event? one of " + ", ".join(EVENTS))
    if event not in EVENTS:
        raise _Usage(f"unknown event {event!r}; one of " + ", ".join(EVENTS))
    if host not in HOSTS:
        raise _Usage(f"unknown host {host!r}; one of " + ", ".join(HOSTS))
    return event, host


def _run(ev: P.HookEvent, g: Any, result: dict[str, Any]) -> None:
    """The hook's work, on a worker thread so a hung call can be abandoned at the budget."""
    try:
        result["text"] = _handle(ev, g)
    except Exception as exc:  # noqa: BLE001 - every failure becomes "nothing added" plus one stderr line
        code = getattr(exc, "code", None)
        message = getattr(exc, "message", None)
        if code and isinstance(message, str):
            result["error"] = f"{code}: {_one_line(message)}; nothing added"
        else:
            result["error"] = f"{type(exc).__name__}; nothing added (CAIRN_DEBUG=1 for details)"
            if os.environ.get("CAIRN_DEBUG"):
                import traceback

                traceback.print_exc()


def _handle(ev: P.HookEvent, g: Any) -> str:
    home = _home(g)
    session = ev.session or getattr(g, "session", None)
    db = getattr(g, "db", None)  # --db URL; the client falls back to CAIRN_DATABASE_URL, then the home's file
    state = SessionState(home, ev.host, session) if session else None
    if ev.event == "tool-failure":
        return _tool_failure(ev, home, session, state, db)
    if ev.event == "session-start":
        return _session_start(ev, home, session, state, db)
    return _prompt_submit(ev, home, session, state, db)


def _session_start(
    ev: P.HookEvent, home: Path, session: str | None, state: SessionState | None, db: str | None = None
) -> str:
    """The context block, once per host session; again after a compaction, which drops it from context.

    The hook claims the delivery under the state file's lock *before* the work: two installs (user and
    project settings) or two hosts reading the same settings fire two session-start hooks at the same
    moment, and only the one that claims first builds and prints the block. A claim that fails (an
    error, not a timeout) is released, so the prompt-submit fallback or a later start can deliver.
    """
    compact = ev.source == "compact"
    if state is not None:
        state.prune()
        if not _claim_start(state, compact):
            return ""
    try:
        text = _context(ev, home, session, db)
    except BaseException:
        if state is not None:
            with state.update() as data:
                data.pop(_COMPACT_CLAIM if compact else _START_CLAIM, None)
        raise
    if state is not None:
        with state.update() as data:
            data["context"] = True
    return text


_START_CLAIM = "start_claimed"
_COMPACT_CLAIM = "compact_claimed"
# Two hooks for one compaction arrive within moments of each other; two compactions of one session
# are minutes apart. A re-injection claimed within this window is the same compaction's.
COMPACT_WINDOW_SECONDS = 60.0


def _starting(data: dict[str, Any]) -> bool:
    """A session-start hook claimed the block and may still be building it (within its own budget)."""
    claimed = data.get(_START_CLAIM)
    return isinstance(claimed, (int, float)) and 0 <= time.time() - claimed < _budget("session-start")


def _claim_start(state: SessionState, compact: bool, now: float | None = None) -> bool:
    """True for the one hook that delivers this session's block (or this compaction's)."""
    now = time.time() if now is None else now
    with state.update() as data:
        if compact:
            last = data.get(_COMPACT_CLAIM)
            if isinstance(last, (int, float)) and 0 <= now - last < COMPACT_WINDOW_SECONDS:
                return False
            data[_COMPACT_CLAIM] = now
            return True
        if data.get("context") or data.get(_START_CLAIM):
            return False
        data[_START_CLAIM] = now
        return True


def _prompt_submit(
    ev: P.HookEvent, home: Path, session: str | None, state: SessionState | None, db: str | None = None
) -> str:
    """The context block on a session's first prompt, only when no session-start hook delivered it.

    This is the fallback for a session-start that did not run or failed; without a session id there is
    no "first prompt" to recognise, so it stays silent rather than repeating the block on every prompt.
    """
    if state is None:
        return ""
    with state.update() as data:
        if data.get("context") or data.get("prompted") or _starting(data):
            return ""
        data["prompted"] = True  # claimed before the call: at most one attempt per session
    text = _context(ev, home, session, db)
    with state.update() as data:
        data["context"] = True
    return text


def _tool_failure(
    ev: P.HookEvent, home: Path, session: str | None, state: SessionState | None, db: str | None = None
) -> str:
    """At most three lessons for this failure, none that this session has already been shown."""
    if not ev.failure:
        return ""  # the tool call succeeded (or was interrupted): nothing to recall
    data = _call("recall", {"cwd": ev.cwd, "text": ev.failure}, home, session, db)
    lessons = [h for h in data.get("lessons") or [] if isinstance(h, dict)]
    text = data.get("text") or ""
    if not lessons or not text:
        return ""
    if state is None:
        return text
    keys = [_lesson_key(h) for h in lessons]
    with state.update() as st:
        seen = set(st.get("recalled") or [])
        fresh = [h for h, k in zip(lessons, keys, strict=True) if k not in seen]
        if fresh:
            st["recalled"] = sorted(seen | {_lesson_key(h) for h in fresh})
    if not fresh:
        return ""
    if len(fresh) == len(lessons):
        return text
    return _render_recall(fresh)


def _context(ev: P.HookEvent, home: Path, session: str | None, db: str | None = None) -> str:
    params = {"cwd": ev.cwd, "repo": None, "branch": None, "project": None, "task": None, "max_chars": None}
    data = _call("context", params, home, session, db)
    return data.get("text") or ""


def _call(op: str, params: dict[str, Any], home: Path, session: str | None, db: str | None = None) -> dict[str, Any]:
    from cairn.runtime.client import call

    data = call(op, params, home=home, session=session, db=db)
    return data if isinstance(data, dict) else {}


def _render_recall(lessons: list[dict[str, Any]]) -> str:
    """Re-render a recall block for the lessons not yet shown, with the same renderer the service uses."""
    from cairn.core.context import recall_block

    return recall_block(lessons)


def _lesson_key(hit: dict[str, Any]) -> str:
    """A lesson's address, the one thing about it the state file keeps."""
    scope, key = hit.get("scope"), hit.get("key")
    if isinstance(scope, str) and isinstance(key, str):
        return f"{scope} {key}"
    lesson = hit.get("lesson") if isinstance(hit.get("lesson"), dict) else {}
    ident = lesson.get("id") or hit.get("id")
    if ident is not None:
        return f"id:{ident}"
    return "h:" + hashlib.sha256(json.dumps(hit, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _home(g: Any) -> Path:
    from cairn.runtime.home import home_dir

    return Path(home_dir(getattr(g, "home", None)))


def _budget(event: str) -> float:
    raw = os.environ.get("CAIRN_HOOK_TIMEOUT")
    if raw:
        try:
            value = float(raw)
            if value > 0:
                return value
        except ValueError:
            pass
    return BUDGET[event]


def _read_stdin() -> str:
    try:
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    except (OSError, ValueError):
        return ""
    return data.decode("utf-8", errors="replace")


def _emit(text: str) -> None:
    if text:
        sys.stdout.write(text)
    sys.stdout.flush()


def _note(event: str, message: str) -> None:
    sys.stderr.write(f"cairn hook {event}: {message}\n")
    sys.stderr.flush()


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class SessionState:
    """One host session's hook state: did the context block go in, which lessons were recalled.

    The file name is a hash of the host and session id, so a hostile id cannot name a path. Updates are
    read-modify-write under an exclusive ``flock`` (where the platform has one) and land by atomic
    rename, because a host may run hooks for parallel tool calls at the same time.
    """

    def __init__(self, home: Path, host: str, session: str) -> None:
        self.root = home / "state" / "hooks"
        digest = hashlib.sha256(f"{host}\0{session}".encode()).hexdigest()[:32]
        self.path = self.root / f"{host}-{digest}.json"

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @contextlib.contextmanager
    def update(self) -> Iterator[dict[str, Any]]:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._lock():
            data = self.read()
            before = json.dumps(data, sort_keys=True)
            yield data
            if json.dumps(data, sort_keys=True) != before or not self.path.exists():
                data["updated"] = int(time.time())
                tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
                tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
                os.replace(tmp, self.path)

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        try:
            import fcntl
        except ImportError:  # Windows: no flock; the worst case is a lesson shown twice
            yield
            return
        fd = os.open(self.root / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def prune(self, now: float | None = None) -> int:
        """Forget sessions untouched for two weeks; returns how many files went."""
        cutoff = (time.time() if now is None else now) - STATE_TTL_SECONDS
        removed = 0
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return 0
        for entry in entries:
            if not entry.name.endswith(".json"):
                continue
            with contextlib.suppress(OSError):
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
        return removed
