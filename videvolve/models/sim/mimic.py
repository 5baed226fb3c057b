"""What ``serve-sim --mimic vllm`` does the way vLLM 0.34 does it: media decoding, limits, token counts, tool calls.

Each behaviour follows vLLM's source (``multimodal/media``, ``multimodal/processing/context.py``,
``renderers/params.py``, ``tool_parsers/hermes_tool_parser.py``, ``chat_completion/message_assembly.py``) and is
switched by a flag named like vLLM's own. Faults (503 bursts, slow replies, a restart window) are injected here too.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
import threading
import time
import uuid
from typing import Any

import av
from PIL import Image
from pydantic import BaseModel, Field

from videvolve.errors import VidevolveError
from videvolve.models.base import Reply
from videvolve.models.sim import qwen_rules

_HERMES = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


class MimicSettings(BaseModel):
    """vLLM's flags the mimic honours (None: off, as in vLLM)."""

    family: str = "qwen2.5-vl"
    max_model_len: int = 131072
    checkpoint: str | None = None
    """The model path served under the name (``vllm serve PATH --served-model-name NAME``; None: the name itself),
    reported as ``root`` by ``GET /v1/models``."""
    limit_mm_per_prompt: dict[str, int] = Field(default_factory=lambda: {"image": 999, "video": 999})
    enable_auto_tool_choice: bool = False
    tool_call_parser: str | None = None
    media_io_kwargs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    mm_processor_kwargs: dict[str, Any] = Field(default_factory=dict)
    """``--mm-processor-kwargs``: ``max_pixels`` caps an image's pixels (and, on Qwen2.5-VL, each video frame's,
    whose processor resizes frames as images); Qwen3-VL's video budget is its own."""
    enable_prompt_tokens_details: bool = False
    trust_request_mm_kwargs: bool = False
    """``--trust-request-mm-kwargs``: without it a request's ``mm_processor_kwargs`` or ``media_io_kwargs`` is a 400."""
    fail_first: int = 0
    """Answer 503 to the first N chat requests."""
    slow_ms: float = 0.0
    retry_after: float | None = None
    """Send ``Retry-After`` (seconds) with every 503."""


class MimicError(VidevolveError):
    """A vLLM-shaped error reply."""

    def __init__(self, status: int, message: str, kind: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param

    def body(self) -> dict[str, Any]:
        """The body of vLLM's ``ErrorResponse``."""
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.status}}


class Faults:
    """Injected failures: a burst of 503s, then windows of unavailability opened at run time (a restart)."""

    def __init__(self, fail_first: int = 0) -> None:
        self._lock = threading.Lock()
        self.burst = fail_first
        self.down_until = 0.0
        self.armed = 0.0
        """A restart window's length, opened by the next chat request (0: none armed)."""
        self.failed = 0
        self.rejects: list[int] = []
        """Statuses the next requests get (after counting, before decoding): a 422 or 413 on demand."""
        self.dead = 0
        """Chat requests still to answer as a dead engine (500; ``/health`` 503 meanwhile)."""

    def open_window(self, seconds: float) -> None:
        """Answer 503 for ``seconds`` seconds from the next chat request on (the server is restarting).

        The window starts with a request, not with this call, so a client that is slow to start still meets all
        of it: a fault window started by the clock makes tests flaky on a loaded machine.
        """
        with self._lock:
            self.armed = seconds

    def reject_now(self) -> int | None:
        """A status queued for this request, if any."""
        with self._lock:
            return self.rejects.pop(0) if self.rejects else None

    def die_now(self) -> bool:
        """Whether this request meets a dead engine."""
        with self._lock:
            if self.dead > 0:
                self.dead -= 1
                self.failed += 1
                return True
        return False

    def fail_now(self) -> bool:
        """Whether this request gets a 503."""
        with self._lock:
            if self.burst > 0:
                self.burst -= 1
                self.failed += 1
                return True
            if self.armed:
                self.down_until, self.armed = time.monotonic() + self.armed, 0.0
            if time.monotonic() < self.down_until:
                self.failed += 1
                return True
        return False


