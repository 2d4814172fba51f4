"""A local model provider that speaks both protocols, for the gateway's tests.

It records every request it receives (body and headers), answers with a fixed completion, and can
be told to: stream (OpenAI chunks or Anthropic events, with a tool call), hold the rest of a stream
until the test releases it (``gate``), fail with a status, or fail in the middle of a stream. It
notes when a stream finished and when its client (the gateway) went away before the end.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

TEXT = "Use the retry wrapper."
TOOL_ARGS = '{"path": "src/app.py"}'
EXTRACTION_MARK = "Cairn lesson extraction"  # the first words of cairn.core.extraction's prompt


@dataclass
class Fake:
    requests: list[dict[str, Any]] = field(default_factory=list)
    mode: str = "ok"  # ok | tool | error_status | error_midstream
    status: int = 429
    gate: threading.Event | None = None  # when set: the first event goes out, the rest waits for it
    finished: threading.Event = field(default_factory=threading.Event)
    cancelled: threading.Event = field(default_factory=threading.Event)
    first_sent: threading.Event = field(default_factory=threading.Event)
    extraction_answer: str = ""  # the answer to the extraction prompt (tests of extraction set it)

    def reset(self, **kw: Any) -> None:
        self.requests.clear()
        self.mode = kw.get("mode", "ok")
        self.status = kw.get("status", 429)
        self.gate = kw.get("gate")
        self.finished = threading.Event()
        self.cancelled = threading.Event()
        self.first_sent = threading.Event()

    @property
    def last(self) -> dict[str, Any]:
        return self.requests[-1]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


def _openai_events(fake: Fake, model: str) -> list[bytes]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    events = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Use the "})]
    if fake.mode == "error_midstream":
        return [*events, _sse({"error": {"message": "upstream overloaded", "type": "server_error", "code": None}})]
    events.append(chunk({"content": "retry wrapper."}))
    if fake.mode == "tool":
        call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": ""}}
        events.append(chunk({"tool_calls": [call]}))
        events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": TOOL_ARGS}}]}))
        events.append(chunk({}, "tool_calls"))
    else:
        events.append(chunk({}, "stop"))
    return [*events, _sse("[DONE]")]


def _anthropic_events(fake: Fake, model: str) -> list[bytes]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": model,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    events = [
        _sse({"type": "message_start", "message": message}, "message_start"),
        _sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        ),
        _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Use the "}},
            "content_block_delta",
        ),
    ]
    if fake.mode == "error_midstream":
        error = {"type": "error", "error": {"type": "overloaded_error", "message": "upstream overloaded"}}
        return [*events, _sse(error, "error")]
    events += [
        _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "retry wrapper."}},
            "content_block_delta",
        ),
        _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
    ]
    stop = "end_turn"
    if fake.mode == "tool":
        stop = "tool_use"
        block = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}
        events += [
            _sse({"type": "content_block_start", "index": 1, "content_block": block}, "content_block_start"),
            _sse(
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": TOOL_ARGS},
                },
                "content_block_delta",
            ),
            _sse({"type": "content_block_stop", "index": 1}, "content_block_stop"),
        ]
    events += [
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
            "message_delta",
        ),
        _sse({"type": "message_stop"}, "message_stop"),
    ]
    return events


def _text(fake: Fake, body: dict[str, Any]) -> str:
    """The extraction prompt (it names itself in its first line) gets the test's answer; the rest the fixed text."""
    if fake.extraction_answer and EXTRACTION_MARK in json.dumps(body):
        return fake.extraction_answer
    return TEXT


def app(fake: Fake) -> Starlette:
    async def stream(events: list[bytes]) -> Any:
        done = False
        try:
            for i, event in enumerate(events):
                yield event
                if i == 0:
                    fake.first_sent.set()
                    if fake.gate is not None:
                        await anyio.to_thread.run_sync(fake.gate.wait, 60, abandon_on_cancel=True)
            done = True
        finally:
            if done:
                fake.finished.set()
            else:
                fake.cancelled.set()

    async def record(request: Request) -> dict[str, Any]:
        raw = await request.body()
        body = json.loads(raw) if raw else {}
        fake.requests.append({"path": request.url.path, "body": body, "raw": raw, "headers": dict(request.headers)})
        return body

    async def held(request: Request) -> bool:
        """Hold a non-streamed answer until the gate opens; False (and ``cancelled``) if the client left."""
        if fake.gate is None:
            return True
        fake.first_sent.set()
        left = False
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                await anyio.to_thread.run_sync(fake.gate.wait, 60, abandon_on_cancel=True)
                tg.cancel_scope.cancel()

            async def watch() -> None:
                nonlocal left
                while (await request.receive())["type"] != "http.disconnect":
                    pass
                left = True
                tg.cancel_scope.cancel()

            tg.start_soon(wait)
            tg.start_soon(watch)
        if left:
            fake.cancelled.set()
        return not left

    async def chat(request: Request) -> Response:
        body = await record(request)
        if not body.get("stream") and not await held(request):
            return Response(status_code=499)
        if fake.mode == "error_status":
            error = {"error": {"message": "slow down", "type": "rate_limit", "code": "rate_limited"}}
            return JSONResponse(error, status_code=fake.status, headers={"x-request-id": "req-upstream-1"})
        if body.get("stream"):
            return StreamingResponse(stream(_openai_events(fake, body["model"])), media_type="text/event-stream")
        fake.finished.set()
        answer = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": _text(fake, body)}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return JSONResponse(answer, headers={"x-request-id": "req-upstream-1"})

    async def messages(request: Request) -> Response:
        body = await record(request)
        if fake.mode == "error_status":
            error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
            return JSONResponse(error, status_code=fake.status, headers={"request-id": "req-upstream-1"})
        if body.get("stream"):
            return StreamingResponse(stream(_anthropic_events(fake, body["model"])), media_type="text/event-stream")
        fake.finished.set()
        answer = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": _text(fake, body)}],
            "model": body["model"],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        return JSONResponse(answer, headers={"request-id": "req-upstream-1"})

    async def models(request: Request) -> Response:
        await record(request)
        return JSONResponse(
            {"object": "list", "data": [{"id": "fake-1", "object": "model", "created": 1, "owned_by": "t"}]}
        )

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )
