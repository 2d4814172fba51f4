"""``cairn hook``: each host's payload in, each host's expected stdout out, through the real entry point.

What the hooks promise and these tests hold them to: the host's output shape per event; the context
block once per session (again after a compaction); recall never repeating a lesson within a session;
silence (exit 0, nothing the host would read) for an empty store, a broken store, garbage stdin and
successful tool calls; one stderr line, never lesson text, when something went wrong.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tests.hosts.conftest import FROB_FAILURE, LESSONS, ZORP_FAILURE, Runner


def sid() -> str:
    return str(uuid.uuid4())


def claude(event: str, session: str | None, cwd: Path, **fields: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "transcript_path": str(cwd / "t.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }
    if session is not None:
        payload["session_id"] = session
    return payload


def context_of(proc: subprocess.CompletedProcess[str], event: str) -> str:
    """The additionalContext of a Claude Code / Codex answer (asserting the shape on the way)."""
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"hookSpecificOutput"}, out
    assert out["hookSpecificOutput"]["hookEventName"] == event
    assert set(out["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    return out["hookSpecificOutput"]["additionalContext"]


def silent(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "", proc.stdout


# ------------------------------------------------------------------------------------------ Claude Code


def test_claude_session_start_injects_context_once(seeded: Runner) -> None:
    s = sid()
    first = seeded.hook("session-start", claude("SessionStart", s, seeded.user_home, source="startup"))
    text = context_of(first, "SessionStart")
    assert "frobnicate-lock" in text and "zorp-cache" in text
    silent(seeded.hook("session-start", claude("SessionStart", s, seeded.user_home, source="resume")))
    # A compaction summarises the block away: it goes in again.
    again = seeded.hook("session-start", claude("SessionStart", s, seeded.user_home, source="compact"))
    assert context_of(again, "SessionStart") == text
    # The first prompt of a session that already has the block adds nothing.
    silent(seeded.hook("prompt-submit", claude("UserPromptSubmit", s, seeded.user_home, prompt="hi")))


def _concurrently(runner: Runner, payload: dict[str, Any], copies: int = 2) -> list[str]:
    """Start ``copies`` real hook processes for one payload before waiting for any; their stdouts."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "cairn.cli.main", "hook", "session-start", "--host", "claude-code"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=runner.env(),
            cwd=str(runner.user_home),
        )  # fmt: skip
        for _ in range(copies)
    ]
    outs = []
    for proc in procs:
        proc.stdin.write(json.dumps(payload))  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
    for proc in procs:  # the answers are a few kilobytes: reading one pipe cannot stall the other process
        out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
        assert proc.wait(timeout=120) == 0 and "Traceback" not in err, err
        outs.append(out)
    return outs


def test_two_session_start_hooks_at_once_inject_the_block_once(seeded: Runner) -> None:
    """Installed twice (user and project settings, or two hosts reading one file): both hooks fire for
    the same session at the same moment, and exactly one of them prints the block."""
    s = sid()
    outs = _concurrently(seeded, claude("SessionStart", s, seeded.user_home, source="startup"))
    delivered = [o for o in outs if o]
    assert len(delivered) == 1, outs
    assert "frobnicate-lock" in context_of(subprocess.CompletedProcess([], 0, delivered[0], ""), "SessionStart")
    # A compaction re-injects it, once again, however many hooks fire for it.
    outs = _concurrently(seeded, claude("SessionStart", s, seeded.user_home, source="compact"))
    assert len([o for o in outs if o]) == 1, outs
    # And nothing more for a resume or the first prompt.
    silent(seeded.hook("session-start", claude("SessionStart", s, seeded.user_home, source="resume")))
    silent(seeded.hook("prompt-submit", claude("UserPromptSubmit", s, seeded.user_home, prompt="hi")))


def test_claude_prompt_submit_is_the_fallback_once(seeded: Runner) -> None:
    s = sid()
    first = seeded.hook("prompt-submit", claude("UserPromptSubmit", s, seeded.user_home, prompt="fix it"))
    assert "frobnicate-lock" in context_of(first, "UserPromptSubmit")
    silent(seeded.hook("prompt-submit", claude("UserPromptSubmit", s, seeded.user_home, prompt="and again")))
    # A session-start arriving late for the same session does not repeat it either.
    silent(seeded.hook("session-start", claude("SessionStart", s, seeded.user_home, source="startup")))


def test_prompt_submit_without_a_session_id_stays_silent(seeded: Runner) -> None:
    silent(seeded.hook("prompt-submit", claude("UserPromptSubmit", None, seeded.user_home, prompt="x")))


