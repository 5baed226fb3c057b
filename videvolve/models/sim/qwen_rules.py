"""The mimic server's own Qwen2.5-VL / Qwen3-VL processor rules (independent of the client's cost model).

Written from vLLM 0.34's ``model_executor/models/qwen2_vl.py`` / ``qwen3_vl.py`` (``_get_vision_info``,
``_get_video_second_idx``, ``get_video_repl``), its video loader (``multimodal/video.py``,
``multimodal/media/video.py``) and the Hugging Face processors' ``smart_resize`` and default configurations, in
their terms: patches of ``patch_size`` pixels, merged ``merge_size x merge_size`` into one token, frames grouped by
``temporal_patch_size``. The client's :mod:`videvolve.models.cost` must agree with this; tests compare the two.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from videvolve.errors import VidevolveError


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


def capped(p: Processor, max_pixels: int | None) -> Processor:
    """The processor under a server's ``--mm-processor-kwargs '{"max_pixels": N}'`` (None: as the checkpoint has it)."""
    if max_pixels is None:
        return p
    image = (p.image_size[0], min(p.image_size[1], int(max_pixels)))
    video = p.video_size if p.video_total_budget else (p.video_size[0], min(p.video_size[1], int(max_pixels)))
    return dataclasses.replace(p, image_size=image, video_size=video)


