"""The two wire protocols the gateway speaks: where the block goes, what the latest user turn says,
and how an error of the gateway's own is shaped so each SDK raises its usual exception.

Only what injection needs is read; every other field of the request (the client's system prompt,
tools, tool calls, images, sampling parameters, unknown future fields) is carried over as it came.
"""

from __future__ import annotations

import json
from typing import Any

OPENAI = "openai"
ANTHROPIC = "anthropic"

# OpenAI's reserved leading roles: the block goes after them, so the client's own instructions stay first.
_LEADING_ROLES = ("system", "developer")


def inject(protocol: str, body: dict[str, Any], block: str) -> dict[str, Any]:
    """A copy of ``body`` with ``block`` as a system (or developer) block; ``body`` is not modified.

    OpenAI: a new message after the client's leading system/developer messages, with the role they
    use (``developer`` for clients of reasoning models, else ``system``). Anthropic: a text block
    appended to ``system`` (a string system prompt becomes its first block, text unchanged; its
    ``cache_control`` breakpoints, if any, keep covering the same prefix).
    """
    out = dict(body)
    if protocol == OPENAI:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return out
        i = 0
        while i < len(messages) and isinstance(messages[i], dict) and messages[i].get("role") in _LEADING_ROLES:
            i += 1
        role = "developer" if any(m.get("role") == "developer" for m in messages[:i]) else "system"
        out["messages"] = [*messages[:i], {"role": role, "content": block}, *messages[i:]]
        return out
    ours = {"type": "text", "text": block}
    system = body.get("system")
    if system is None or system == "" or system == []:
        out["system"] = block
    elif isinstance(system, str):
        out["system"] = [{"type": "text", "text": system}, ours]
    elif isinstance(system, list):
        out["system"] = [*system, ours]
    return out


def _text_of(content: Any) -> str:
    """The text parts of a message's content (a string, or a list of typed parts)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif kind == "tool_result":  # Anthropic: a tool's output travels in the user turn
            parts.append(_text_of(part.get("content")))
    return "\n".join(p for p in parts if p)


def latest_turn(protocol: str, body: dict[str, Any]) -> str:
    """The text of the latest user turn: its user message and the tool results that came with it.

    OpenAI sends tool output as ``tool`` messages after the assistant's call; Anthropic inside the
    user message as ``tool_result`` blocks. Either way, a failing command's output is what recall reads.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    texts: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if protocol == OPENAI and role in ("user", "tool"):
            texts.append(_text_of(message.get("content")))
            if role == "user":
                break
            continue
        if protocol == ANTHROPIC and role == "user":
            texts.append(_text_of(message.get("content")))
        break
    return "\n".join(reversed([t for t in texts if t]))


# Cairn's stable codes as each provider's error types, so an SDK raises its usual exception class.
_ANTHROPIC_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
}


def error_body(protocol: str, status: int, code: str, message: str) -> dict[str, Any]:
    """An error the gateway itself raises, in the shape the client's SDK parses."""
    if protocol == ANTHROPIC:
        kind = _ANTHROPIC_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
        return {"type": "error", "error": {"type": kind, "message": f"{code}: {message}"}}
    return {"error": {"message": f"{code}: {message}", "type": "cairn_gateway", "code": code, "param": None}}


# -- what the ledger records -------------------------------------------------------------------------

_RECORDED_ROLES = ("user", "assistant", "tool")  # the client's system prompt is its configuration


def conversation(protocol: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's messages as (role, text), in order, without system/developer instructions."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    out: list[tuple[str, str]] = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") in _RECORDED_ROLES:
            out.append((str(message["role"]), _text_of(message.get("content"))))
    return out


def opening(protocol: str, body: dict[str, Any]) -> str:
    """What every request of one conversation repeats: its system prompt and first user message."""
    if protocol == ANTHROPIC:
        system = _text_of(body.get("system")) if not isinstance(body.get("system"), str) else body["system"]
    else:
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        system = "\n".join(
            _text_of(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") in _LEADING_ROLES
        )
    first = next((text for role, text in conversation(protocol, body) if role == "user"), "")
    return f"{system}\x00{first}"


def answer_text(protocol: str, payload: bytes) -> str:
    """The assistant's text in a non-streamed answer ("" when it has none or is not JSON)."""
    try:
        data = json.loads(payload)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    if protocol == ANTHROPIC:
        return _text_of(data.get("content"))
    choices = data.get("choices") or []
    if choices and isinstance(choices[0], dict):
        message = choices[0].get("message") or {}
        return _text_of(message.get("content")) if isinstance(message, dict) else ""
    return ""


def stream_text(protocol: str, raw: bytes) -> str:
    """The assistant's text from a relayed event stream (the events are only read, after relaying)."""
    parts: list[str] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if not data or data == "[DONE]":
            continue
        try:
            event = json.loads(data)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if protocol == ANTHROPIC:
            delta = event.get("delta") if event.get("type") == "content_block_delta" else None
            if isinstance(delta, dict) and delta.get("type") == "text_delta":
                parts.append(str(delta.get("text", "")))
        else:
            for choice in event.get("choices") or []:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                if isinstance(delta, dict) and isinstance(delta.get("content"), str):
                    parts.append(delta["content"])
    return "".join(parts)
