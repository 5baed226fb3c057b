"""What a harness's request would cost the parent, computed from its arguments before anything is decoded.

The parent is trusted and shared by every task, so it refuses before it works: a handle cap per task, a pixel cap
on contact sheets, a cap on the pixels one observation decodes and on the pixels one model request carries, and
the frame budget checked against a lower bound of the distinct frames a request shows. The exact budget check
after decoding stays; these only make sure that a hostile harness cannot make the parent decode, composite or hold
much before it is told no.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from videvolve.errors import RequestRefused
from videvolve.media.decode import scaled_size
from videvolve.media.info import VideoInfo
from videvolve.media.sheet import MAX_SHEET_PIXELS, sheet_size

MAX_HANDLES = 4096
"""Observation handles one task may create (each is a few hundred bytes in the parent)."""
MAX_HELD_TIMES = 65536
"""Timestamps all of a task's handles may hold together (a sheet handle holds up to 400)."""
MAX_REQUESTS = 512
"""Model requests one task may make (an agentic harness makes a few dozen)."""
MAX_REQUEST_OBSERVATIONS = 256
"""Observations one model request may show (the same one twice counts twice): 20,000 copies of one tiny frame
cost SimVLM 11 s."""
MAX_OBSERVATION_PIXELS = 64 * 1024 * 1024
"""Pixels one observation decodes (frames of a clip or a sheet's cells, plus the sheet): 192 MB of RGB."""
MAX_REQUEST_PIXELS = 96 * 1024 * 1024
"""Pixels of all images in one model request: about 48 frames of 1080p, 100 of 720p."""


class CapExceeded(RequestRefused):
    """A request breaks a cap; the message says which and what to do; ``kind`` is ``invalid`` or ``budget``."""

    def __init__(self, message: str, kind: str = "invalid") -> None:
        super().__init__(kind, message)


@dataclass(frozen=True)
class Shape:
    """What one observation would decode and show, from its arguments."""

    times: tuple[float, ...]
    decoded_pixels: int
    shown_pixels: int


def observation_shape(kind: str, times: list[float], info: VideoInfo, max_side: int | None = None,
                      cols: int = 6, cell_width: int = 160) -> Shape:
    """The pixels an observation of ``kind`` would decode and show (no decoding)."""
    if kind == "sheet":
        w, h = scaled_size(info.width, info.height, cell_width)
        _, _, sw, sh = sheet_size(len(times), cols, cell_width, (info.width, info.height))
        return Shape(tuple(times), len(times) * w * h + sw * sh, sw * sh)
    w, h = scaled_size(info.width, info.height, max_side)
    return Shape(tuple(times), len(times) * w * h, len(times) * w * h)


def check_observation(kind: str, shape: Shape) -> None:
    """Refuse an observation too large to prepare."""
    if kind == "sheet" and shape.shown_pixels > MAX_SHEET_PIXELS:
        raise CapExceeded(f"this contact sheet would be {shape.shown_pixels:,} pixels (cap {MAX_SHEET_PIXELS:,}); "
                          "use fewer cells or a smaller cell_width")
    if shape.decoded_pixels > MAX_OBSERVATION_PIXELS:
        raise CapExceeded(f"this {kind} would decode {shape.decoded_pixels:,} pixels (cap "
                          f"{MAX_OBSERVATION_PIXELS:,}); use fewer frames or a smaller max_side")


def distinct_frames_at_least(times: Iterable[float], fps: float) -> int:
    """A lower bound on the distinct frames on screen at ``times`` in a constant-rate video.

    Two times at least one frame interval apart show different frames, so a greedy chain of such times counts
    frames that are certainly distinct.
    """
    step = 1.0 / fps if fps > 0 and math.isfinite(fps) else math.inf
    count, last = 0, -math.inf
    for t in sorted(times):
        if t - last >= step * (1 + 1e-6):
            count += 1
            last = t
    return count


def check_observation_count(count: int) -> None:
    """Refuse a model request that shows more than :data:`MAX_REQUEST_OBSERVATIONS` observations."""
    if count > MAX_REQUEST_OBSERVATIONS:
        raise CapExceeded(f"this request shows {count} observations (cap {MAX_REQUEST_OBSERVATIONS}); show fewer, "
                          "or put many frames in one contact sheet")


def check_request(shapes: list[Shape], info: VideoInfo, budget: int | None) -> None:
    """Refuse a model request whose images are too large, or that certainly shows more frames than the budget."""
    pixels = sum(s.shown_pixels for s in shapes)
    if pixels > MAX_REQUEST_PIXELS:
        raise CapExceeded(f"this request would send {pixels:,} pixels of images (cap {MAX_REQUEST_PIXELS:,}); "
                          "show fewer or smaller observations")
    if budget is not None and not info.variable_frame_rate:
        least = distinct_frames_at_least((t for s in shapes for t in s.times), info.fps)
        if least > budget:
            raise CapExceeded(f"this request shows at least {least} distinct frames, more than the budget of "
                              f"{budget}", kind="budget")


def chat_message_problem(message: dict[str, object]) -> str | None:
    """Why a harness's chat message cannot be sent (role and content shape), or None."""
    role, content = message.get("role"), message.get("content")
    if role not in ("system", "user", "assistant", "tool"):
        return f"a chat message's role is system, user, assistant or tool, not {str(role)[:40]!r}"
    if content is not None and not isinstance(content, str | list):
        return f"a chat message's content is a string or a list of parts, not {type(content).__name__}"
    return None