def image_tokens(p: Processor, width: int, height: int) -> int:
    """Placeholder tokens of one image: vision_start + merged patches + vision_end."""
    h, w = _image_resize(height, width, p.patch_size * p.merge_size, *p.image_size)
    return (h // p.patch_size) * (w // p.patch_size) // p.merge_size**2 + 2


VIDEO_BACKENDS = {"qwen2.5-vl": "qwen2_vl", "qwen3-vl": "qwen3_vl"}
"""The loader vLLM picks when a request names none: ``fetch_video`` (multimodal/media/connector.py:581-585) asks
``get_video_loader_backend_for_processor`` for the checkpoint's video processor class, read by
``get_video_processor_cls_name_from_config`` (transformers_utils/processor.py:166-191): Qwen3-VL's
video_preprocessor_config.json names ``Qwen3VLVideoProcessor`` (registered to ``qwen3_vl``,
multimodal/video.py:362-365);
Qwen2.5-VL ships none, so its model_type ``qwen2_5_vl`` maps through transformers' VIDEO_PROCESSOR_MAPPING_NAMES to
``Qwen2VLVideoProcessor`` (registered to ``qwen2_vl``, multimodal/video.py:602-605)."""

GENERIC_BACKEND = "opencv"
"""``VideoBackend``, the uniform sampler (multimodal/video.py:201-239), under its registered name."""


class LoaderError(VidevolveError, ValueError):
    """A video the loader refuses (vLLM answers 400 with this text)."""


def loader_indices(backend: str, total: int, source_fps: float, num_frames: int = 32,
                   fps: float | None = None) -> list[int]:
    """The frame indices vLLM's video loader ``backend`` decodes from a clip of ``total`` frames at ``source_fps``.

    ``num_frames`` is ``VideoMediaIO``'s (32 unless the merged media_io_kwargs set it, multimodal/media/video.py:
    97, 124-126); ``fps`` is the merged kwarg, None when absent (each backend's ``load_bytes`` default then applies).
    """
    duration = total / source_fps if source_fps > 0 else 0.0
    if backend == GENERIC_BACKEND:
        # VideoBackend.compute_frames_index_to_sample (multimodal/video.py:214-238): the smaller of num_frames and
        # floor(duration * fps); every frame when that is all of them, else a uniform linspace. load_bytes: fps -1.
        target_fps = -1.0 if fps is None else fps
        n = total
        if num_frames > 0:
            n = min(num_frames, total)
        if target_fps > 0:
            n = min(n, math.floor(duration * target_fps))
        n = max(1, n)
        if n == total:
            return list(range(n))
        return [int(i) for i in np.linspace(0, total - 1, n, dtype=int)]
    if backend == "qwen3_vl":
        # Qwen3VLVideoBackend (multimodal/video.py:366-421): num_frames ignored; fps default 2 (load_bytes, :406),
        # at most 30; int(total / source_fps * fps) clamped to [4, 768] and to total; rounded linspace.
        # An unknown source rate (0) is taken as 24 (:371-377).
        rate = source_fps if source_fps > 0 else 24.0
        target = min(2.0 if fps is None else fps, 30)
        n = int(total / rate * target)
        n = min(max(n, 4), 768, total)
        return [int(i) for i in np.linspace(0, total - 1, n).round().astype(int)]
    if backend == "qwen2_vl":
        # Qwen2VLVideoBackend (multimodal/video.py:606-681): num_frames ignored; fps default 2 (load_bytes, :666),
        # at most 30; total / source_fps * fps clamped to [4, max_frames] and to total, max_frames being
        # min(768, total) floored to an even count, and the count floored to even (temporal_patch_size 2).
        if source_fps <= 0:
            raise LoaderError("Qwen2-VL video sampling needs a known source fps, but the container reported 0 "
                              "(variable or unknown frame rate).")
        max_frames = math.floor(min(768, total) / 2) * 2
        target = min(2.0 if fps is None else fps, 30)
        m = min(max(total / source_fps * target, 4), max_frames, total)
        n = math.floor(m / 2) * 2
        if n <= 0:
            raise LoaderError(f"cannot sample {n} frames from a {total}-frame video (torch.arange step is zero)")
        # torch.arange(0, total, total / n).int(), the tail clamped to total - 1 (:655-659); float32 values
        step = total / n
        count = math.ceil(total / step)
        values = (np.arange(count, dtype=np.float64) * step).astype(np.float32)
        return [min(int(v), total - 1) for v in values]
    raise LoaderError(f"the mimic models the video loaders {GENERIC_BACKEND!r}, 'qwen2_vl' and 'qwen3_vl', not "
                      f"{backend!r}")


def processor_indices(p: Processor, loaded: list[int], total: int, source_fps: float,
                      do_sample_frames: bool | None, sampled_fps: float | None = None) -> list[int]:
    """The frames the Hugging Face video processor keeps of those the loader decoded.

    The loader's metadata says ``do_sample_frames = len(loaded) == total`` (multimodal/video.py:180-194). Qwen2.5-VL:
    vLLM drops that key (model_executor/models/qwen2_5_vl.py:1226-1229) and ``Qwen2VLVideoProcessor`` does not
    sample by default (transformers qwen2_vl/video_processing_qwen2_vl.py: ``do_sample_frames = False``), so every
    decoded frame is kept unless the request asks. Qwen3-VL: the request's ``videos_kwargs.do_sample_frames`` wins,
    else the metadata's (model_executor/models/qwen3_vl.py:1514-1519); sampling re-picks
    ``int(total / fps * 2)`` frames clamped to [4, 768] (qwen3_vl.py:1107-1133).
    """
    if do_sample_frames is None:
        do_sample_frames = False if not p.timestamps else len(loaded) == total
    if not do_sample_frames:
        return loaded
    rate = sampled_fps or p.video_fps
    if not p.timestamps:
        # Qwen2VLVideoProcessor.sample_frames (fps mode), over the decoded frames
        count = len(loaded)
        max_frames = math.floor(min(p.max_frames, count) / 2) * 2
        n = math.floor(min(max(count / source_fps * rate, p.min_frames), max_frames, count) / 2) * 2
        return [loaded[int(i)] for i in np.arange(0, count, count / max(n, 1))][:max(n, 1)]
    n = int(total / source_fps * rate)
    n = min(min(max(n, p.min_frames), p.max_frames), total)
    return [int(i) for i in np.linspace(0, total - 1, n).round().astype(int)]


def video_refusal(p: Processor, kept: int) -> str | None:
    """The 400 vLLM gives a video the Hugging Face processor cannot take (None: it can).

    Qwen3-VL resizes a video before padding it to whole frame pairs, and transformers' ``smart_resize``
    (qwen3_vl/video_processing_qwen3_vl.py:84-85, 5.22) raises "t:1 must be larger than temporal_factor:2"; vLLM's
    ``call_hf_processor`` re-raises it as the ValueError below (multimodal/processing/context.py:423-431), a 400
    (serve/exception_handling/error_response.py:80-83). Qwen2.5-VL resizes frame by frame, then pads to a pair
    (transformers qwen2_vl/video_processing_qwen2_vl.py:285-289). The cause is added in brackets (vLLM's message
    shows the request's data and kwargs instead).
    """
    if p.video_total_budget and kept < p.temporal_patch_size:
        return (f"Failed to apply Qwen3VLProcessor on data={{'videos': [{kept} frame(s)]}} (t:{kept} must be larger "
                f"than temporal_factor:{p.temporal_patch_size})")
    return None


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
    # per frame pair: '<', each digit and the dot, ' seconds', '>' (Qwen's tokenizer splits digits one by one),
    # vision_start, the group's tokens, vision_end (Qwen3VLMultiModalProcessor.get_video_repl, qwen3_vl.py:1757-1818);
    # and the prompt's own <|vision_start|>/<|vision_end|> around the whole video, which transformers >= 5.10 keeps
    # (only <|video_pad|> is replaced: qwen3_vl.py:1732-1741 and 1412-1418): +2
    return 2 + sum(len(f"{t:.1f}") + 3 + 1 + per_group + 1 for t in stamps)


def text_tokens(text: str) -> int:
    """The mimic's text count: about four characters a token (the real tokenizer differs; visual counts are exact)."""
    return math.ceil(len(text) / 4) if text else 0
