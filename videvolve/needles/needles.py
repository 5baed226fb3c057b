"""Needles: short content painted into decoded frames at known times, in the trusted parent only.

A :class:`NeedlePlan` lists what is inserted into one video and when. The video file is never rewritten: the plan
is applied to frames after they are decoded (:class:`NeedleFrames`), so file metadata, packet sizes, keyframe
times and timing are the original file's and only the pixels differ. The plan lives in the task's ``meta``
(the tasks file, private to the parent like the answers); harness code sees a :class:`~videvolve.tasks.TaskView`.

Kinds: ``glyph`` (a SynthWorld colour-and-shape glyph: painted exactly as SynthWorld paints its own on SynthWorld
frames, so SimVLM reads it; with a dark outline on real footage), ``text`` (a word in a box) and ``splice`` (a few
seconds of another of the user's videos instead of this one's pictures).
"""

from __future__ import annotations

import functools
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from pydantic import BaseModel, ConfigDict, Field
from scipy import ndimage

from videvolve.datasets.synthworld.palette import GLYPH_COLOURS, glyph_alpha

NeedleKind = Literal["glyph", "text", "splice"]
Style = Literal["synth", "footage"]


class Needle(BaseModel):
    """One inserted appearance, on screen for frames with ``start <= pts < end``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: float = Field(ge=0)
    end: float = Field(ge=0)
    kind: NeedleKind
    colour: str | None = None
    shape: str | None = None
    size: int = Field(0, ge=0, description="glyph side or text height, pixels of the original frame")
    p0: tuple[float, float] = (0.0, 0.0)
    p1: tuple[float, float] = (0.0, 0.0)
    text: str | None = None
    source: str | None = Field(None, description="splice: the other video's path")
    offset: float = Field(0.0, ge=0, description="splice: where in the other video the spliced stretch starts")
    fingerprint: str | None = Field(None, description="splice: the content fingerprint of ``source`` when the plan "
                                    "was made (None: a plan made before they were kept; then only its existence is "
                                    "checked)")

    @property
    def name(self) -> str:
        """'orange star', the word, or 'another video'."""
        if self.kind == "glyph":
            return f"{self.colour} {self.shape}"
        return self.text or "" if self.kind == "text" else "another video"

    def position(self, t: float) -> tuple[float, float]:
        """Top-left corner at ``t`` (moving in a straight line from ``p0`` to ``p1``), original pixels."""
        a = min(max((t - self.start) / max(self.end - self.start, 1e-9), 0.0), 1.0)
        return self.p0[0] + a * (self.p1[0] - self.p0[0]), self.p0[1] + a * (self.p1[1] - self.p0[1])


class NeedlePlan(BaseModel):
    """Every needle of one video; ``id`` is opaque and names the plan in caches."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=8)
    video_id: str
    style: Style
    width: int = Field(gt=0, description="the original frame size the positions refer to")
    height: int = Field(gt=0)
    needles: tuple[Needle, ...] = ()

    def active(self, t: float) -> list[Needle]:
        """Needles on screen in the frame shown from ``t`` (a frame's pts)."""
        return [n for n in self.needles if n.start <= t + 1e-6 < n.end]


@functools.lru_cache(maxsize=64)
def _font(px: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=max(8, px))


def text_pad(px: float) -> int:
    """The margin of the box painted behind a word ``px`` pixels high."""
    return max(2, round(px * 0.3))


def text_box(text: str, px: int) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of the box painted behind ``text`` at ``px``, relative to where it is drawn.

    Measured with the font painting uses (:func:`_paint_text`), its margin included: a plan keeps it in the frame.
    """
    left, top, right, bottom = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox((0, 0), text, font=_font(px))
    pad = text_pad(px)
    return left - pad, top - pad, right + pad, bottom + pad


def _paint_glyph(arr: np.ndarray, needle: Needle, t: float, sx: float, sy: float, outline: bool) -> None:
    assert needle.shape is not None and needle.colour is not None
    w, h = max(2, round(needle.size * sx)), max(2, round(needle.size * sy))
    x, y = needle.position(t)
    x0, y0 = round(x * sx), round(y * sy)
    alpha = glyph_alpha(needle.shape, w, h)
    pad = max(1, round(2 * sx)) if outline else 0
    if pad:
        alpha_out = ndimage.grey_dilation(np.pad(alpha, pad), size=(2 * pad + 1, 2 * pad + 1))
        _blend(arr, alpha_out, x0 - pad, y0 - pad, np.zeros(3, dtype=np.float32))
    _blend(arr, alpha, x0, y0, np.array(GLYPH_COLOURS[needle.colour], dtype=np.float32))


def _blend(arr: np.ndarray, alpha: np.ndarray, x0: int, y0: int, colour: np.ndarray) -> None:
    """Composite ``colour`` with coverage ``alpha`` at (x0, y0), clipped to the frame (as SynthWorld renders)."""
    H, W = arr.shape[:2]
    h, w = alpha.shape
    ax0, ay0 = max(0, -x0), max(0, -y0)
    bx0, by0 = max(0, x0), max(0, y0)
    bx1, by1 = min(W, x0 + w), min(H, y0 + h)
    if bx1 <= bx0 or by1 <= by0:
        return
    a = alpha[ay0 : ay0 + by1 - by0, ax0 : ax0 + bx1 - bx0][..., None]
    region = arr[by0:by1, bx0:bx1]
    region[:] = np.clip(a * colour + (1 - a) * region + 0.5, 0, 255).astype(np.uint8)


def _paint_text(image: Image.Image, needle: Needle, t: float, sx: float, sy: float) -> None:
    draw = ImageDraw.Draw(image)
    font = _font(round(needle.size * sy))
    x, y = needle.position(t)
    x0, y0 = round(x * sx), round(y * sy)
    text = needle.text or ""
    left, top, right, bottom = draw.textbbox((x0, y0), text, font=font)
    pad = text_pad(needle.size * sy)
    draw.rectangle((left - pad, top - pad, right + pad, bottom + pad), fill=(250, 250, 250))
    colour = GLYPH_COLOURS.get(needle.colour or "", (10, 10, 10)) if needle.colour else (10, 10, 10)
    draw.text((x0, y0), text, font=font, fill=colour)


def _splice(image: Image.Image, needle: Needle, t: float) -> Image.Image:
    from videvolve.media.decode import frames_at

    assert needle.source is not None
    side = max(image.size)
    frame = frames_at(needle.source, [needle.offset + (t - needle.start)], max_side=side, clamp=True)[0]
    return frame.image.convert("RGB").resize(image.size, Image.Resampling.BILINEAR)


def paint(image: Image.Image, t: float, plan: NeedlePlan) -> Image.Image:
    """``image`` (the frame shown from pts ``t``, at any size) with the plan's needles on screen at ``t``.

    Returns the image itself when no needle is on screen (never modified in place: cached frames stay clean).
    """
    active = plan.active(t)
    if not active:
        return image
    out = image.convert("RGB").copy()
    for needle in active:
        if needle.kind == "splice":
            out = _splice(out, needle, t)
    sx, sy = out.width / plan.width, out.height / plan.height
    glyphs = [n for n in active if n.kind == "glyph"]
    if glyphs:
        arr = np.array(out)
        for needle in glyphs:
            _paint_glyph(arr, needle, t, sx, sy, outline=plan.style == "footage")
        out = Image.fromarray(arr)
    for needle in active:
        if needle.kind == "text":
            _paint_text(out, needle, t, sx, sy)
    return out
