"""``videvolve serve``: an OpenAI-compatible server whose models are harness versions.

A chat request's user message carries a ``video_url`` part and a text part with the question (option lines such
as ``A) red`` make it mcq; without options, or with ``"grounding": true`` in the request, it is a grounding
question, as ``videvolve ask`` decides). The harness decodes the video itself. The reply's content is the answer
text; ``usage`` and the extra field ``videvolve`` carry the evidence times and the cost. Errors are OpenAI-style
JSON: 400 bad request, 401 bad key, 403 a path outside the media roots, 404 unknown model, 429 queue full,
502/503 when the model endpoint behind the harness refuses or is down, 503 when this machine cannot run a harness
(no sandbox, no processes left). With ``stream: true`` the answer comes as server-sent events
(:mod:`videvolve.serving.streaming`), once the video is found and checked: what is wrong with the request or its
video is its status either way.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from videvolve.errors import Cancelled
from videvolve.serving.agent import AgentAnswer, naming_the_video, split_question
from videvolve.serving.api_errors import ApiError, error_reply
from videvolve.serving.auth import KEY_HINT, bearer_matches
from videvolve.serving.media import checked_video, video_file
from videvolve.serving.replies import completion, streamed_end
from videvolve.serving.steps import narrated
from videvolve.serving.streaming import AnswerStream
from videvolve.skill_library.trace import StepListener

MAX_BODY_BYTES = 256 * 1024 * 1024
BODY_S = 300.0
"""The longest a request's body may take to arrive (it holds a place in the queue meanwhile)."""
MAX_JSON_ITEMS = 50_000
"""The most ``{``, ``[`` and ``,`` a body may hold outside its strings: parsing and validating a body of a million
small objects held the event loop, and every other client, for minutes. A chat request has a few dozen."""
JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
"""A JSON string, escapes included (unrolled, so a string of 100 MB is one linear pass)."""
DISCONNECT_POLL_S = 0.5
"""How often a question in progress looks whether its client is still there."""
log = logging.getLogger(__name__)


class Answerer(Protocol):
    """What answers one question about one local video (a :class:`~videvolve.serving.agent.VideoAgent`)."""

    def ask(self, video: Any, question: str, options: list[str] | None = None,
            grounding: bool = False, cancel: threading.Event | None = None,
            on_step: StepListener | None = None) -> AgentAnswer:
        """Answer, or raise MediaError / InfraError (Cancelled once ``cancel`` is set); ``on_step``: each step."""
        ...


class Agents(Protocol):
    """The models a server offers: ids and the agent behind each."""

    def ids(self) -> list[str]:
        """Model ids, the default first."""
        ...

    def agent(self, model_id: str) -> Answerer:
        """The agent of a model id (KeyError when unknown)."""
        ...

    def describe(self, model_id: str) -> str:
        """name@version_id of the harness behind a model id."""
        ...


@dataclass(frozen=True)
class ServerLimits:
    """How much the server takes at once, and who may ask."""

    api_key: str | None = None
    concurrency: int = 4
    """Questions answered at once (each runs its own sandboxed harness)."""
    queue: int = 16
    """Questions waiting beyond those (a request counts from its arrival, its body still to read); one more is
    answered 429 before its body is read."""
    keepalive_s: float = 15.0
    """With ``stream: true``, the longest a stream stays silent while its question waits or its harness works."""


class ContentPart(BaseModel):
    """One part of a message's content."""

    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None
    video_url: dict[str, Any] | str | None = None


