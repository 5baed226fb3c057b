"""Servers a test starts and talks to over real sockets.

Ports no other process is given, ``serve-sim`` as a subprocess, an OpenAI-compatible chat server whose replies a
test scripts, any ASGI app in a thread of the test's process, and a response body that never ends.
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
from typing import Any

import httpx
from fastapi import FastAPI, Request


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


async def trickle(chunk: bytes = b" ", every_s: float = 0.2) -> AsyncIterator[bytes]:
    """A response body that never ends, a chunk at a time (a broken proxy): for ``StreamingResponse``."""
    import asyncio

    while True:
        yield chunk
        await asyncio.sleep(every_s)
