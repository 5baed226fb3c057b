"""VLMs behind an OpenAI-compatible server (vLLM is the reference), through langchain-openai.

Failures are classified in :mod:`videvolve.models.http_errors` (transient ones retried for a window, then a clean
stop; a rejected request is that task's error). Before sending, a :class:`~videvolve.models.context.ContextGuard`
refuses a request that would not fit the served context. A clip is sent so that vLLM decodes every one of its
frames, no more, no fewer (:func:`media_request`). Tool calls left in the text are parsed here
(:mod:`videvolve.models.toolcalls`).
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages

from videvolve.config import ModelSettings
from videvolve.errors import UsageError
from videvolve.models.base import Message, Reply, Tool, ToolCall, Usage
from videvolve.models.context import ContextGuard, EndpointInfo, served_model, served_names
from videvolve.models.deadline import total_timeout_client
from videvolve.models.http_errors import EndpointError, RequestRejected, call_with_retries
from videvolve.models.toolcalls import TAG, calls_in_text

__all__ = ["ChatModelVLM", "EndpointError", "media_request", "openai_vlm"]


def _cache_block_types() -> None:
    """Memoize langchain-core's list of data block types (a pure function of static types).

    langchain-core 1.8 recomputes it with ``typing.get_type_hints`` for every content part: 4 ms of client CPU per
    request of 16 captioned frames (bench/solve.py), a quarter of the client's work per task.
    """
    from langchain_core.messages import content

    found = getattr(content, "_get_data_content_block_types", None)
    if callable(found) and not hasattr(found, "cache_info"):
        content._get_data_content_block_types = functools.cache(found)


_cache_block_types()


def _to_langchain(messages: list[Message]) -> list[BaseMessage]:
    fixed = []
    for m in messages:
        m = dict(m)
        if m.get("role") == "assistant" and m.get("tool_calls"):
            m["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                if "function" in c else
                {"id": c["id"], "type": "function", "function": {"name": c["name"],
                                                                 "arguments": json.dumps(c.get("arguments", {}))}}
                for c in m["tool_calls"]
            ]
        fixed.append(m)
    return convert_to_messages(fixed)


VIDEO_BACKEND = "opencv"
"""vLLM's uniform loader (``VideoBackend``, registered as "opencv": vllm/multimodal/video.py:201-239)."""


def media_request(messages: list[Message], family: str | None = None,
                  kwargs: str = "request") -> tuple[list[Message], dict[str, Any]]:
    """Messages without our ``num_frames`` keys, and the ``extra_body`` that makes vLLM decode exactly those frames.

    Our clips hold exactly the metered frames, so the server must decode all of them and the processor keep them
    (vLLM 0.34; the mimic, :mod:`videvolve.models.sim.qwen_rules`, implements the same rules):

    - Left alone, vLLM picks the loader of the checkpoint's video processor (vllm/multimodal/media/connector.py:
      581-585): ``Qwen2VLVideoBackend`` for Qwen2.5-VL, ``Qwen3VLVideoBackend`` for Qwen3-VL
      (vllm/multimodal/video.py:602-681, 362-421). Both ignore ``num_frames`` and sample ``total / fps_src * fps``
      frames (fps default 2, at most 30) clamped to [4, 768]; Qwen2.5-VL floors to an even count. So
      ``{"num_frames": n, "fps": -1}`` alone decodes 4 frames of any clip, and no fps can give an odd count on
      Qwen2.5-VL nor every frame of a clip above 30 fps. Those backends are not the route.
    - A request-level ``video_backend`` is honoured: the checkpoint's is used only when none is given
      (connector.py:582); ``VideoMediaIO.merge_kwargs`` strips it only for GPU backends not configured at start-up
      (vllm/multimodal/media/video.py:58-73). ``"opencv"`` (``VideoBackend``) decodes ``min(num_frames, total)``
      frames, all of them when that is the total (video.py:227-238): with ``num_frames = n`` and ``fps = -1``,
      every frame of our n-frame clip. Naming both keys also drops a server default of either
      (media/video.py:76-83).
    - Every frame decoded marks the metadata ``do_sample_frames: True`` (video.py:180-194). Qwen2.5-VL drops it
      (vllm/model_executor/models/qwen2_5_vl.py:1226-1229; ``Qwen2VLVideoProcessor`` does not sample by default),
      but Qwen3-VL would re-sample at 2 fps (qwen3_vl.py:1101-1133, 1514-1519) unless the request's
      ``mm_processor_kwargs.videos_kwargs.do_sample_frames`` is false, which wins (qwen3_vl.py:1514). It is sent to
      both families (a scoped key, as vLLM's own ``decisions/strategies.py:1177`` sends it), so a checkpoint that
      turns sampling on cannot re-sample either.
    - vLLM refuses both request fields unless started with ``--trust-request-mm-kwargs``
      (vllm/entrypoints/generate/base/protocol.py:72-97). With ``kwargs="server"`` (``--clip-kwargs server``) the
      server was started with the same settings instead (:data:`~videvolve.models.http_errors.SERVER_CLIP_FLAGS`:
      ``num_frames: -1`` there, or ``VideoMediaIO`` passes its default of 32, media/video.py:97-125) and requests
      carry none.
    """
    counts: set[int] = set()
    out: list[Message] = []
    for m in messages:
        content = m.get("content")
        if not isinstance(content, list) or not any(p.get("type") == "video_url" for p in content):
            out.append(m)
            continue
        parts = []
        for p in content:
            if p.get("type") == "video_url" and "num_frames" in p:
                counts.add(int(p["num_frames"]))
                p = {k: v for k, v in p.items() if k != "num_frames"}
            parts.append(p)
        out.append({**m, "content": parts})
    if not counts or kwargs == "server":
        return (out if counts else messages), {}
    if len(counts) > 1:
        raise RequestRejected(f"clips of different frame counts {sorted(counts)} in one request: vLLM's "
                              "media_io_kwargs sets one count per request; send one clip per request")
    video = {"video_backend": VIDEO_BACKEND, "num_frames": counts.pop(), "fps": -1}
    return out, {"media_io_kwargs": {"video": video},
                 "mm_processor_kwargs": {"videos_kwargs": {"do_sample_frames": False}}}