class ChatMessage(BaseModel):
    """One message."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[ContentPart] | None = None


class StreamOptions(BaseModel):
    """``stream_options``: a last chunk with the usage, when asked."""

    model_config = ConfigDict(extra="allow")
    include_usage: bool | None = False


class ChatRequest(BaseModel):
    """The fields of a chat completion request that the server reads (others are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")
    model: str
    messages: list[ChatMessage]
    grounding: bool | None = None
    """True: a grounding question even with option lines (as ``ask --grounding``)."""
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: int | None = None
    """Answers asked for: one (a harness answers once)."""


@dataclass(frozen=True)
class VideoQuestion:
    """What a chat request asks."""

    video: str
    question: str
    options: list[str]
    grounding: bool


def read_question(req: ChatRequest) -> VideoQuestion:
    """The video URL and the question of the last user message (400 when either is missing)."""
    user = [m for m in req.messages if m.role == "user"]
    if not user:
        raise ApiError(400, "invalid_request_error", "no user message: send one with a video_url part and the "
                       "question as a text part")
    content = user[-1].content
    parts = [ContentPart(type="text", text=content)] if isinstance(content, str) else (content or [])
    videos = [p.video_url for p in parts if p.type == "video_url"]
    if not videos and any(p.type == "image_url" for p in parts):  # the `openai` models of lmms-eval and VLMEvalKit
        raise ApiError(400, "invalid_request_error", "frames sent as image_url parts are not taken: the harness "
                       "decodes the video and picks its own frames; send the video itself as one video_url part")
    if len(videos) != 1 or videos[0] is None:
        raise ApiError(400, "invalid_request_error", f"the user message has {len(videos)} video_url part(s); send "
                       'exactly one: {"type": "video_url", "video_url": {"url": "file:///... | https://... | '
                       'data:video/mp4;base64,..."}}')
    url = videos[0] if isinstance(videos[0], str) else videos[0].get("url")
    if not isinstance(url, str) or not url:
        raise ApiError(400, "invalid_request_error", "the video_url part has no url")
    others = sorted({p.type for p in parts} - {"text", "video_url"})
    if others:
        raise ApiError(400, "invalid_request_error", f"unsupported content part(s) {others}: the harness reads "
                       "one video_url and text")
    text = "\n".join(p.text or "" for p in parts if p.type == "text")
    question, options = split_question(text)
    if not question:
        raise ApiError(400, "invalid_request_error", "no question: add a text part, e.g. 'When does the red "
                       "star appear?' (with 'A) ...' lines for a multiple-choice question)")
    return VideoQuestion(url, question, options, bool(req.grounding))


def create_app(agents: Agents, roots: Any, limits: ServerLimits) -> FastAPI:
    """The app: ``agents`` answer, ``roots`` (:class:`~videvolve.serving.media.MediaRoots`) confine local paths."""
    app = FastAPI(title="videvolve serve")
    admitted = {"n": 0}
    limiter = anyio.CapacityLimiter(limits.concurrency)

    app.add_middleware(Guard, api_key=limits.api_key)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "running_or_queued": admitted["n"]}

    @app.exception_handler(HTTPException)
    async def no_such_route(request: Request, exc: HTTPException) -> JSONResponse:
        """A path or method the server does not have, in the error shape every other reply has."""
        routes = "GET /v1/models, GET /v1/models/{model} and POST /v1/chat/completions"
        message = f"Invalid URL ({request.method} {request.url.path}): this server has {routes}" \
            if exc.status_code in (404, 405) else str(exc.detail)
        reply = ApiError(exc.status_code, "invalid_request_error", message).response()
        reply.headers.update(exc.headers or {})  # a 405's Allow
        return reply

    def card(model_id: str) -> dict[str, Any]:
        return {"id": model_id, "object": "model", "created": 0, "owned_by": "videvolve",
                "harness": agents.describe(model_id)}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [card(i) for i in agents.ids()]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> Any:
        if not model_id:  # /v1/models/: the list, as the redirect to /v1/models this route would shadow gave it
            return await models()
        return card(model_id) if model_id in agents.ids() else _unknown_model(model_id, agents).response()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        if admitted["n"] >= limits.concurrency + limits.queue:  # before the body: a flood is never read at all
            return ApiError(429, "rate_limit_error", f"{admitted['n']} questions running or queued (--concurrency "
                            f"{limits.concurrency}, --queue {limits.queue}); retry later").response()
        admitted["n"] += 1
        reply: Any = None
        try:
            reply = await respond(request)
            return reply
        finally:
            if not isinstance(reply, AnswerStream):  # a stream holds its place until it ends
                admitted["n"] -= 1

    def release() -> None:
        admitted["n"] -= 1

    async def respond(request: Request) -> Any:
        try:
            req = ChatRequest.model_validate(json.loads(_countable(await _read_body(request))))
        except ApiError as exc:
            return exc.response()
        except ClientDisconnect:  # gone while sending its body: nobody to answer (uvicorn logged a traceback)
            return ApiError(499, "invalid_request_error", "the client went away while sending its request").response()
        except RecursionError:
            return ApiError(400, "invalid_request_error", "the body is nested too deep to read: send the messages "
                            "as a chat completion request has them").response()
        except ValueError as exc:  # JSON or pydantic
            detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:10]) \
                if isinstance(exc, ValidationError) else "the body is not JSON"
            return ApiError(400, "invalid_request_error", detail).response()
        if req.n not in (None, 1):
            return ApiError(400, "invalid_request_error", f"n={req.n}: a harness answers once; send n=1 (and ask "
                            "again for another answer)").response()
        try:
            agent = agents.agent(req.model)
        except KeyError:
            return _unknown_model(req.model, agents).response()
        except Exception as exc:  # a harness that cannot be loaded: the error shape every reply has, not plain text
            return error_reply(exc).response()
        try:
            q = read_question(req)
        except ApiError as exc:
            return exc.response()
        if req.stream:  # as vLLM, what is wrong with the video has its status, not an error event in a stream
            try:
                held, path = await anyio.to_thread.run_sync(checked_video, q.video, roots)
            except Exception as exc:
                return error_reply(exc).response()

            def closed() -> None:
                held.close()  # a data URL's file
                release()

            include_usage = bool(req.stream_options and req.stream_options.include_usage)
            return AnswerStream(lambda cancel, say: _answer(agent, q, roots, cancel, narrated(say), path),
                                lambda answer: streamed_end(answer, include_usage), model_id=req.model,
                                limiter=limiter, keepalive_s=limits.keepalive_s, on_close=closed)
        cancel = threading.Event()
        told: list[str] = []
        answer: AgentAnswer | Exception = Cancelled("the client went away")
        async with anyio.create_task_group() as tg:  # the answer, and a watch on the client meanwhile
            tg.start_soon(_watch_disconnect, request, cancel, tg.cancel_scope)
            try:
                answer = await anyio.to_thread.run_sync(_answer, agent, q, roots, cancel, narrated(told.append),
                                                        limiter=limiter)
            finally:
                tg.cancel_scope.cancel()
        if isinstance(answer, Cancelled):
            return ApiError(499, "invalid_request_error", "the client went away; the question was stopped").response()
        if isinstance(answer, Exception):
            return error_reply(answer).response()
        return completion(req.model, answer, told)

    return app


