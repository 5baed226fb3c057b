"""Settings, with a one-line why for each field. A run saves its resolved settings; they are never state."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ModelSettings(BaseModel):
    """Which model answers, and how it is reached."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["sim", "openai"] = Field("sim", description="sim: offline SimVLM; openai: any OpenAI-compatible "
                                              "server such as vLLM")
    model: str = Field("simvlm", description="model name as the server knows it (openai backend: "
                       "the one /v1/models lists when not given)")
    base_url: str | None = Field(None, description="e.g. http://127.0.0.1:8000/v1 for `vllm serve`")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the API key (never stored)")
    family: str = Field("qwen2.5-vl", description="visual-token formula: qwen2.5-vl (f=28) or qwen3-vl (f=32)")
    max_pixels: int | None = Field(None, ge=3136, description="the server's `--mm-processor-kwargs` max_pixels, "
                                   "where it sets one: a larger image (on qwen2.5-vl, each frame of a clip too) is "
                                   "resized to it by the server, and metered so (None: the checkpoint's own limits)")
    revision: str = Field("", description="what the server's weights are (a checkpoint hash, a tag), when its model "
                          "name and path do not say it: part of the response cache's and stored results' keys, so "
                          "replies of other weights under the same name (another --revision, --quantization, --dtype "
                          "or --chat-template, or a checkpoint retrained in place) are never reused",
                          json_schema_extra={"flag": "--model-revision"})
    clip_kwargs: Literal["request", "server"] = Field(
        "request", description="how the server learns to decode a clip sent as a video (--clip-mode video) frame for "
        "frame: request: each request carries media_io_kwargs and mm_processor_kwargs (vLLM needs "
        "--trust-request-mm-kwargs; serve-vllm sets it); server: it was started with them (docs/reference/vllm.md), "
        "requests carry none")
    temperature: float = Field(0.0, ge=0, allow_inf_nan=False, description="0 makes replies repeatable and cacheable")
    max_tokens: int = Field(1024, ge=1, description="reply length cap")
    timeout_s: float = Field(120.0, gt=0, allow_inf_nan=False, description="seconds per model request",
                             json_schema_extra={"flag": "--timeout"})
    max_retries: int | None = Field(None, ge=0, description="at most this many retries of transient failures "
                                    "(connection, timeout, 408, 409, 429, 5xx); None: as many as --retry-window allows")
    retry_window_s: float = Field(600.0, ge=0, allow_inf_nan=False, description="seconds transient failures are "
                                  "retried before the run stops cleanly for --resume (a vLLM restart must not end an "
                                  "overnight run)",
                                  json_schema_extra={"flag": "--retry-window"})
    context_margin: float = Field(0.05, ge=0, lt=1, description="share of the served max_model_len kept free: a "
                                  "request estimated beyond the rest is a budget error, never sent")


class RuntimeSettings(BaseModel):
    """How harnesses run: sandbox limits, metering, and what is sent to the model."""

    model_config = ConfigDict(extra="forbid")

    budget: int | None = Field(None, ge=1, description="per-task cap on distinct frames shown to the model (None: no "
                               "cap)")
    image_format: Literal["png", "jpeg"] = Field("png", description="png is lossless; jpeg makes requests smaller")
    jpeg_quality: int = Field(90, ge=30, le=100)
    clip_mode: Literal["frames", "video"] = Field("frames", description="clips as images, or as one video_url part "
                                                  "with num_frames set to the metered frames")
    wall_seconds: float = Field(900.0, gt=0, allow_inf_nan=False, description="seconds of the harness's own time "
                                "before its task is a timeout (model calls, and the decoding they need, are off its "
                                "clock; a task takes 4x this at most)",
                                json_schema_extra={"flag": "--task-timeout"})
    memory_bytes: int = Field(2 * 1024**3, gt=0, description="address-space limit of the harness process")
    concurrency: int = Field(4, ge=1, description="tasks run at once (threads, or Ray tasks on the whole cluster)")
    warm_sandboxes: bool = Field(True, description="start each task's sandbox ahead of time (as many waiting as "
                                 "--concurrency; each runs one task only)")
    allow_weak_sandbox: bool = Field(False, description="where bubblewrap cannot run, run harness code under "
                                     "`unshare` anyway (no network interface, but it can then read every file the "
                                     "unprivileged user can, write in /tmp, /dev/shm and every world-writable "
                                     "folder, and reach the machine's services over Unix sockets in the file system)")


def cache_home() -> Path:
    """``$XDG_CACHE_HOME/videvolve``, by default ``~/.cache/videvolve``: everything videvolve caches or logs there.

    The response cache, crash and vLLM logs, proxies, cached transcripts and Whisper models. An empty or relative
    ``XDG_CACHE_HOME`` is ignored, as the XDG spec says: a relative one would put the cache in whatever folder a
    command runs from (another each time, nothing found again), and an empty one did for proxies and transcripts.
    """
    xdg = os.environ.get("XDG_CACHE_HOME") or ""
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "videvolve"


def default_cache_path() -> Path:
    """``responses.sqlite`` in :func:`cache_home` (or in this user's temporary folder when that is not writable)."""
    base = cache_home()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError:
        base = own_temp_folder()
    return base / "responses.sqlite"


def own_temp_folder() -> Path:
    """``videvolve-cache-<uid>`` in the temporary folder: this user's alone (mode 0700, theirs, not a link).

    The temporary folder is every user's: one folder for all (``videvolve-cache``, as before) gave a user the
    replies another had stored, or had planted there, and put their crash logs where others read them. Where that
    name is taken by a folder that is not this user's alone, a new private folder is made (nothing reused).
    """
    base = Path(tempfile.gettempdir()) / f"videvolve-cache-{os.getuid()}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        st = base.lstat()
        if not base.is_symlink() and st.st_uid == os.getuid() and not st.st_mode & 0o077:
            return base
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix=f"videvolve-cache-{os.getuid()}-"))