def merge_video_kwargs(defaults: dict[str, Any], request: dict[str, Any] | None) -> dict[str, Any]:
    """``VideoMediaIO.merge_kwargs``: a request's num_frames without fps drops the default fps, and vice versa."""
    merged = {**defaults, **(request or {})}
    if request:
        if "num_frames" in request and "fps" not in request:
            merged.pop("fps", None)
        elif "fps" in request and "num_frames" not in request:
            merged.pop("num_frames", None)
    return merged


VLLM_NOT_BASE64 = "Only base64 data URLs are supported for now."
"""vLLM 0.34's own words for a data URL that is not base64 (multimodal/media/connector.py:341-343), verbatim."""


def _data_bytes(url: Any, param: str) -> bytes:
    """A data URL's bytes, as ``MediaConnector._load_data_url`` reads them (multimodal/media/connector.py:328-346).

    Bad base64 is pybase64's ``binascii.Error``, a ValueError, hence a 400 (serve/exception_handling/error_response.py:
    80-83).
    """
    if not isinstance(url, str) or not url[:5].lower() == "data:":
        raise MimicError(400, "the mimic server takes base64 data URLs only", "BadRequestError", param)
    spec, sep, data = url[5:].partition(",")
    if not sep:
        raise MimicError(400, f"Invalid data URL {url[:32]!r}: missing ',' separator.", "BadRequestError", param)
    if not spec.endswith(";base64"):  # vLLM raises NotImplementedError here, answered 501 (error_response.py:84-87)
        raise MimicError(501, VLLM_NOT_BASE64, "NotImplementedError")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MimicError(400, str(exc), "BadRequestError") from exc


def decode_image(url: Any) -> Image.Image:
    """An image data URL, or vLLM's 400 ``Failed to load image: ...`` (multimodal/media/image.py:97-108)."""
    raw = _data_bytes(url, "image_url")
    try:
        image = Image.open(io.BytesIO(raw))
        image.load()
        return image.convert("RGB")
    except (OSError, SyntaxError, RuntimeError, ValueError) as exc:
        raise MimicError(400, f"Failed to load image: {exc}", "BadRequestError") from exc


def decode_video(url: Any) -> tuple[int, float, int, int]:
    """A video data URL's (frames, frame rate, width, height), as vLLM's OpenCV decoder reads them.

    400 ``Could not open video stream`` when it does not open (multimodal/video_decoders/opencv.py:71-76).
    """
    raw = _data_bytes(url, "video_url")
    try:
        with av.open(io.BytesIO(raw), mode="r") as container:
            stream = container.streams.video[0]
            sizes = [(f.width, f.height) for f in container.decode(stream)]
            rate = float(stream.average_rate or stream.guessed_rate or 0)
    except (av.FFmpegError, IndexError, ValueError) as exc:
        raise MimicError(400, "Could not open video stream", "BadRequestError") from exc
    if not sizes:
        raise MimicError(400, "Could not determine the number of video frames", "BadRequestError")
    return len(sizes), rate, *sizes[0]


def check_request_mm_kwargs(payload: dict[str, Any], s: MimicSettings) -> None:
    """Refuse per-request multimodal kwargs unless started with ``--trust-request-mm-kwargs``, as vLLM 0.34 does.

    vllm/entrypoints/generate/base/protocol.py:72-97, called for every chat request by
    vllm/renderers/online_renderer.py:792-796; a ``VLLMValidationError`` is a 400 ``BadRequestError`` naming the
    parameter (vllm/entrypoints/serve/exception_handling/error_response.py:43-46).
    """
    if s.trust_request_mm_kwargs:
        return
    for param, what in (("mm_processor_kwargs", "multimodal preprocessing"), ("media_io_kwargs",
                                                                             "multimodal media loading")):
        if payload.get(param):
            raise MimicError(400, f"Per-request {param} are disabled by default because they can change {what} "
                             "resource usage. Start the server with --trust-request-mm-kwargs only when clients are "
                             "trusted.", "BadRequestError", param)