class ChatModelVLM:
    """Any LangChain chat model as a :class:`~videvolve.models.base.VLM` (tests inject scripted ones)."""

    def __init__(self, chat: BaseChatModel, name: str, revision: str = "", where: str = "",
                 decoding: dict[str, Any] | None = None, max_retries: int | None = None,
                 retry_window_s: float = 600.0, family: str | None = None, guard: ContextGuard | None = None,
                 endpoint: EndpointInfo | None = None, request_timeout_s: float | None = None,
                 clip_kwargs: str = "request") -> None:
        self.chat = chat
        self.clip_kwargs = clip_kwargs
        """``request``: a clip's decoding settings go with each request; ``server``: the server starts with them."""
        self.request_timeout_s = request_timeout_s
        """Seconds one attempt may take (the client's timeout): a task's runner lets an attempt fail by it."""
        self.name = name
        self._revision = revision
        self.endpoint = endpoint
        self.where = where
        self._decoding = decoding or {}
        self.max_retries = max_retries
        self.retry_window_s = retry_window_s
        self.family = family
        self.guard = guard

    @property
    def revision(self) -> str:
        """The given revision, and the checkpoint the endpoint serves under this name when that is another name.

        ``vllm serve /models/ckpt-b --served-model-name qwen`` is not ``... ckpt-a --served-model-name qwen``: their
        replies and results are not each other's. The checkpoint is vLLM's ``root`` in ``GET /v1/models``; a model
        served under its own name keeps the revision it had (and the cache keys with it), and so does one not
        reached yet (:meth:`reach` waits for it where that matters).
        """
        known = self.endpoint.get() if self.endpoint is not None else None
        root = known.root if known is not None else None
        if root is None or root == self.name:
            return self._revision
        return f"{self._revision} checkpoint={root}".strip()

    def reach(self) -> None:
        """Ask the endpoint what it serves until it answers, retried as a request is (then :class:`InfraError`)."""
        if self.endpoint is not None:
            self.endpoint.wait(self.where, self.name, self.retry_window_s, self.max_retries)

    def decoding(self) -> dict[str, Any]:
        """Settings that change replies."""
        return dict(self._decoding)

    def served_context(self) -> int | None:
        """The prompt tokens the endpoint takes (its ``max_model_len`` less the guard's margin; None: no guard)."""
        return self.guard.usable() if self.guard is not None else None

    def check_context(self, messages: list[Message], tools: list[Tool] | None) -> int | None:
        """The request's prompt tokens (None: no guard); :class:`~videvolve.errors.ContextTooLong` if too long."""
        return self.guard.check(messages, tools) if self.guard is not None else None

    def _invoke(self, messages: list[BaseMessage], tools: list[Tool] | None, extra: dict[str, Any]) -> AIMessage:
        model: Any = self.chat.bind_tools(tools) if tools else self.chat
        out = model.invoke(messages, **({"extra_body": extra} if extra else {}))
        assert isinstance(out, AIMessage)
        return out

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        """One request: checked against the context, sent with retries of transient failures only."""
        estimate = self.check_context(messages, tools)
        sent, extra = media_request(messages, self.family, self.clip_kwargs)
        lc = _to_langchain(sent)
        out = call_with_retries(lambda: self._invoke(lc, tools, extra), self.where, self.name,
                                self.retry_window_s, self.max_retries)
        reply = reply_of(out)
        reply.prompt_estimate = estimate
        return reply


