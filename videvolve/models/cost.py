"""Visual-token cost per model family, computed when a request is built (a cache hit costs the same).

Qwen-VL family, as vLLM serves it: an image is resized to multiples of ``f`` within the processor's min/max
pixels and costs ``(H'/f) * (W'/f) + 2`` tokens (f = 28 for Qwen2.5-VL, 32 for Qwen3-VL); video frames are paired
(temporal patch 2), so a clip of n frames costs ``ceil(n / 2) * (H'/f) * (W'/f) + 2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from videvolve.errors import UsageError


@dataclass(frozen=True)
class CostModel:
    """Token cost of images and videos for one model family."""

    name: str
    factor: int
    min_pixels: int
    max_pixels: int
    temporal_patch: int = 2

    def resized(self, width: int, height: int) -> tuple[int, int]:
        """Qwen's ``smart_resize``: the (width, height) the processor feeds the vision encoder."""
        f = self.factor
        h_bar = max(f, round(height / f) * f)
        w_bar = max(f, round(width / f) * f)
        if h_bar * w_bar > self.max_pixels:
            beta = math.sqrt(height * width / self.max_pixels)
            h_bar = max(f, math.floor(height / beta / f) * f)
            w_bar = max(f, math.floor(width / beta / f) * f)
        elif h_bar * w_bar < self.min_pixels:
            beta = math.sqrt(self.min_pixels / (height * width))
            h_bar = math.ceil(height * beta / f) * f
            w_bar = math.ceil(width * beta / f) * f
        return w_bar, h_bar

    def image_tokens(self, width: int, height: int) -> int:
        """Tokens of one image."""
        w, h = self.resized(width, height)
        return (w // self.factor) * (h // self.factor) + 2

    def video_tokens(self, width: int, height: int, frames: int) -> int:
        """Tokens of a clip of ``frames`` frames (frames are merged in pairs)."""
        w, h = self.resized(width, height)
        return math.ceil(frames / self.temporal_patch) * (w // self.factor) * (h // self.factor) + 2


COST_MODELS = {
    "qwen2.5-vl": CostModel("qwen2.5-vl", factor=28, min_pixels=4 * 28 * 28, max_pixels=16384 * 28 * 28),
    "qwen3-vl": CostModel("qwen3-vl", factor=32, min_pixels=4 * 32 * 32, max_pixels=16384 * 32 * 32),
}


def cost_model(family: str) -> CostModel:
    """The cost model of a family name (``qwen2.5-vl`` or ``qwen3-vl``)."""
    try:
        return COST_MODELS[family]
    except KeyError:
        raise UsageError(f"unknown model family {family!r}; known: {', '.join(COST_MODELS)}") from None


def text_tokens(text: str) -> int:
    """A rough count for text when the server reports none (about four characters a token)."""
    return max(1, math.ceil(len(text) / 4)) if text else 0
