"""The pure edges of the host protocols: which payloads count as failures, and the exact output shapes.

These are plain functions of their input, so they are tested directly; everything that touches a
store or a file is tested through the real entry point in ``test_hook.py`` / ``test_install.py``.
"""

from __future__ import annotations

import json

import pytest

from cairn.hosts import protocols as P


@pytest.mark.parametrize(
    "text",
    [
        "Exit code: 1\nWall time: 0.2 seconds\nOutput:\nboom",
        "Process exited with code 2",
        'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad',
        "error: could not compile `cairn` due to 2 previous errors",
        "error[E0425]: cannot find value `x` in this scope",
        "fatal: not a git repository (or any of the parent directories): .git",
        "npm ERR! code ELIFECYCLE",
        "bash: frob: command not found",
        "=========== 2 failed, 10 passed in 1.20s ===========",
        "make: *** [Makefile:3: all] Error 1",
    ],
)
def test_shell_output_that_failed(text: str) -> None:
    assert P.looks_failed(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "all good\n3 files changed",
        "=========== 12 passed in 1.20s ===========",
        "Exit code: 0\nOutput:\nerror: this line is just text the command printed",
        "grep found: error handling in module.py",
        "0 errors, 0 warnings",
    ],
)
def test_shell_output_that_succeeded(text: str) -> None:
    assert not P.looks_failed(text)


def codex_post(response: object) -> dict[str, object]:
    return {
        "session_id": "s",
        "cwd": "/w",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_response": response,
    }


def test_codex_failure_detection_prefers_structure() -> None:
    assert P.parse("codex", "tool-failure", codex_post({"exit_code": 1, "stderr": "boom"})).failure == "boom"
    assert P.parse("codex", "tool-failure", codex_post({"exit_code": 0, "stdout": "error: x"})).failure is None
    assert P.parse("codex", "tool-failure", codex_post({"output": "Traceback (most recent call last):"})).failure
    assert P.parse("codex", "tool-failure", codex_post("fine")).failure is None
    assert P.parse("codex", "tool-failure", codex_post(None)).failure is None


def test_claude_post_tool_use_success_is_never_a_failure() -> None:
    """PostToolUse fires only for successes in Claude Code: output text alone never counts."""
    payload = codex_post({"stdout": "Traceback (most recent call last):", "stderr": "", "interrupted": False})
    assert P.parse("claude-code", "tool-failure", payload).failure is None
    payload["tool_response"] = {"is_error": True, "content": "denied"}
    assert P.parse("claude-code", "tool-failure", payload).failure == "denied"


def test_failure_text_is_bounded_to_its_end() -> None:
    payload = {"hook_event_name": "PostToolUseFailure", "session_id": "s", "error": "x" * 50_000 + "TAIL"}
    failure = P.parse("claude-code", "tool-failure", payload).failure
    assert failure is not None and len(failure) == P.FAILURE_TEXT_MAX and failure.endswith("TAIL")


def test_output_shapes() -> None:
    ev = P.parse("claude-code", "session-start", {"session_id": "s", "cwd": "/w", "hook_event_name": "SessionStart"})
    assert json.loads(P.render(ev, "hi")) == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "hi"}
    }
    assert P.render(ev, "") == ""
    # Codex validates hookEventName against its enum: a foreign name falls back to ours.
    odd = P.parse("codex", "tool-failure", {"session_id": "s", "hook_event_name": "PostToolUseFailure", "error": "e"})
    assert json.loads(P.render(odd, "t"))["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    cur = P.parse("cursor", "prompt-submit", {"conversation_id": "c", "hook_event_name": "beforeSubmitPrompt"})
    assert json.loads(P.render(cur, "")) == {"continue": True}
    assert json.loads(P.render(cur, "t")) == {"continue": True, "additional_context": "t"}
    assert json.loads(P.empty("cursor", "tool-failure")) == {}
    assert P.empty("codex", "session-start") == ""


def test_cursor_payload_fields() -> None:
    ev = P.parse(
        "cursor",
        "tool-failure",
        {
            "conversation_id": "conv",
            "hook_event_name": "postToolUseFailure",
            "workspace_roots": ["/repo", "/other"],
            "error_message": "boom",
        },
    )
    assert (ev.session, ev.cwd, ev.failure) == ("conv", "/repo", "boom")
    assert P.detect_host({"hook_event_name": "sessionStart"}, "claude-code") == "cursor"
    assert P.detect_host({"hook_event_name": "SessionStart"}, "cursor") == "claude-code"
    assert P.detect_host({"hook_event_name": "SessionStart"}, "codex") == "codex"
