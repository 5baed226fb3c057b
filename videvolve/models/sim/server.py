"""SimVLM behind an OpenAI-compatible HTTP API (FastAPI + uvicorn, as vLLM does).

The real client path runs offline: ``/v1/models`` and ``/v1/chat/completions`` with usage counts that include
text tokens. With ``mimic`` settings the server behaves as vLLM 0.34 does (see :mod:`videvolve.models.sim.mimic`);
any :class:`~videvolve.models.base.VLM` can stand behind it (tests put a scripted tool-calling model there).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from videvolve.errors import ModelRequestError
from videvolve.models.base import VLM
from videvolve.models.sim.mimic import Faults, MimicSettings
from videvolve.models.sim.vlm import SimVLM

MAX_BODY_BYTES = 64 * 1024 * 1024


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind, "code": status}})


def create_app(model: str = "simvlm", latency_ms: float = 0.0, api_key: str | None = None,
               max_images: int = 512, family: str = "qwen2.5-vl", mimic: MimicSettings | None = None,
               backend: VLM | None = None, max_pixels: int | None = None) -> FastAPI:
    """The app; ``api_key`` makes it answer 401 to requests without ``Authorization: Bearer <key>``.

    ``family`` and ``max_pixels``: the processor SimVLM sees pictures through (``--mimic`` takes them from its
    settings).
    """
    from videvolve.models.sim.mimic_app import create_mimic_app, simulated_root

    if mimic is not None:
        sees = backend or SimVLM(mimic.family, mimic.mm_processor_kwargs.get("max_pixels"))  # as the server resizes
        return create_mimic_app(model, mimic, sees, api_key, Faults(mimic.fail_first))
    app = FastAPI(title="videvolve serve-sim")
    sim = backend or SimVLM(family, max_pixels)
    stats = {"requests": 0, "prompt_tokens": 0}
    app.state.stats = stats

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Any:
        if api_key is not None and request.headers.get("authorization") != f"Bearer {api_key}":
            return _error(401, "invalid API key", "authentication_error")
        size = int(request.headers.get("content-length") or 0)
        if size > MAX_BODY_BYTES:
            return _error(413, f"request body over {MAX_BODY_BYTES} bytes", "invalid_request_error")
        return await call_next(request)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "videvolve",
                                            "root": simulated_root(model, sim), "max_model_len": 131072}]}

    @app.get("/stats")
    async def get_stats() -> dict[str, int]:
        return dict(stats)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return _error(413, f"request body over {MAX_BODY_BYTES} bytes", "invalid_request_error")
        try:
            payload = await request.json()
        except ValueError:
            return _error(400, "the body is not JSON", "invalid_request_error")
        if payload.get("model") != model:
            return _error(404, f"The model `{payload.get('model')}` does not exist.", "NotFoundError")
        messages = payload.get("messages")
        if not isinstance(messages, list):
            return _error(400, "messages must be a list", "invalid_request_error")
        n_images = sum(1 for m in messages if isinstance(m.get("content"), list)
                       for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url")
        if n_images > max_images:
            return _error(400, f"At most {max_images} image(s) may be provided in one request.",
                          "invalid_request_error")
        if latency_ms:
            await asyncio.sleep(latency_ms / 1000)
        stats["requests"] += 1
        try:
            reply = await run_in_threadpool(sim.complete, messages, payload.get("tools"))
        except ModelRequestError as exc:
            return _error(400, str(exc), "invalid_request_error")
        except (KeyError, TypeError, AttributeError) as exc:
            raise HTTPException(status_code=400, detail=f"malformed messages: {exc}") from exc
        prompt, completion = reply.usage.prompt_tokens or 0, reply.usage.completion_tokens or 0
        stats["prompt_tokens"] += prompt
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply.text}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }

    return app


def serve(host: str = "127.0.0.1", port: int = 8000, **kwargs: Any) -> None:
    """Run the server until interrupted."""
    import uvicorn

    uvicorn.run(create_app(**kwargs), host=host, port=port, log_level="warning")