def check_tool_choice(payload: dict[str, Any], s: MimicSettings) -> None:
    """The 400 vLLM gives for tools the server cannot parse.

    Tools without ``tool_choice`` default it to "auto" (entrypoints/openai/chat_completion/protocol.py:990-992); with
    no tool parser loaded, "auto" needs ``--enable-auto-tool-choice`` and ``--tool-call-parser``, and "required" or
    a named tool needs ``--tool-call-parser`` (renderers/online_renderer.py:264-290).
    """
    tools = payload.get("tools") or None
    choice = payload.get("tool_choice", "auto" if tools else None)
    if choice in (None, "none"):
        return
    if s.tool_call_parser is None:
        if choice == "auto" and not s.enable_auto_tool_choice:
            raise MimicError(400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to '
                             "be set", "BadRequestError")
        if choice != "auto":
            named = isinstance(choice, dict) and (choice.get("function") or {}).get("name")
            desc = f'function "{named}"' if named else f'"{choice}"'
            raise MimicError(400, f"tool_choice={desc} requires --tool-call-parser to be set", "BadRequestError")


class Prepared(BaseModel):
    """A request after the multimodal processor: what the model sees and what it costs."""

    prompt_tokens: int
    mm_tokens: int
    videos: list[dict[str, Any]] = Field(default_factory=list)
    """Per video: the loader that decoded it, frames it decoded and frames the processor kept."""


def _sampling_kwargs(payload: dict[str, Any], s: MimicSettings) -> tuple[bool | None, float | None]:
    """(do_sample_frames, fps) the server's ``--mm-processor-kwargs`` and the request give the video processor.

    The request's keys win over the server's, scoped ``videos_kwargs`` over flat keys (``get_merged_mm_kwargs``,
    multimodal/processing/context.py:376-400).
    """
    request = payload.get("mm_processor_kwargs") or {}
    kwargs = {**s.mm_processor_kwargs, **request}
    scoped = {**(s.mm_processor_kwargs.get("videos_kwargs") or {}), **(request.get("videos_kwargs") or {})}
    sample = scoped.get("do_sample_frames", kwargs.get("do_sample_frames"))
    fps = scoped.get("fps", kwargs.get("fps"))
    return (None if sample is None else bool(sample)), (None if fps is None else float(fps))


def prepare(payload: dict[str, Any], s: MimicSettings) -> Prepared:
    """Count items against ``--limit-mm-per-prompt``, decode media, count tokens, check ``--max-model-len``."""
    proc = qwen_rules.capped(qwen_rules.PROCESSORS[s.family], s.mm_processor_kwargs.get("max_pixels"))
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise MimicError(400, "messages must be a non-empty list", "BadRequestError", "messages")
    parts = [p for m in messages if isinstance(m, dict) and isinstance(m.get("content"), list)
             for p in m["content"] if isinstance(p, dict)]
    for modality in ("image", "video"):
        n = sum(1 for p in parts if p.get("type") == f"{modality}_url")
        limit = s.limit_mm_per_prompt.get(modality, 999)
        if n > limit:
            raise MimicError(400, f"At most {limit} {modality}(s) may be provided in one prompt. Set "
                             "`--limit-mm-per-prompt` to increase this limit.", "BadRequestError", modality)
    check_request_mm_kwargs(payload, s)
    video_kwargs = merge_video_kwargs(s.media_io_kwargs.get("video", {}),
                                      (payload.get("media_io_kwargs") or {}).get("video"))
    # connector.py:581-585: the checkpoint's loader only when neither the server nor the request names one
    backend = str(video_kwargs.pop("video_backend", None) or qwen_rules.VIDEO_BACKENDS[s.family])
    sample, sampled_fps = _sampling_kwargs(payload, s)
    text = json.dumps(payload.get("tools") or []) if payload.get("tools") else ""
    mm_tokens, videos = 0, []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list):
            if isinstance(m, dict):
                text += str(content or "") + (json.dumps(m["tool_calls"]) if m.get("tool_calls") else "")
            continue
        for p in content:
            if p.get("type") == "image_url":
                image = decode_image((p.get("image_url") or {}).get("url"))
                mm_tokens += qwen_rules.image_tokens(proc, *image.size)
            elif p.get("type") == "video_url":
                total, rate, w, h = decode_video((p.get("video_url") or {}).get("url"))
                fps = video_kwargs.get("fps")
                try:
                    loaded = qwen_rules.loader_indices(backend, total, rate, int(video_kwargs.get("num_frames", 32)),
                                                       None if fps is None else float(fps))
                except qwen_rules.LoaderError as exc:
                    raise MimicError(400, str(exc), "BadRequestError") from exc
                kept = qwen_rules.processor_indices(proc, loaded, total, rate or 24.0, sample, sampled_fps)
                if (refusal := qwen_rules.video_refusal(proc, len(kept))) is not None:
                    raise MimicError(400, refusal, "BadRequestError")
                mm_tokens += qwen_rules.video_tokens(proc, w, h, kept, rate or 24.0)
                videos.append({"backend": backend, "loaded": len(loaded), "kept": len(kept)})
            else:
                text += str(p.get("text", ""))
    prompt_tokens = 4 * len(messages) + 3 + qwen_rules.text_tokens(text) + mm_tokens
    check_context(prompt_tokens, s.max_model_len, media=mm_tokens > 0)
    return Prepared(prompt_tokens=prompt_tokens, mm_tokens=mm_tokens, videos=videos)


