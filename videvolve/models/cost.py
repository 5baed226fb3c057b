"""Visual-token cost per model family, computed when a request is built (a cache hit costs the same).

Qwen-VL family, as vLLM 0.34 serves it (checked against vLLM's ``qwen2_vl.py`` / ``qwen3_vl.py`` and the
Hugging Face processors): an image is resized to multiples of ``f`` within the processor's min/max pixels and costs
``(H'/f) * (W'/f) + 2`` tokens (f = 28 for Qwen2.5-VL, 32 for Qwen3-VL; the 2 are vision start/end). Video frames
are paired (temporal patch 2).

- Qwen2.5-VL: every frame is resized like an image; a clip of n frames costs ``ceil(n/2) * (H'/f)(W'/f) + 2``.
- Qwen3-VL: images have a *minimum* of 65,536 pixels (a 160x90 frame costs 66 + 2 tokens, not 17); a clip is
  resized against a *total* pixel budget over all its frames (``n * H' * W' <= 25,165,824``), and each frame pair
  carries its own ``<t.t seconds>`` timestamp text and start/end tokens, inside the prompt's own
  ``<|vision_start|>``/``<|vision_end|>``: ``2 + sum_pairs(ts + grid + 2)`` (vLLM's ``qwen3_vl.py`` ``get_video_repl``
  replaces only ``<|video_pad|>`` with transformers >= 5.10, keeping the outer pair).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from videvolve.errors import UsageError


def smart_resize(width: int, height: int, factor: int, min_pixels: int, max_pixels: int,
                 frames: int = 1, temporal: int = 1) -> tuple[int, int]:
    """Qwen's ``smart_resize`` (image form for ``frames=1``; Qwen3-VL's video form budgets ``frames * H * W``)."""
    t_bar = round(frames / temporal) * temporal if temporal > 1 else 1
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    n = frames if temporal > 1 else 1
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt(n * height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (n * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return w_bar, h_bar


def timestamp_tokens(seconds: float) -> int:
    """Tokens of Qwen3-VL's ``<12.5 seconds>`` text: '<', one per digit or dot, ' seconds', '>'."""
    return len(f"{seconds:.1f}") + 3


@dataclass(frozen=True)
class CostModel:
    """Token cost of images and videos for one model family."""

    name: str
    factor: int
    min_pixels: int
    max_pixels: int
    temporal_patch: int = 2
    video_min_pixels: int | None = None
    """Qwen3-VL: the clip's total-pixel floor (None: frames are resized like images)."""
    video_max_pixels: int | None = None
    """Qwen3-VL: the clip's total-pixel budget over all frames."""

    def resized(self, width: int, height: int) -> tuple[int, int]:
        """The (width, height) the image processor feeds the vision encoder."""
        return smart_resize(width, height, self.factor, self.min_pixels, self.max_pixels)

    def image_tokens(self, width: int, height: int) -> int:
        """Tokens of one image."""
        w, h = self.resized(width, height)
        return (w // self.factor) * (h // self.factor) + 2

    def video_resized(self, width: int, height: int, frames: int) -> tuple[int, int]:
        """The (width, height) of each frame of a clip of ``frames`` frames."""
        if self.video_max_pixels is None:
            return self.resized(width, height)
        return smart_resize(width, height, self.factor, self.video_min_pixels or 0, self.video_max_pixels,
                            frames=max(frames, self.temporal_patch), temporal=self.temporal_patch)

    def video_tokens(self, width: int, height: int, frames: int, fps: float = 1.0) -> int:
        """Tokens of a clip of ``frames`` frames at ``fps`` (merged in pairs; ``fps`` times Qwen3-VL's timestamps)."""
        w, h = self.video_resized(width, height, frames)
        grid = (w // self.factor) * (h // self.factor)
        pairs = math.ceil(frames / self.temporal_patch)
        if self.video_max_pixels is None:
            return pairs * grid + 2
        padded = list(range(frames)) + [frames - 1] * (pairs * self.temporal_patch - frames)
        stamps = [(padded[2 * i] + padded[2 * i + 1]) / 2 / fps for i in range(pairs)]
        return 2 + sum(timestamp_tokens(t) + grid + 2 for t in stamps)


COST_MODELS = {
    "qwen2.5-vl": CostModel("qwen2.5-vl", factor=28, min_pixels=4 * 28 * 28, max_pixels=16384 * 28 * 28),
    # Qwen3-VL checkpoints' preprocessor_config.json (Qwen2VLImageProcessorFast; size {shortest_edge: 65536,
    # longest_edge: 16777216}, patch_size 16, merge_size 2, temporal_patch_size 2) and video_preprocessor_config.json
    # (Qwen3VLVideoProcessor; size {shortest_edge: 4096, longest_edge: 25165824}), as the checkpoints ship them; the
    # class defaults in huggingface/transformers src/transformers/models/qwen3_vl/video_processing_qwen3_vl.py
    # (128*32*32 / 32*32*768) are overridden by those files. Checked 2026-12-03.
    "qwen3-vl": CostModel("qwen3-vl", factor=32, min_pixels=65536, max_pixels=16777216,
                          video_min_pixels=4096, video_max_pixels=25165824),
}


def cost_model(family: str, max_pixels: int | None = None) -> CostModel:
    """The cost model of a family name (``qwen2.5-vl`` or ``qwen3-vl``), under a server's ``max_pixels`` if any.

    vLLM passes ``--mm-processor-kwargs '{"max_pixels": N}'`` to the checkpoint's processor: an image larger than N
    pixels is resized to fit (1920x1080 under 1,003,520 on Qwen2.5-VL: 1316x728, 1,224 tokens, not 2,693). Qwen2.5-VL
    resizes each frame of a clip as an image, so the cap holds there too; Qwen3-VL's clips keep their own budget.
    """
    try:
        base = COST_MODELS[family]
    except KeyError:
        raise UsageError(f"unknown model family {family!r}; known: {', '.join(COST_MODELS)}") from None
    if max_pixels is None or max_pixels >= base.max_pixels:
        return base
    return dataclasses.replace(base, max_pixels=max_pixels, name=f"{base.name} max_pixels={max_pixels}")


def text_tokens(text: str) -> int:
    """A rough count for text when the server reports none (about four characters a token)."""
    return max(1, math.ceil(len(text) / 4)) if text else 0
