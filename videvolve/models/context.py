"""A request's prompt tokens estimated before it is sent, and checked against the served context length.

The cost model prices each image (its size read from the data URL's header) and each clip (its ``num_frames`` and
size); text is about four characters a token plus the chat template's few tokens per message. A request over the
served ``max_model_len`` less a safety margin is refused here (a ``budget`` error naming both numbers) rather than
by the server.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from PIL import Image

from videvolve.models.base import Message, Tool
from videvolve.models.cost import CostModel
from videvolve.models.deadline import total_timeout_client
from videvolve.models.http_errors import ContextTooLong, call_with_retries

_HEADER_CHARS = 4 * 16384  # 48 KiB of base64: enough for a PNG's or a JPEG's size


def _data(url: str, whole: bool) -> bytes:
    payload = url.partition(",")[2]
    if not whole:
        payload = payload[:_HEADER_CHARS]
    try:
        return base64.b64decode(payload[: len(payload) // 4 * 4])
    except (binascii.Error, ValueError):
        return b""


def image_size(url: str) -> tuple[int, int] | None:
    """(width, height) of an image data URL, from its header; None when it cannot be read."""
    try:
        with Image.open(io.BytesIO(_data(url, whole=False))) as image:
            return image.size
    except (OSError, ValueError):
        return None


def video_info(url: str) -> tuple[int, int, float] | None:
    """(width, height, fps) of a video data URL; None when it cannot be read."""
    import av

    try:
        with av.open(io.BytesIO(_data(url, whole=True))) as container:
            stream = container.streams.video[0]
            return stream.width, stream.height, float(stream.average_rate or 1.0)
    except (av.FFmpegError, IndexError, ValueError):
        return None


def estimate_prompt_tokens(messages: list[Message], tools: list[Tool] | None, cost: CostModel) -> int:
    """The prompt tokens a Qwen-VL server will count for this request (visual parts exactly, text roughly)."""
    chars = len(json.dumps(tools)) if tools else 0
    visual = 0
    for m in messages:
        content = m.get("content")
        if not isinstance(content, list):
            chars += len(str(content or "")) + (len(json.dumps(m["tool_calls"])) if m.get("tool_calls") else 0)
            continue
        for p in content:
            kind = p.get("type")
            if kind == "image_url":
                size = image_size(str((p.get("image_url") or {}).get("url", "")))
                visual += cost.image_tokens(*size) if size else 0
            elif kind == "video_url":
                info = video_info(str((p.get("video_url") or {}).get("url", "")))
                frames = int(p.get("num_frames") or 32)
                visual += cost.video_tokens(info[0], info[1], frames, info[2]) if info else 0
            else:
                chars += len(str(p.get("text", "")))
    return 4 * len(messages) + 3 + math.ceil(chars / 4) + visual


class ContextGuard:
    """Refuses requests that would not fit ``max_model_len`` (read from ``/v1/models``) less ``margin``."""

    def __init__(self, cost: CostModel, max_model_len: Callable[[], int | None], margin: float = 0.05) -> None:
        self.cost = cost
        self.margin = margin
        self._fetch = max_model_len

    def limit(self) -> int | None:
        """The served context length (None: not reported, or not known yet; :class:`EndpointInfo` asks once)."""
        return self._fetch()

    def usable(self) -> int | None:
        """The prompt tokens a request may use: the served context less the margin (None while unknown)."""
        limit = self.limit()
        return None if limit is None else math.floor(limit * (1 - self.margin))

    def check(self, messages: list[Message], tools: list[Tool] | None) -> int:
        """The estimate; raises :class:`ContextTooLong` when it does not fit."""
        estimate = estimate_prompt_tokens(messages, tools, self.cost)
        limit, usable = self.limit(), self.usable()
        if limit is not None and usable is not None and estimate > usable:
            raise ContextTooLong(f"the request needs about {estimate} prompt tokens but the server's context is "
                                 f"{limit} tokens ({usable} usable with a {self.margin:.0%} margin); not sent. "
                                 "Show fewer or smaller frames, or serve a longer --max-model-len.")
        return estimate


@dataclass(frozen=True)
class ServedModel:
    """What ``GET /v1/models`` says of one served model (vLLM: ``entrypoints/openai/serving_models.py``)."""

    max_model_len: int | None = None
    """Its context length (None: not reported, as servers other than vLLM do)."""
    root: str | None = None
    """The checkpoint behind the served name (vLLM: the model path, also under ``--served-model-name``)."""


BUSY = frozenset({408, 429, 502, 503, 504})
"""Statuses of ``GET /v1/models`` that say "not now" (a server or a proxy before it restarting or overloaded)."""


def served_model(base_url: str, model: str, api_key: str | None, timeout: float = 10.0) -> ServedModel:
    """What the endpoint reports of ``model`` (empty when it reports nothing readable of it).

    Raises :class:`httpx.TransportError` when the endpoint cannot be reached, and :class:`httpx.HTTPStatusError`
    when it (or a proxy before it) answers that it is busy or restarting (:data:`BUSY`): ask again later.
    """
    try:
        data = _listed(base_url, api_key, timeout)
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code in BUSY:
            raise
        return ServedModel()
    except httpx.DecodingError:
        return ServedModel()  # answered, but not in the encoding it says
    card = next((m for m in data if isinstance(m, dict) and m.get("id") == model), None) \
        if isinstance(data, list) else None
    if card is None:
        return ServedModel()
    length, root = card.get("max_model_len"), card.get("root")
    usable = isinstance(length, int) and not isinstance(length, bool) and length > 0  # else no length at all
    return ServedModel(max_model_len=length if usable else None,
                       root=root if isinstance(root, str) and root else None)


def served_names(base_url: str, api_key: str | None, timeout: float = 10.0) -> list[str]:
    """The model names ``GET /v1/models`` lists (raises :class:`httpx.HTTPError` when it does not answer)."""
    return list(dict.fromkeys(m["id"] for m in model_cards(_listed(base_url, api_key, timeout))))


def _listed(base_url: str, api_key: str | None, timeout: float) -> Any:
    """The ``data`` of ``GET /v1/models`` (None: answered, but nothing readable, e.g. a body nested too deep).

    Raises :class:`httpx.HTTPError` when it does not answer.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        return json.loads(_models_body(f"{base_url.rstrip('/')}/models", headers, timeout)).get("data", [])
    except (ValueError, AttributeError, RecursionError):
        return None


