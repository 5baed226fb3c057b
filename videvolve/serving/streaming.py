"""``stream: true`` for ``videvolve serve``: the answer as server-sent events, as vLLM and OpenAI stream theirs.

A harness looks at a video for seconds to minutes before it has an answer, and sends nothing meanwhile; a proxy or a
client that drops a connection idle for a minute would drop the question. So the stream opens, once the request and
its video are checked (what is wrong there has its status, as vLLM's), with the assistant's role, says what the
harness does as it does it (a ``reasoning`` delta per batch of steps, which chat UIs show as the model's thinking:
the moments each model call showed, OCR and transcript reads), keeps the connection alive with SSE comments
(``: keep-alive``, which clients skip) while nothing happens, and ends with the answer, the finish reason, the usage
chunk when ``stream_options.include_usage`` asks for it, and ``data: [DONE]``. An error once the stream is open is an
``{"error": ...}`` event (the OpenAI SDK raises it as ``APIError``), as vLLM sends one. A client that goes away stops
its harness, as without streaming.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from videvolve.serving.agent import AgentAnswer
from videvolve.serving.steps import steps_text

STEP_POLL_S = 0.25
"""How often a stream sends what its harness did since (as ``reasoning`` deltas)."""
Answering = Callable[[threading.Event, Callable[[str], None]], AgentAnswer | Exception]
"""Answers the question (in a worker thread; stopping once the event is set, telling the second argument a line
per step); returns what it raised instead."""
Finishing = Callable[[AgentAnswer | Exception], list[dict[str, Any]]]
"""The last events of a stream for what :data:`Answering` returned: chunks, or one ``{"error": ...}``."""


class AnswerStream(StreamingResponse):
    """One streamed answer; ``on_close`` is called however it ends.

    The harness runs beside the stream (stopped if the client goes away), taking its place among ``--concurrency``
    in the queue's order, as a question without streaming does.
    """

    def __init__(self, answering: Answering, finishing: Finishing, *, model_id: str,
                 limiter: anyio.CapacityLimiter, keepalive_s: float, on_close: Callable[[], None]) -> None:
        super().__init__(self._events(), media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._answering, self._finishing, self._model_id = answering, finishing, model_id
        self._limiter, self._keepalive_s, self._on_close = limiter, keepalive_s, on_close
        self._cancel, self._done = threading.Event(), anyio.Event()
        self._result: list[AgentAnswer | Exception] = []
        self._said: list[str] = []
        self._said_lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer and stream at once; stop the harness if the stream ends first (its client gone)."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._answer)
                try:
                    await super().__call__(scope, receive, send)
                finally:
                    self._cancel.set()  # nothing to stop once answered; the task group waits for a running harness
                    tg.cancel_scope.cancel()  # and a question still waiting for its place leaves the queue
        finally:
            self._on_close()

    async def _answer(self) -> None:
        self._result.append(await anyio.to_thread.run_sync(self._answering, self._cancel, self._say,
                                                           limiter=self._limiter))
        self._done.set()

    def _say(self, line: str) -> None:
        """A step of the harness, from its worker thread."""
        with self._said_lock:
            self._said.append(line)

    def _steps(self, stamp: dict[str, Any]) -> str | None:
        """The steps said since the last call, as one ``reasoning`` delta (as vLLM streams a model's thinking)."""
        with self._said_lock:
            lines, self._said = self._said, []
        if not lines:
            return None
        return sse({**stamp, "choices": [{"index": 0, "delta": {"reasoning": steps_text(lines)}, "logprobs": None,
                                          "finish_reason": None}]})

    async def _events(self) -> AsyncIterator[str]:
        stamp = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk",
                 "created": int(time.time()), "model": self._model_id}
        yield sse({**stamp, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                         "logprobs": None, "finish_reason": None}]})
        quiet_since = anyio.current_time()
        while not self._done.is_set():
            with anyio.move_on_after(min(STEP_POLL_S, self._keepalive_s)):
                await self._done.wait()
            if (steps := self._steps(stamp)) is not None:
                quiet_since = anyio.current_time()
                yield steps
            elif not self._done.is_set() and anyio.current_time() - quiet_since >= self._keepalive_s:
                quiet_since = anyio.current_time()
                yield ": keep-alive\n\n"
        if (steps := self._steps(stamp)) is not None:
            yield steps
        for event in self._finishing(self._result[0]):
            yield sse(event if "error" in event else {**stamp, **event})
        yield sse("[DONE]")


def sse(data: dict[str, Any] | str) -> str:
    """One server-sent event."""
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


def final_chunks(answer: AgentAnswer, finish_reason: str, usage: dict[str, Any], extra: dict[str, Any],
                 include_usage: bool) -> list[dict[str, Any]]:
    """An answer's last chunks: its text, the finish reason (with the ``videvolve`` extra field), then the usage."""
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"content": answer.text}, "logprobs": None, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_reason}],
         "videvolve": extra}]
    if include_usage:
        chunks.append({"choices": [], "usage": usage})
    return chunks
