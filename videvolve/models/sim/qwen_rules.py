"""The mimic server's own Qwen2.5-VL / Qwen3-VL processor rules (independent of the client's cost model).

Written from vLLM 0.34's ``model_executor/models/qwen2_vl.py`` / ``qwen3_vl.py`` (``_get_vision_info``,
``_get_video_second_idx``, ``get_video_repl``), its video loader (``multimodal/video.py``,
``multimodal/media/video.py``) and the Hugging Face processors' ``smart_resize`` and default configurations, in
their terms: patches of ``patch_size`` pixels, merged ``merge_size x merge_size`` into one token, frames grouped by
``temporal_patch_size``. The client's :mod:`videvolve.models.cost` must agree with this; tests compare the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Processor:
    """One checkpoint's processor configuration (``preprocessor_config.json`` + the video processor's)."""

    patch_size: int
    merge_size: int
    temporal_patch_size: int
    image_size: tuple[int, int]
    """(shortest_edge, longest_edge) in pixels."""
    video_size: tuple[int, int]
    video_total_budget: bool
    """Qwen3-VL: the video's longest_edge bounds frames x pixels; Qwen2.5-VL: each frame alone."""
    timestamps: bool
    video_fps: float = 2.0
    min_frames: int = 4
    max_frames: int = 768


PROCESSORS = {
    "qwen2.5-vl": Processor(14, 2, 2, (3136, 12845056), (3136, 12845056), video_total_budget=False,
                            timestamps=False),
    # the checkpoints' preprocessor_config.json / video_preprocessor_config.json (see models/cost.py)
    "qwen3-vl": Processor(16, 2, 2, (65536, 16777216), (4096, 25165824), video_total_budget=True,
                          timestamps=True),
}


def _image_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Transformers' ``qwen2_vl.image_processing_qwen2_vl.smart_resize`` (returns height, width)."""
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def _video_resize(num_frames: int, height: int, width: int, temporal_factor: int, factor: int, min_pixels: int,
                  max_pixels: int) -> tuple[int, int]:
    """Transformers' ``qwen3_vl.video_processing_qwen3_vl.smart_resize`` (returns height, width).

    As in huggingface/transformers ``src/transformers/models/qwen3_vl/video_processing_qwen3_vl.py`` (checked
    2026-12-03): ``t_bar = round(n / 2) * 2``, the budget over ``n * H * W``; without its opt-in
    ``cap_pixels_per_frame`` (off by default; announced to become the default in transformers 5.22) and its
    upscaling of frames under 32 pixels on a side (our frames have at least 16).
    """
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def image_tokens(p: Processor, width: int, height: int) -> int:
    """Placeholder tokens of one image: vision_start + merged patches + vision_end."""
    h, w = _image_resize(height, width, p.patch_size * p.merge_size, *p.image_size)
    return (h // p.patch_size) * (w // p.patch_size) // p.merge_size**2 + 2


def loader_indices(total: int, duration: float, num_frames: int = 32, fps: float = -1) -> list[int]:
    """The frames vLLM's loader decodes (``compute_frames_index_to_sample``; 32 by default)."""
    n = total
    if num_frames > 0:
        n = min(num_frames, total)
    if fps > 0:
        n = min(n, math.floor(duration * fps))
    n = max(1, n)
    if n == total:
        return list(range(n))
    return [int(i) for i in np.linspace(0, total - 1, n, dtype=int)]


def processor_indices(p: Processor, loaded: list[int], total: int, source_fps: float,
                      do_sample_frames: bool | None) -> list[int]:
    """The frames the processor keeps (Qwen2.5-VL: all the loader gave).

    Qwen3-VL re-samples at 2 fps within [min_frames, max_frames] when the loader read every frame (or when asked).
    """
    if not p.timestamps:
        return loaded
    if do_sample_frames is None:
        do_sample_frames = len(loaded) == total
    if not do_sample_frames:
        return loaded
    n = int(total / source_fps * p.video_fps)
    n = min(min(max(n, p.min_frames), p.max_frames), total)
    return [int(i) for i in np.linspace(0, total - 1, n).round().astype(int)]


def video_tokens(p: Processor, width: int, height: int, indices: list[int], source_fps: float) -> int:
    """Placeholder tokens of one video whose kept frames are ``indices`` of a source at ``source_fps``."""
    n = len(indices)
    factor = p.patch_size * p.merge_size
    if p.video_total_budget:
        h, w = _video_resize(max(n, p.temporal_patch_size), height, width, p.temporal_patch_size, factor,
                             *p.video_size)
    else:
        h, w = _image_resize(height, width, factor, *p.video_size)
    grid_t = max((n + (-n % p.temporal_patch_size)) // p.temporal_patch_size, 1)
    per_group = (h // p.patch_size) * (w // p.patch_size) // p.merge_size**2
    if not p.timestamps:
        return grid_t * per_group + 2
    idx = list(indices) + [indices[-1]] * (-n % p.temporal_patch_size)
    secs = [idx[i] / source_fps for i in range(len(idx))]
    stamps = [(secs[i] + secs[i + p.temporal_patch_size - 1]) / 2 for i in range(0, len(secs), p.temporal_patch_size)]
    # '<', each digit and the dot, ' seconds', '>' (Qwen's tokenizer splits digits one by one)
    return sum(len(f"{t:.1f}") + 3 + 1 + per_group + 1 for t in stamps)


def text_tokens(text: str) -> int:
    """The mimic's text count: about four characters a token (the real tokenizer differs; visual counts are exact)."""
    return math.ceil(len(text) / 4) if text else 0
