"""Test helpers shipped with the package: videos whose frames encode their own index, serve-sim, and the fakes.

Each frame carries its index as a row of black/white blocks (one bit each, most significant first), large enough
to survive H.264 compression and downscaling, so a test can tell exactly which frame came back.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import httpx
import numpy as np
from fastapi import FastAPI, Request
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from PIL import Image

from videvolve.editing.base import Editor, EditorInput, Proposal, Workspaces
from videvolve.editing.tools import EditorTools
from videvolve.evaluation.results import TaskResult
from videvolve.media.encode import write_h264
from videvolve.models.base import Reply
from videvolve.models.sim import SimVLM
from videvolve.search.services import SearchSettings, StoredResults
from videvolve.tasks import Task

BITS = 16

T = TypeVar("T")


def index_frame(i: int, width: int, height: int) -> np.ndarray:
    """An RGB frame whose top band encodes ``i`` in ``BITS`` blocks; the rest is a gradient that changes with i."""
    frame = np.zeros((height, width, 3), dtype=np.uint8)
    band = height // 3
    block = width // BITS
    for b in range(BITS):
        if (i >> (BITS - 1 - b)) & 1:
            frame[:band, b * block : (b + 1) * block] = 255
    frame[band:, :, 0] = (i * 7) % 256
    frame[band:, :, 1] = np.linspace(0, 255, width, dtype=np.uint8)[None, :]
    frame[band:, :, 2] = 96
    return frame


def read_index(image: Image.Image) -> int:
    """Decode the index written by :func:`index_frame` (works on downscaled frames too)."""
    a = np.asarray(image.convert("L"), dtype=np.float32)
    h, w = a.shape
    band = h // 3
    block = w / BITS
    value = 0
    for b in range(BITS):
        x0, x1 = int(b * block + block * 0.25), int((b + 1) * block - block * 0.25)
        bit = a[int(band * 0.2) : int(band * 0.8), x0 : max(x1, x0 + 1)].mean() > 128
        value = (value << 1) | int(bit)
    return value


def make_index_video(path: str | Path, seconds: float = 20.0, fps: int = 25, gop: int = 12,
                     width: int = 320, height: int = 180, preset: str = "veryfast") -> Path:
    """Encode an H.264 MP4 (with B-frames) whose frame ``i`` shows index ``i`` at time ``i / fps``."""
    frames = (index_frame(i, width, height) for i in range(round(seconds * fps)))
    return write_h264(path, frames, fps, width, height, {"preset": preset, "crf": "20", "g": str(gop),
                                                         "keyint_min": str(gop), "sc_threshold": "0", "bf": "2"})


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago (racy: see :func:`reserved_port`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def reserved_port() -> Iterator[int]:
    """A port of 127.0.0.1 that no other process is given while the block runs; connections to it are refused.

    A socket is bound there with ``SO_REUSEADDR`` and never listens: the kernel hands the port to no ``bind(0)``
    nor outgoing connection elsewhere, while a server started on it with ``SO_REUSEADDR`` (uvicorn's, so
    ``serve-sim``, ``serve``, ``mcp --http``) binds it and listens, and again after a restart. Until one listens, a
    connection is refused: a model endpoint that is down.
    """
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


@contextlib.contextmanager
def serve_sim(*extra: str) -> Iterator[str]:
    """Start `videvolve serve-sim` as a real subprocess on a :func:`reserved_port`; yields its base URL."""
    with reserved_port() as port, _serve_sim_on(port, extra) as base:
        yield base


@contextlib.contextmanager
def _serve_sim_on(port: int, extra: tuple[str, ...]) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "videvolve", "serve-sim", "--port", str(port), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60  # its imports take seconds, more with the other core busy (xdist)
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.HTTPError:
                if proc.poll() is not None:
                    raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "serve-sim died") from None
                if time.monotonic() > deadline:
                    raise RuntimeError("serve-sim did not answer within 60 s") from None
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def interrupt_after(node: str, count: int, exc: type[BaseException]) -> Callable[[str, Any, Any], None]:
    """An ``evolve`` progress callback that raises ``exc`` once ``node`` has finished ``count`` times (a crash)."""
    seen: list[str] = []

    def callback(name: str, values: Any, state: Any) -> None:
        seen.append(name)
        if name == node and seen.count(node) == count:
            raise exc

    return callback


# ---- fakes of the models and of a run, for tests (one place: smolagents' and dspy's habit) ----


class ScriptedReplies:
    """A VLM whose replies are scripted texts, in order (``"{}"`` once they run out); records every request."""

    name, revision = "scripted", "1"

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.requests: list[list[dict[str, Any]]] = []

    def decoding(self) -> dict[str, Any]:
        """No decoding settings (nothing to key a cache on)."""
        return {}

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        """The next scripted reply."""
        self.requests.append(messages)
        return Reply(text=self.replies.pop(0) if self.replies else "{}")


class CountingVLM(SimVLM):
    """SimVLM that counts its calls (class-wide, so copies made by a run count too)."""

    calls = 0

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        """SimVLM's reply, counted."""
        type(self).calls += 1
        return super().complete(messages, tools)