def check_context(prompt_tokens: int, max_model_len: int, media: bool) -> None:
    """The refusals (as vLLM words them) of a prompt that does not leave one token to generate.

    Text alone is checked when tokenized (renderers/params.py:533-552); with media the placeholders expand later and
    ``get_max_tokens`` refuses (entrypoints/serve/utils/api_utils.py:248-252). A prompt of exactly
    ``max_model_len`` tokens leaves ``max_tokens`` 0, which ``SamplingParams`` refuses (sampling_params.py:695-700).
    """
    if prompt_tokens > max_model_len and not media:
        raise MimicError(400, f"This model's maximum context length is {max_model_len} tokens. However, your "
                         f"prompt contains {prompt_tokens} input tokens, which exceeds this limit even without any "
                         "output tokens. Please reduce the length of the input prompt.", "BadRequestError",
                         "input_tokens")
    if prompt_tokens > max_model_len:
        raise MimicError(400, f"Input length ({prompt_tokens}) exceeds model's maximum context length "
                         f"({max_model_len}).", "BadRequestError")
    if prompt_tokens == max_model_len:
        raise MimicError(400, "max_tokens must be at least 1, got 0.", "BadRequestError", "max_tokens")


def hermes_text(reply: Reply) -> str:
    """What the model generates: its text, then each call as ``<tool_call>{"name", "arguments"}</tool_call>``."""
    calls = "".join(f"<tool_call>\n{json.dumps({'name': c.name, 'arguments': c.arguments})}\n</tool_call>"
                    for c in reply.tool_calls)
    return (reply.text + ("\n" if reply.text and calls else "") + calls) if calls else reply.text


def parse_hermes(text: str) -> tuple[str | None, list[dict[str, Any]]] | None:
    """The hermes parser's result: (content before the first call, calls); None when there is none or it fails.

    On a failure vLLM returns the raw text.
    """
    if "<tool_call>" not in text:
        return None
    try:
        raw = [json.loads(a or b) for a, b in _HERMES.findall(text)]
        calls = [{"id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}", "type": "function",
                  "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)}}
                 for c in raw]
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    content = text[: text.find("<tool_call>")]
    return content or None, calls


def message_of(payload: dict[str, Any], generated: str, s: MimicSettings) -> dict[str, Any]:
    """The assistant message: tool calls only with auto tool choice, a hermes parser and tools in the request."""
    auto = s.enable_auto_tool_choice and s.tool_call_parser == "hermes"
    if auto and payload.get("tools") and payload.get("tool_choice", "auto") == "auto":
        parsed = parse_hermes(generated)
        if parsed is not None:
            return {"role": "assistant", "content": parsed[0], "tool_calls": parsed[1]}
    return {"role": "assistant", "content": generated, "tool_calls": []}
