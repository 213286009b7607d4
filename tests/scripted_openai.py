"""A scripted OpenAI-compatible HTTP server on a real socket, for tests and benchmarks.

Tests enqueue what the "model" does next (stream text, call tools, write tool markup, fail
with 429/503/404, hang) and the real adapters talk to it over HTTP.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.server_proc import free_port


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    ttft: float = 0.0          # seconds before the first chunk
    chunk_delay: float = 0.0   # seconds between chunks
    hang: float = 0.0          # sleep this long before answering at all
    fail_after_text: bool = False  # drop the connection after streaming the text


def text(t: str, ttft: float = 0.0, chunk_delay: float = 0.0) -> Reply:
    return Reply(text=t, ttft=ttft, chunk_delay=chunk_delay)


def tools(*calls: tuple[str, dict[str, Any]], text_before: str = "") -> Reply:
    return Reply(text=text_before, tool_calls=list(calls))


def status(code: int, body: str = "", retry_after: str | None = None) -> Reply:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Reply(status=code, body=body or json.dumps({"error": {"message": f"scripted {code}"}}), headers=headers)


def hang(seconds: float) -> Reply:
    return Reply(hang=seconds)


def _words(t: str) -> list[str]:
    out, word = [], ""
    for ch in t:
        word += ch
        if ch == " ":
            out.append(word)
            word = ""
    if word:
        out.append(word)
    return out


LEARNER = "scripted-learner"
VISION = "scripted-vision"


class ScriptedOpenAI:
    def __init__(self) -> None:
        self.queues: dict[str, deque[Reply]] = {}
        self.default_queue: deque[Reply] = deque()
        self.model_status: dict[str, int] = {}  # permanent status per model, e.g. 404 retired
        self.models: list[str] = ["scripted-model"]
        self.default_reply: Reply | None = None  # used when nothing is queued
        self.requests: list[dict[str, Any]] = []
        # Models whose calls are the server's own background work (memory's learning calls):
        # they have their own queues and request log, so a chat test's script and its
        # `requests[-1]` are never disturbed by a reflection running beside it.
        self.side_models: set[str] = {LEARNER, VISION}
        self.side_requests: list[dict[str, Any]] = []
        self.transcript = ""  # what /audio/transcriptions answers
        self.transcriptions: list[dict[str, Any]] = []
        # Answers side calls by what they ask (body -> Reply), for tests where several kinds
        # of background call may come in any order; None falls back to the side queues.
        self.side_responder: Callable[[dict[str, Any]], Reply | None] | None = None
        # The same for the chat models: consulted before the queues.
        self.responder: Callable[[dict[str, Any]], Reply | None] | None = None
        self.port = free_port()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- programming --------------------------------------------------------------------

    def enqueue(self, *replies: Reply, model: str | None = None) -> None:
        queue = self.default_queue if model is None else self.queues.setdefault(model, deque())
        queue.extend(replies)

    def reset(self) -> None:
        self.queues.clear()
        self.default_queue.clear()
        self.model_status.clear()
        self.requests.clear()
        self.side_requests.clear()
        self.side_responder = None
        self.responder = None
        self.transcript = ""
        self.transcriptions.clear()
        self.default_reply = None
        self.models = ["scripted-model"]

    def _next(self, model: str, body: dict[str, Any] | None = None) -> Reply:
        responder = self.side_responder if model in self.side_models else self.responder
        if responder is not None:
            answer = responder(body or {})
            if answer is not None:
                return answer
        if model in self.model_status:
            return status(self.model_status[model], body=json.dumps({"error": {"message": "model not found"}}))
        queue = self.queues.get(model)
        if queue:
            return queue.popleft()
        if model in self.side_models:
            return text("{}")
        if self.default_queue:
            return self.default_queue.popleft()
        return self.default_reply or text("OK.")

    # -- HTTP -----------------------------------------------------------------------------

    async def _transcribe(self, request: Request) -> Response:
        form = await request.form()
        upload = form["file"]
        self.transcriptions.append({"model": form.get("model"), "filename": upload.filename,
                                    "size": len(await upload.read())})
        return JSONResponse({"text": self.transcript})

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]})

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        log = self.side_requests if body.get("model") in self.side_models else self.requests
        log.append({"body": body, "headers": dict(request.headers), "at": time.monotonic()})
        reply = self._next(body.get("model", ""), body)
        if reply.hang:
            await asyncio.sleep(reply.hang)
        if reply.status != 200:
            return Response(reply.body, status_code=reply.status, headers=reply.headers,
                            media_type="application/json")
        return StreamingResponse(self._stream(body.get("model", ""), reply), media_type="text/event-stream")

    async def _stream(self, model: str, reply: Reply):
        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            payload = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            return f"data: {json.dumps(payload)}\n\n"

        if reply.ttft:
            await asyncio.sleep(reply.ttft)
        yield chunk({"role": "assistant"})
        for i, word in enumerate(_words(reply.text)):
            if i and reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            yield chunk({"content": word})
        if reply.fail_after_text:
            raise ConnectionError("scripted drop")
        for i, (name, args) in enumerate(reply.tool_calls):
            raw = json.dumps(args)
            half = len(raw) // 2
            # Arguments split across two chunks, as real providers stream them.
            yield chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                         "function": {"name": name, "arguments": raw[:half]}}]})
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": raw[half:]}}]})
        yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
        yield "data: [DONE]\n\n"

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> "ScriptedOpenAI":
        app = Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/audio/transcriptions", self._transcribe, methods=["POST"]),
        ])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("scripted server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server:
            self._server.should_exit = True
        if self._thread:
            self._thread.join(timeout=5)

