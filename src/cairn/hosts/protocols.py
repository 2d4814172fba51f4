"""Host hook protocols: host stdin JSON -> a neutral :class:`HookEvent`; result text -> the host's stdout.

Three hosts, three dialects of the same idea (sources in ``docs/hosts.md``):

* **Claude Code** sends snake_case JSON (``session_id``, ``cwd``, ``hook_event_name``, ...) and reads
  ``{"hookSpecificOutput": {"hookEventName": E, "additionalContext": TEXT}}`` from stdout on exit 0.
  A failed tool call arrives as ``PostToolUseFailure`` with an ``error`` string; ``PostToolUse`` fires
  only for successes.
* **Codex** copied Claude Code's wire format (same field names, same ``hookSpecificOutput``), but its
  output schemas reject unknown keys, it has no failure event, and its ``PostToolUse`` payload for a
  shell call carries the output text with no exit status. A failure is therefore recognised from the
  text itself (:func:`looks_failed`), conservatively.
* **Cursor** uses camelCase event names (``sessionStart``, ``beforeSubmitPrompt``,
  ``postToolUseFailure``), a ``conversation_id``, ``workspace_roots`` instead of ``cwd``, and reads a
  flat ``{"additional_context": TEXT}``; it expects a JSON object on stdout for every event.

Why one neutral event: the hook's logic (once per session, dedupe, which operation to call) is the same
for every host, so it is written once in :mod:`cairn.hosts.hook`, and only the edges differ here.
Standard library only: this runs on every session start and every failed tool call.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, NamedTuple

# Our neutral event -> each host's native event name (what we install, and what we answer with).
NATIVE: dict[str, dict[str, str]] = {
    "claude-code": {
        "session-start": "SessionStart",
        "prompt-submit": "UserPromptSubmit",
        "tool-failure": "PostToolUseFailure",
    },
    "codex": {
        "session-start": "SessionStart",
        "prompt-submit": "UserPromptSubmit",
        "tool-failure": "PostToolUse",
    },
    "cursor": {
        "session-start": "sessionStart",
        "prompt-submit": "beforeSubmitPrompt",
        "tool-failure": "postToolUseFailure",
    },
}

# Event names that only Cursor uses: a payload carrying one of these is Cursor's, whatever --host said
# (Cursor also reads Claude Code's settings files, so a hook installed for one may be run by the other).
_CURSOR_EVENTS = {
    "sessionStart",
    "sessionEnd",
    "beforeSubmitPrompt",
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "beforeShellExecution",
    "afterShellExecution",
    "beforeMCPExecution",
    "afterMCPExecution",
    "beforeReadFile",
    "afterFileEdit",
    "afterAgentResponse",
    "afterAgentThought",
    "stop",
    "subagentStart",
    "subagentStop",
    "preCompact",
}

# At most this much failure text is sent to recall; the service keeps the last 8000 characters anyway.
FAILURE_TEXT_MAX = 16000


class HookEvent(NamedTuple):
    """What a hook needs to know, whichever host sent it. (A NamedTuple, not a dataclass: this runs in
    every hook process, and ``dataclasses`` imports ``inspect``, tens of milliseconds on a busy machine.)"""

    host: str
    event: str  # neutral: session-start | prompt-submit | tool-failure
    native: str  # the host's event name we answer to (hookEventName for Claude Code / Codex)
    session: str | None  # the host's session (or conversation) id
    cwd: str
    source: str | None = None  # session start: startup | resume | clear | compact
    failure: str | None = None  # tool-failure: the text to recall on; None when the call succeeded


def detect_host(payload: dict[str, Any], hint: str) -> str:
    """The host that really sent ``payload``: Cursor is recognisable by its own event names and fields."""
    name = payload.get("hook_event_name")
    if isinstance(name, str) and name in _CURSOR_EVENTS:
        return "cursor"
    if "cursor_version" in payload or "workspace_roots" in payload:
        return "cursor"
    if hint == "cursor":
        # Installed for Cursor but the payload is Claude-shaped (PascalCase event, cwd): answer in kind.
        return "claude-code" if isinstance(name, str) and name[:1].isupper() else "cursor"
    return hint


def parse(host: str, event: str, payload: dict[str, Any]) -> HookEvent:
    """Read one host payload into a :class:`HookEvent`. Never raises on odd shapes: fields default."""
    name = payload.get("hook_event_name")
    native = name if isinstance(name, str) and name else NATIVE[host][event]
    if host == "cursor":
        session = _str(payload.get("conversation_id")) or _str(payload.get("session_id"))
        roots = payload.get("workspace_roots")
        root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None
        cwd = root or _str(payload.get("cwd")) or os.environ.get("CURSOR_PROJECT_DIR") or os.getcwd()
    else:
        session = _str(payload.get("session_id"))
        cwd = _str(payload.get("cwd")) or os.getcwd()
    source = _str(payload.get("source")) if event == "session-start" else None
    failure = _failure_text(host, native, payload) if event == "tool-failure" else None
    return HookEvent(host=host, event=event, native=native, session=session, cwd=cwd, source=source, failure=failure)


def render(ev: HookEvent, text: str) -> str:
    """The stdout the host expects for ``text`` (which may be empty: then nothing the model would see)."""
    if ev.host == "cursor":
        out: dict[str, Any] = {}
        if ev.event == "prompt-submit":
            out["continue"] = True  # beforeSubmitPrompt must never block the user's prompt
        if text:
            out["additional_context"] = text
        return json.dumps(out, ensure_ascii=False) + "\n"
    if not text:
        return ""  # Claude Code and Codex: empty stdout on exit 0 is a silent success
    native = ev.native
    if ev.host == "codex" and native not in ("SessionStart", "UserPromptSubmit", "PostToolUse"):
        native = NATIVE["codex"][ev.event]  # Codex validates hookEventName against its own enum
    out = {"hookSpecificOutput": {"hookEventName": native, "additionalContext": text}}
    return json.dumps(out, ensure_ascii=False) + "\n"


def empty(host: str, event: str) -> str:
    """What to print when the hook has nothing to say or failed: never something a host would misread."""
    ev = HookEvent(host=host, event=event, native=NATIVE[host][event], session=None, cwd="")
    return render(ev, "")


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _failure_text(host: str, native: str, payload: dict[str, Any]) -> str | None:
    """The failure text of a tool event, or None when the tool call succeeded (or the user interrupted it)."""
    if payload.get("is_interrupt") is True:
        return None  # the user pressed Esc: not a failure a lesson could explain
    if native in ("PostToolUseFailure", "postToolUseFailure"):
        for field in ("error", "error_message", "tool_output", "tool_response"):
            text = _as_text(payload.get(field))
            if text:
                return text[-FAILURE_TEXT_MAX:]
        return None
    if native in ("PostToolUse", "postToolUse", "afterShellExecution"):
        response = payload.get("tool_response", payload.get("tool_output", payload.get("output")))
        text = _response_failure(response, trust_text=host == "codex" or native == "afterShellExecution")
        return text[-FAILURE_TEXT_MAX:] if text else None
    return None


def _response_failure(response: Any, *, trust_text: bool) -> str | None:
    """A tool response that says it failed -> its text. Structured signals first, then the text itself.

    Claude Code's ``PostToolUse`` only fires for successes, so for it only an explicit error field counts.
    Codex sends a shell call's output as a bare string with no exit status (openai/codex#34289), so there
    the text is read for unmistakable failure markers (``trust_text``).
    """
    if isinstance(response, dict):
        for field in ("exit_code", "exitCode", "returncode", "return_code"):
            code = response.get(field)
            if isinstance(code, int) and not isinstance(code, bool):
                return (_as_text(response) or None) if code != 0 else None  # an exit status decides
        if response.get("is_error") is True or response.get("success") is False:
            return _as_text(response) or None
        error = response.get("error")
        if isinstance(error, str) and error.strip():
            return error
        if trust_text:
            text = _as_text(response)
            return text if text and looks_failed(text) else None
        return None
    if trust_text and isinstance(response, str) and looks_failed(response):
        return response
    return None


# Unmistakable failure markers in shell output. Deliberately narrow: a miss costs one unanswered failure,
# a false hit costs a recall round trip on a success (which then prints nothing below the floor).
_EXIT = re.compile(r"(?im)^\s*(?:exit code|exit status|process exited with code)[:\s]+(-?\d+)")
_MARKERS = re.compile(
    r"Traceback \(most recent call last\)"
    r"|(?m:^\s*(?:error|fatal|ERROR|FATAL|Error)(?:\[[A-Z0-9]+\])?:\s)"
    r"|(?m:^npm ERR! )"
    r"|command not found"
    r"|(?m:^FAILED\b)"
    r"|(?m:^=+ .*\b\d+ failed\b.* =+$)"
    r"|(?m:^make: \*\*\* )"
    r"|(?m:^Segmentation fault)"
)


def looks_failed(text: str) -> bool:
    """Does this shell output say it failed? An explicit exit status decides; otherwise known markers do."""
    codes = [int(m.group(1)) for m in _EXIT.finditer(text)]
    if codes:
        return codes[-1] != 0
    return bool(_MARKERS.search(text))


def _as_text(value: Any) -> str:
    """Flatten a tool response (string, content blocks, stdout/stderr dicts) into plain text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (_as_text(v) for v in value) if t)
    if isinstance(value, dict):
        parts = [
            _as_text(value[k])
            for k in ("error", "stderr", "stdout", "output", "content", "text", "result")
            if k in value
        ]
        text = "\n".join(p for p in parts if p)
        return text or json.dumps(value, ensure_ascii=False, default=str)
    return str(value)