def test_claude_tool_failure_recalls_and_never_repeats_a_lesson(seeded: Runner) -> None:
    s = sid()
    payload = claude(
        "PostToolUseFailure",
        s,
        seeded.user_home,
        tool_name="Bash",
        tool_input={"command": "frob --lock"},
        tool_use_id="toolu_1",
        error=FROB_FAILURE,
        is_interrupt=False,
    )
    text = context_of(seeded.hook("tool-failure", payload), "PostToolUseFailure")
    assert "frobnicate-lock" in text and LESSONS["frobnicate-lock"] in text
    assert "zorp-cache" not in text
    silent(seeded.hook("tool-failure", payload))  # the same failure again: already shown this session
    zorp = {**payload, "error": ZORP_FAILURE, "tool_use_id": "toolu_2"}
    text2 = context_of(seeded.hook("tool-failure", zorp), "PostToolUseFailure")
    assert "zorp-cache" in text2 and "frobnicate-lock" not in text2
    # Another session has not seen it: it is shown there.
    other = {**payload, "session_id": sid()}
    assert "frobnicate-lock" in context_of(seeded.hook("tool-failure", other), "PostToolUseFailure")


def test_recall_shows_only_the_lessons_not_yet_shown(seeded: Runner) -> None:
    s = sid()
    frob = claude("PostToolUseFailure", s, seeded.user_home, tool_name="Bash", error=FROB_FAILURE)
    assert "frobnicate-lock" in context_of(seeded.hook("tool-failure", frob), "PostToolUseFailure")
    both = {**frob, "error": FROB_FAILURE + "\n" + ZORP_FAILURE}
    assert {"frobnicate-lock", "zorp-cache"} <= set(
        h["key"] for h in seeded.envelope("recall", "--text", both["error"])["data"]["lessons"]
    )  # the store would recall both for this text...
    text = context_of(seeded.hook("tool-failure", both), "PostToolUseFailure")
    assert "zorp-cache" in text and "frobnicate-lock" not in text  # ...the session is shown only the new one
    assert "1 lesson" in text


def test_claude_success_and_interrupts_recall_nothing(seeded: Runner) -> None:
    s = sid()
    success = claude(
        "PostToolUse",
        s,
        seeded.user_home,
        tool_name="Bash",
        tool_input={"command": "ls"},
        tool_response={"stdout": FROB_FAILURE, "stderr": "", "interrupted": False, "isImage": False},
        tool_use_id="toolu_3",
    )
    silent(seeded.hook("tool-failure", success))
    interrupted = claude(
        "PostToolUseFailure", s, seeded.user_home, tool_name="Bash", error=FROB_FAILURE, is_interrupt=True
    )
    silent(seeded.hook("tool-failure", interrupted))
    # An unrelated failure: nothing clears the floor, nothing is printed.
    unrelated = claude("PostToolUseFailure", s, seeded.user_home, tool_name="Bash", error="ssh: connect refused")
    silent(seeded.hook("tool-failure", unrelated))


# ---------------------------------------------------------------------------------------------- Codex


def test_codex_events(seeded: Runner) -> None:
    s = sid()
    base = {
        "session_id": s,
        "cwd": str(seeded.user_home),
        "transcript_path": None,
        "model": "gpt-5",
        "permission_mode": "default",
    }
    start = {**base, "hook_event_name": "SessionStart", "source": "startup"}
    assert "zorp-cache" in context_of(seeded.hook("session-start", start, host="codex"), "SessionStart")
    prompt = {**base, "hook_event_name": "UserPromptSubmit", "turn_id": "t1", "prompt": "go"}
    silent(seeded.hook("prompt-submit", prompt, host="codex"))
    post = {
        **base,
        "hook_event_name": "PostToolUse",
        "turn_id": "t1",
        "tool_name": "Bash",
        "tool_use_id": "call_1",
        "tool_input": {"command": "frob"},
    }
    # Codex reports no exit status: a failure is read from the output text.
    failed = {**post, "tool_response": FROB_FAILURE.replace("Exit code 1\n", "") + "\nProcess exited with code 1"}
    assert "frobnicate-lock" in context_of(seeded.hook("tool-failure", failed, host="codex"), "PostToolUse")
    ok = {**post, "tool_response": "frobnicate widget lock timeout means all good\n", "tool_use_id": "call_2"}
    silent(seeded.hook("tool-failure", ok, host="codex"))


# --------------------------------------------------------------------------------------------- Cursor


def cursor(event: str, conversation: str, root: Path, **fields: Any) -> dict[str, Any]:
    return {
        "conversation_id": conversation,
        "generation_id": "gen-1",
        "model": "auto",
        "hook_event_name": event,
        "cursor_version": "2.4.0",
        "workspace_roots": [str(root)],
        "user_email": None,
        **fields,
    }


