"""The HTTP app of ``serve-sim --mimic vllm``: vLLM 0.34's routes, auth, errors and usage, over any VLM.

Besides vLLM's routes it serves ``GET /mimic/stats`` (requests, prompt tokens, the frames each video was decoded to) and
``POST /mimic/faults`` (``{"unavailable_s": 20}`` opens a restart window of 503s from the next request on, ``{"burst":
3}`` fails the next three requests, ``{"status": 422, "count": 1}`` rejects the next one, ``{"dead": 2}`` answers the
next two chat requests as a dead engine does: 500 with ``EngineDeadError.CLIENT_MESSAGE`` while ``/health`` answers 503,
entrypoints/serve/instrumentator/health.py:23-33), unauthenticated like vLLM's ``/health``. vLLM itself sends no
``Retry-After`` anywhere; ``MimicSettings.retry_after`` adds one only to test a proxy that does.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from videvolve.errors import ModelRequestError
from videvolve.models.base import VLM
from videvolve.models.sim import qwen_rules
from videvolve.models.sim.mimic import (
    Faults,
    MimicError,
    MimicSettings,
    check_tool_choice,
    hermes_text,
    message_of,
    prepare,
)


def _unavailable(retry_after: float | None) -> JSONResponse:
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else None
    body = MimicError(503, "The server is restarting; try again later.", "ServiceUnavailableError").body()
    return JSONResponse(status_code=503, content=body, headers=headers)


def simulated_root(model: str, backend: VLM) -> str:
    """The ``root`` a simulated model is served under: its revision's, as a checkpoint's path is vLLM's.

    Clients key replies and results by it (:attr:`ChatModelVLM.revision`): replies SimVLM gave before a revision
    changed its answers are not reused over HTTP any more than in-process.
    """
    revision = getattr(backend, "revision", None)
    return f"{model}@{type(backend).__name__}-revision-{revision}" if isinstance(revision, str) and revision \
        else model


def create_mimic_app(model: str, s: MimicSettings, backend: VLM, api_key: str | None, faults: Faults) -> FastAPI:
    """The app (one served model, named ``model``)."""
    app = FastAPI(title="videvolve serve-sim --mimic vllm")
    lock = threading.Lock()
    stats: dict[str, Any] = {"requests": 0, "served": 0, "prompt_tokens": 0, "videos": [], "prompts": []}
    app.state.stats, app.state.faults = stats, faults

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Any) -> Any:
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if api_key is not None and request.url.path.startswith("/v1") and not (
                scheme.lower() == "bearer" and secrets.compare_digest(token, api_key)):
            return JSONResponse(content={"error": "Unauthorized"}, status_code=401)
        return await call_next(request)

    @app.get("/health")
    async def health() -> Response:
        # an empty 200, or 503 while the engine is dead (entrypoints/serve/instrumentator/health.py:23-33)
        return Response(status_code=503 if faults.dead else 200)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        root = s.checkpoint or simulated_root(model, backend)  # read each time: a test swaps the checkpoint
        return {"object": "list", "data": [{"id": model, "object": "model", "created": int(time.time()),
                                            "owned_by": "vllm", "root": root, "parent": None,
                                            "max_model_len": s.max_model_len}]}

    @app.get("/mimic/stats")
    async def get_stats() -> dict[str, Any]:
        with lock:
            return {**stats, "failed": faults.failed}

    @app.post("/mimic/faults")
    async def set_faults(request: Request) -> dict[str, Any]:
        body = await request.json()
        if body.get("unavailable_s"):
            faults.open_window(float(body["unavailable_s"]))
        faults.burst += int(body.get("burst", 0))
        faults.rejects += [int(body["status"])] * int(body.get("count", 1)) if body.get("status") else []
        faults.dead += int(body.get("dead", 0))
        return {"ok": True}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        with lock:
            stats["requests"] += 1
        if faults.fail_now():
            return _unavailable(s.retry_after)
        if faults.die_now():
            return JSONResponse(status_code=500, content=MimicError(
                500, "The server had an error while processing your request.", "InternalServerError").body())
        if s.slow_ms:
            await asyncio.sleep(s.slow_ms / 1000)
        try:
            payload = await request.json()
        except ValueError:
            return JSONResponse(status_code=400, content=MimicError(400, "the body is not JSON",
                                                                    "BadRequestError").body())
        status = faults.reject_now()
        if status is not None:
            return JSONResponse(status_code=status, content=MimicError(
                status, f"Failed to load media from data URL (fault injected: {status})",
                "UnprocessableEntityError" if status == 422 else "BadRequestError").body())
        try:
            return await run_in_threadpool(_complete, payload)
        except MimicError as exc:
            return JSONResponse(status_code=exc.status, content=exc.body())

    def _complete(payload: dict[str, Any]) -> dict[str, Any]:
        if payload.get("model") != model:  # entrypoints/serve/engine/serving.py:75-84
            raise MimicError(404, f"The model `{payload.get('model')}` does not exist. Valid aliases: {model}.",
                             "NotFoundError", "model")
        check_tool_choice(payload, s)
        prepared = prepare(payload, s)
        try:
            reply = backend.complete(payload["messages"], payload.get("tools"))
        except ModelRequestError as exc:
            raise MimicError(400, str(exc), "BadRequestError") from exc
        generated = hermes_text(reply)
        message = message_of(payload, generated, s)
        completion = qwen_rules.text_tokens(generated)
        with lock:
            stats["served"] += 1
            stats["prompt_tokens"] += prepared.prompt_tokens
            stats["prompts"].append(prepared.prompt_tokens)
            stats["videos"] += prepared.videos
        usage: dict[str, Any] = {"prompt_tokens": prepared.prompt_tokens, "completion_tokens": completion,
                                 "total_tokens": prepared.prompt_tokens + completion}
        if s.enable_prompt_tokens_details:
            usage["prompt_tokens_details"] = {"cached_tokens": 0}
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": model, "usage": usage,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if message["tool_calls"] else "stop"}]}

    return app