class GarbageVLM(SimVLM):
    """SimVLM that looks at everything and then answers nothing usable (a parse error every time)."""

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        """An unusable reply."""
        reply = super().complete(messages, tools)
        reply.text = "Hmm, hard to say."
        return reply


class ScriptedChat(GenericFakeChatModel):
    """A langchain chat model that returns scripted ``AIMessage``s (tool calls included); records every request.

    ``GenericFakeChatModel.bind_tools`` raises, so this one returns itself and records the tools it was given.
    """

    seen: ClassVar[list[list[BaseMessage]]] = []
    tools_seen: ClassVar[list[Any]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        """Record the tools; tool calls come from the script."""
        type(self).tools_seen.append(tools)
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        type(self).seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def tool_call(name: str, i: int, **args: Any) -> AIMessage:
    """An assistant message calling one tool (id ``c<i>``)."""
    return AIMessage(content="", tool_calls=[{"id": f"c{i}", "name": name, "args": args}])


class ScriptedEditor:
    """An editor that proposes the scripted revisions in order, then nothing."""

    def __init__(self, proposals: list[Proposal]) -> None:
        self.proposals = list(proposals)
        self.last_failure: str | None = None

    def propose(self, inp: EditorInput, workspaces: Workspaces | None = None) -> Proposal | None:
        """The next scripted proposal."""
        return self.proposals.pop(0) if self.proposals else None


class OneWorkspace:
    """Workspaces that hand out the same tools every time (an editor tested on its own, outside the edit node)."""

    def __init__(self, tools: EditorTools) -> None:
        self.tools = tools

    def open(self, inp: EditorInput, resume: bool = False) -> EditorTools:
        """The one workspace's tools."""
        return self.tools


def _satisfies(editor: ScriptedEditor, one: OneWorkspace) -> tuple[Editor, Workspaces]:  # mypy checks the protocols
    return editor, one


class FakeRun:
    """A run whose versions have fixed per-question scores on ``len(scores[v])`` mcq selection tasks.

    ``frames``: every version's frames per question (its cost), or each version's (a number, or one per question);
    ``evidence``: each question's evidence type (the gate guards each type apart, as on a speaking world);
    ``videos``: how many videos the questions come from, question i from video i mod ``videos`` (default: each its own).

    It counts every (version, task) evaluation, as a real run would pay for it; mypy checks it satisfies the
    search's :class:`~videvolve.search.services.StoredResults`.
    """

    def __init__(self, ctx: SearchSettings, scores: dict[str, list[float]],
                 frames: int | dict[str, int | list[int]] = 16,
                 evidence: list[str] | None = None, videos: int | None = None) -> None:
        self.ctx, self.scores, self.frames = ctx, scores, frames
        n = len(next(iter(scores.values())))
        self.selection = [Task(id=f"t{i}", video_id=f"v{i % videos if videos else i}", video="v.mp4", kind="mcq",
                               question="q", options=["a", "b"], answer="A", duration=10,
                               meta={"evidence": evidence[i]} if evidence else {}) for i in range(n)]
        self.evaluated: dict[str, set[str]] = {}

    def evaluate(self, version: str, tasks: list[Task], split: str) -> list[TaskResult]:
        """Scripted results, counted."""
        self.evaluated.setdefault(version, set()).update(t.id for t in tasks)
        return [self._result(version, t) for t in tasks]


    def stored(self, version: str, task: Task, split: str) -> TaskResult | None:
        """The scripted result of a (version, task) already evaluated, without counting it; None otherwise."""
        return self._result(version, task) if task.id in self.evaluated.get(version, set()) else None

    def _result(self, version: str, task: Task) -> TaskResult:
        own = self.frames if isinstance(self.frames, int) else self.frames.get(version, 16)
        frames = own if isinstance(own, int) else own[int(task.id[1:])]
        return TaskResult(task_id=task.id, harness_id=version, kind="mcq", outcome="ok",
                          score=self.scores[version][int(task.id[1:])],
                          usage={"frames": frames, "image_tokens": frames})


def _fake_run_is_an_evaluator(run: FakeRun) -> StoredResults:  # mypy checks the fake against the protocol
    return run


@contextlib.contextmanager
def serve_scripted_chat(script: Callable[[list[dict[str, Any]]], dict[str, Any]],
                        model: str = "scripted-editor") -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A real OpenAI-compatible HTTP server on 127.0.0.1 whose replies come from ``script(messages)``.

    ``script`` returns an assistant message (``{"content": ..., "tool_calls": [{"name", "arguments"}]}``) for
    the request's messages, so a test can script a tool-calling model that reads its tool results. Yields the
    base URL and the list of requests received.
    """
    app = FastAPI()
    requests: list[dict[str, Any]] = []

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        payload = await request.json()
        requests.append(payload)
        out = script(payload["messages"])
        calls = [{"id": f"call_{len(requests)}_{i}", "type": "function",
                  "function": {"name": c["name"], "arguments": c["arguments"] if isinstance(c["arguments"], str)
                               else json.dumps(c["arguments"])}} for i, c in enumerate(out.get("tool_calls", []))]
        message = {"role": "assistant", "content": out.get("content") or None, **({"tool_calls": calls} if calls
                                                                                 else {})}
        return {"id": f"chatcmpl-{len(requests)}", "object": "chat.completion", "created": int(time.time()),
                "model": model, "choices": [{"index": 0, "message": message,
                                             "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}

    with serve_app(app) as base:
        yield base, requests


@contextlib.contextmanager
def serve_app(app: Any, port: int | None = None) -> Iterator[str]:
    """An ASGI app on ``port`` of 127.0.0.1, in a thread of this process; yields its ``/v1`` URL.

    Without ``port`` the socket is bound here, on a port the kernel picks (no other process can be given it). The
    same ``port`` again after the first has stopped, a :func:`reserved_port` held around both: a server restarted
    at the address its clients know.
    """
    import uvicorn

    sock = None
    if port is None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock] if sock else None}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not server.started:  # the port taken (uvicorn logs why and exits its thread), or a start that hangs
        server.should_exit = True
        if sock is not None:
            sock.close()
        raise RuntimeError(f"the app did not start on 127.0.0.1:{port}")
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        if sock is not None:
            sock.close()  # asyncio's server closed this very socket already; closing it again does nothing


def in_thread(fn: Callable[[], T], seconds: float) -> tuple[T, float]:
    """``fn()``'s value and how long it took, in a thread of its own; what ``fn`` raises is raised here.

    ``AssertionError`` when it is still running after ``seconds``: a hang ends the test, not CI.
    """
    box: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise AssertionError(f"still running after {seconds} s (hung)")
    if errors:
        raise errors[0]
    return box[0], time.monotonic() - started


async def trickle(chunk: bytes = b" ", every_s: float = 0.2) -> AsyncIterator[bytes]:
    """A response body that never ends, a chunk at a time (a broken proxy): for ``StreamingResponse``."""
    import asyncio

    while True:
        yield chunk
        await asyncio.sleep(every_s)


@contextlib.contextmanager
def full_disk(size: int) -> Iterator[None]:
    """Within the block no file may grow past ``size`` bytes: a write that would fails half-way, as on a full disk.

    ``RLIMIT_FSIZE`` (writes past it fail with ``EFBIG``, ``SIGXFSZ`` ignored meanwhile): it holds for the whole
    process, so use it in the main thread, around the one write under test.
    """
    import resource
    import signal

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