def reply_of(out: AIMessage) -> Reply:
    """Our reply: parsed calls, calls found in the text, and calls that could not be read (never dropped)."""
    text = out.content if isinstance(out.content, str) else "".join(
        str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in out.content)
    calls = [ToolCall(id=c.get("id") or f"call_{i}", name=c["name"], arguments=dict(c.get("args") or {}))
             for i, c in enumerate(out.tool_calls)]
    invalid = [{"raw": str(c.get("args") or ""), "name": c.get("name"), "error": str(c.get("error") or "invalid")}
               for c in out.invalid_tool_calls]
    if not calls and not invalid and TAG in text:
        text, calls, invalid = calls_in_text(text)
    usage: dict[str, Any] = dict(out.usage_metadata or {})
    return Reply(text=text, tool_calls=calls, invalid_tool_calls=invalid,
                 usage=Usage(prompt_tokens=usage.get("input_tokens"), completion_tokens=usage.get("output_tokens")))


def api_key_of(settings: ModelSettings, api_key: str | None = None) -> str | None:
    """The key from the flag or the environment variable the settings name (never stored)."""
    return api_key or os.environ.get(settings.api_key_env) or None


def with_served_model(settings: ModelSettings, api_key: str | None = None,
                      how: str = "--model NAME") -> ModelSettings:
    """``settings`` with the model named: the one the endpoint serves when no ``--model`` was given.

    vLLM serves one model per process, so naming it again is a chore; when the endpoint lists several, or none, or
    cannot be asked, the command stops here and says what to pass (``how``: the flag, or lmms-eval's model argument);
    nothing is sent under an empty name, and a run stores the name it found, so ``--resume`` asks the same model.
    """
    import httpx

    if settings.backend == "sim" or (settings.model and "model" in settings.model_fields_set):
        return settings
    if not settings.base_url:
        raise UsageError("the openai backend needs --base-url (e.g. http://127.0.0.1:8000/v1 for `vllm serve`)")
    try:
        names = served_names(settings.base_url, api_key_of(settings, api_key), min(settings.timeout_s, 30.0))
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code in (401, 403):
            raise UsageError(f"{settings.base_url} refuses our API key ({exc.response.status_code}): put the server's "
                             f"--api-key in the environment variable {settings.api_key_env}") from None
        raise UsageError(f"no model named, and {settings.base_url}/models answered {exc.response.status_code}; "
                         f"pass {how}") from None
    except httpx.HTTPError as exc:
        raise UsageError(f"no model named, and {settings.base_url}/models could not be asked which model it serves "
                         f"({type(exc).__name__}: {exc}); start the server, or pass {how}") from None
    if len(names) != 1:
        said = f"serves {', '.join(names)}" if names else "lists no model"
        raise UsageError(f"no model named, and {settings.base_url} {said}: pass {how}")
    return settings.model_copy(update={"model": names[0]})


def openai_vlm(settings: ModelSettings, api_key: str | None = None) -> ChatModelVLM:
    """A VLM on an OpenAI-compatible endpoint; the API key comes from the flag or the environment, never stored."""
    from langchain_openai import ChatOpenAI

    from videvolve.models.cost import cost_model

    if not settings.base_url:
        raise UsageError("the openai backend needs --base-url (e.g. http://127.0.0.1:8000/v1 for `vllm serve`)")
    key = api_key_of(settings, api_key)
    chat = ChatOpenAI(base_url=settings.base_url, api_key=key or "EMPTY", model=settings.model,
                      temperature=settings.temperature, max_tokens=settings.max_tokens,
                      timeout=settings.timeout_s, max_retries=0,
                      http_client=total_timeout_client(settings.timeout_s))
    base, model = settings.base_url, settings.model
    endpoint = EndpointInfo(lambda: served_model(base, model, key))
    guard = ContextGuard(cost_model(settings.family, settings.max_pixels), endpoint.max_model_len,
                         settings.context_margin)
    return ChatModelVLM(chat, name=settings.model, revision=settings.revision, where=settings.base_url,
                        max_retries=settings.max_retries,
                        retry_window_s=settings.retry_window_s, family=settings.family, guard=guard,
                        endpoint=endpoint, request_timeout_s=settings.timeout_s,
                        decoding=decoding_of(settings), clip_kwargs=settings.clip_kwargs)


def decoding_of(settings: ModelSettings) -> dict[str, Any]:
    """What decides a reply besides the request: the sampling settings, and the server's image cap where given.

    ``--max-pixels`` names the server's ``--mm-processor-kwargs`` max_pixels, which changes the pixels the model
    sees, so a reply cached under one cap is not another's (left out when not given: keys stay as they were).
    """
    out: dict[str, Any] = {"temperature": settings.temperature, "max_tokens": settings.max_tokens}
    if settings.max_pixels is not None:
        out["server_max_pixels"] = settings.max_pixels
    return out