class Guard:
    """The API key on ``/v1/``, and a body whose stated length is over the cap refused before it is read.

    Plain ASGI, not ``@app.middleware("http")``: Starlette's ``BaseHTTPMiddleware`` hides the client's disconnect
    from the route (``request.is_disconnected()`` never turns true behind it), and a question whose client went away
    must stop its harness.
    """

    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self.api_key = api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse what the guard refuses; pass the rest on untouched."""
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            refused = None
            on_v1 = scope["path"].startswith("/v1/")
            if self.api_key is not None and on_v1 and not bearer_matches(scope, self.api_key):
                refused = ApiError(401, "authentication_error", KEY_HINT)
            elif _stated_length(headers) > MAX_BODY_BYTES:
                refused = _too_large()
            if refused is not None:
                await refused.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _unknown_model(model_id: str, agents: Agents) -> ApiError:
    return ApiError(404, "not_found_error", f"The model `{model_id}` does not exist; served models: "
                    f"{', '.join(agents.ids())}")


def _stated_length(headers: Headers) -> int:
    try:
        return int(headers.get("content-length") or 0)
    except ValueError:
        return 0


def _too_large() -> ApiError:
    return ApiError(413, "invalid_request_error", f"request body over {MAX_BODY_BYTES} bytes: send the video as a "
                    "file:// or https:// URL")


def _countable(body: bytes) -> bytes:
    """The body, unless it holds more than :data:`MAX_JSON_ITEMS` objects, arrays and items (counted in C).

    Commas and brackets inside strings (a long transcript in a prompt) do not count: where the quick count over the
    whole body is past the limit, it is made again with the strings taken out.
    """
    def count(raw: bytes) -> int:
        return raw.count(b"{") + raw.count(b"[") + raw.count(b",")

    items = count(body)
    if items > MAX_JSON_ITEMS:
        items = count(JSON_STRING.sub(b'""', body))
    if items > MAX_JSON_ITEMS:
        raise ApiError(400, "invalid_request_error", f"the body holds {items} JSON objects, arrays and items, nested "
                       f"or repeated (at most {MAX_JSON_ITEMS}): a chat completion request has a few dozen")
    return body


async def _read_body(request: Request) -> bytes:
    """The body as it comes, refused past :data:`MAX_BODY_BYTES` (chunked names no length) or :data:`BODY_S`."""
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(BODY_S):  # a body trickled for ever would hold its place in the queue
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise _too_large()
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(408, "invalid_request_error", f"the request body was still arriving ({size} bytes) after "
                       f"{BODY_S:g} s: send the video as a file:// or https:// URL") from None
    return b"".join(chunks)


async def _watch_disconnect(request: Request, cancel: threading.Event, scope: anyio.CancelScope) -> None:
    """Set ``cancel`` when the client goes away: its harness is stopped, not left to run to its task timeout.

    ``scope`` is cancelled too: a question still waiting for its place leaves the queue (a running one's thread is
    waited for).
    """
    while not await request.is_disconnected():
        await anyio.sleep(DISCONNECT_POLL_S)
    cancel.set()
    scope.cancel()


def _answer(agent: Answerer, q: VideoQuestion, roots: Any, cancel: threading.Event,
            on_step: StepListener | None = None, checked: Path | None = None) -> AgentAnswer | Exception:
    """The answer, or what was raised instead (returned: a task group would wrap it in an ``ExceptionGroup``).

    ``checked``: the video's file, already found (:func:`~videvolve.serving.media.checked_video`).
    """
    try:
        with video_file(q.video, roots, cancel=cancel) if checked is None else nullcontext(checked) as path:
            return naming_the_video(agent.ask(path, q.question, q.options or None, q.grounding, cancel=cancel,
                                              on_step=on_step), q.video)
    except Exception as exc:
        return exc