def model_cards(data: Any) -> list[dict[str, Any]]:
    """The entries of a ``/v1/models`` ``data`` that name a model: a blank id names none, whatever a proxy lists."""
    return [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"].strip()] \
        if isinstance(data, list) else []


MAX_MODELS_BYTES = 4 * 1024 * 1024
"""The most of a ``GET /v1/models`` body read (vLLM's is a few hundred bytes a model): more is nothing readable."""


def _models_body(url: str, headers: dict[str, str], timeout: float) -> bytes:
    """The body of ``GET url``, read within ``timeout`` in all and at most :data:`MAX_MODELS_BYTES`.

    :func:`total_timeout_client`: a body trickled a byte at a time would otherwise hold every request waiting on it.
    """
    body = bytearray()
    with total_timeout_client(timeout) as client, client.stream("GET", url, headers=headers) as r:
        r.raise_for_status()
        for chunk in r.iter_bytes():
            body += chunk
            if len(body) > MAX_MODELS_BYTES:
                raise ValueError(f"{url} sent more than {MAX_MODELS_BYTES} bytes")  # nothing readable
    return bytes(body)


RECHECK_S = 10.0
"""How long what the endpoint said stands: then it is asked again. A vLLM restarted at the same address with another
checkpoint under the served name, or another ``--max-model-len``, behind a ``serve``, an ``mcp`` or an overnight run
that keeps its client, is seen at the first request after that (vLLM takes far longer to load a checkpoint)."""


class EndpointInfo:
    """:func:`served_model`, asked at the first need, again after :data:`RECHECK_S`, and while it cannot be reached.

    What the endpoint said stands for :data:`RECHECK_S` (not asked before every request); an endpoint that cannot be
    reached or is busy when asked again knows nothing (None) until it answers: what it serves may have changed.
    """

    def __init__(self, fetch: Callable[[], ServedModel]) -> None:
        self._fetch = fetch
        self._known: ServedModel | None = None
        self._asked_at = 0.0
        self._lock = threading.Lock()
        self._unreached: httpx.HTTPError | None = None

    def get(self) -> ServedModel | None:
        """What the endpoint said, or None while it could not be asked."""
        with self._lock:
            if self._known is None or time.monotonic() - self._asked_at >= RECHECK_S:
                try:
                    known = self._fetch()
                except (httpx.TransportError, httpx.HTTPStatusError) as exc:  # not reached, or busy
                    self._known, self._unreached = None, exc
                    return None
                self._known, self._asked_at = known, time.monotonic()
            return self._known

    def wait(self, where: str, model: str, window_s: float, max_retries: int | None = None) -> ServedModel:
        """What the endpoint said, asked again as a failing request is retried (then :class:`InfraError`).

        For what must not be guessed while the endpoint is not reached yet: the checkpoint that keys replies and
        results (a server still loading is not one that serves the name itself).
        """
        def ask() -> ServedModel:
            known = self.get()
            if known is None:
                raise self._unreached or httpx.ConnectError("not reached")
            return known

        return call_with_retries(ask, where, model, window_s, max_retries)

    def max_model_len(self) -> int | None:
        """The served context length (None: not reported, or not known yet)."""
        known = self.get()
        return known.max_model_len if known is not None else None