def cursor_out(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert isinstance(out, dict)
    return out


def test_cursor_events(seeded: Runner) -> None:
    c = sid()
    start = cursor("sessionStart", c, seeded.user_home, session_id=c, is_background_agent=False, composer_mode="agent")
    out = cursor_out(seeded.hook("session-start", start, host="cursor"))
    assert set(out) == {"additional_context"} and "frobnicate-lock" in out["additional_context"]
    # beforeSubmitPrompt never blocks the prompt; the block is already in.
    prompt = cursor("beforeSubmitPrompt", c, seeded.user_home, prompt="fix", attachments=[])
    assert cursor_out(seeded.hook("prompt-submit", prompt, host="cursor")) == {"continue": True}
    failure = cursor(
        "postToolUseFailure", c, seeded.user_home, tool_name="Shell", tool_input={"command": "zorp"}, error=ZORP_FAILURE
    )
    out = cursor_out(seeded.hook("tool-failure", failure, host="cursor"))
    assert "zorp-cache" in out["additional_context"]
    assert cursor_out(seeded.hook("tool-failure", failure, host="cursor")) == {}  # deduped


def test_cursor_prompt_fallback_and_host_detection(seeded: Runner) -> None:
    c = sid()
    prompt = cursor("beforeSubmitPrompt", c, seeded.user_home, prompt="fix", attachments=[])
    # Installed as --host claude-code, run by Cursor: the payload says Cursor, the answer is Cursor's.
    out = cursor_out(seeded.hook("prompt-submit", prompt, host="claude-code"))
    assert out["continue"] is True and "zorp-cache" in out["additional_context"]
    assert cursor_out(seeded.hook("prompt-submit", prompt, host="cursor")) == {"continue": True}


# ------------------------------------------------------------------------------------ failing quietly


def test_empty_store_prints_nothing(runner: Runner) -> None:
    for event, name in (("session-start", "SessionStart"), ("prompt-submit", "UserPromptSubmit")):
        proc = runner.hook(event, claude(name, sid(), runner.user_home, source="startup", prompt="x"))
        silent(proc)
    failure = claude("PostToolUseFailure", sid(), runner.user_home, tool_name="Bash", error=FROB_FAILURE)
    silent(runner.hook("tool-failure", failure))
    out = cursor_out(runner.hook("session-start", cursor("sessionStart", sid(), runner.user_home), host="cursor"))
    assert out == {}


def test_malformed_stdin_exits_zero_with_one_stderr_line(runner: Runner) -> None:
    for stdin in ("{not json", "", "[1, 2]", "null"):
        proc = runner.hook("session-start", stdin)
        silent(proc)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith("cairn hook session-start:")
    proc = runner.hook("prompt-submit", "garbage", host="cursor")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"continue": True}


def test_broken_store_is_silent_and_names_no_lesson(seeded: Runner, tmp_path: Path) -> None:
    """A home that cannot hold a store (a plain file): the hook says so on stderr, in one line, and exits 0."""
    bad_home = tmp_path / "not-a-dir"
    bad_home.write_text("x")
    payload = claude("PostToolUseFailure", sid(), seeded.user_home, tool_name="Bash", error=FROB_FAILURE)
    proc = seeded("--home", str(bad_home), "hook", "tool-failure", stdin=json.dumps(payload))
    silent(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cairn hook tool-failure:"), proc.stderr
    assert "frobnicate" not in proc.stderr and "quux" not in proc.stderr


def test_timeout_answers_nothing(seeded: Runner) -> None:
    # A process of its own: past its budget the hook ends the process without waiting for its worker.
    proc = seeded.hook(
        "session-start",
        claude("SessionStart", sid(), seeded.user_home, source="startup"),
        env={"CAIRN_HOOK_TIMEOUT": "0.001"},
        process=True,
    )
    silent(proc)
    assert "timed out" in proc.stderr


def test_wrong_command_line_is_an_error(runner: Runner) -> None:
    for args in (("hook",), ("hook", "session-end"), ("hook", "session-start", "--host", "vim")):
        proc = runner(*args, stdin="{}")
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert proc.stdout == "" and "INVALID_INPUT" in proc.stderr and "usage: cairn hook" in proc.stderr
    env = runner.envelope("hook", "session-end", stdin="{}")
    assert env["status"] == "refused" and env["verb"] == "hook" and env["reason"]["code"] == "INVALID_INPUT"
    help_ = runner("hook", "--help")
    assert help_.returncode == 0 and help_.stdout.startswith("usage: cairn hook")


def test_state_files_are_pruned_and_hold_no_lesson_text(seeded: Runner) -> None:
    state = seeded.home / "state" / "hooks"
    s = sid()
    payload = claude("PostToolUseFailure", s, seeded.user_home, tool_name="Bash", error=FROB_FAILURE)
    seeded.hook("tool-failure", payload)
    files = list(state.glob("*.json"))
    assert files
    for f in files:
        body = f.read_text()
        assert s not in body and "quux" not in body and "frobnicate widget" not in body
    old = state / "claude-code-00000000000000000000000000000000.json"
    old.write_text("{}")
    month_ago = time.time() - 30 * 24 * 3600
    os.utime(old, (month_ago, month_ago))
    seeded.hook("session-start", claude("SessionStart", sid(), seeded.user_home, source="startup"))
    assert not old.exists()


def test_hook_modules_import_only_the_standard_library() -> None:
    code = (
        "import sys; import cairn.cli.main, cairn.hosts.hook, cairn.hosts.install, cairn.hosts.protocols; "
        "heavy = {'typer', 'rich', 'sqlalchemy', 'pydantic', 'numpy', 'alembic', 'onnxruntime', 'tokenizers'}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
