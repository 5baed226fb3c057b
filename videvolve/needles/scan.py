"""A first look at a video before needles are placed: is it SynthWorld-like, and where is no native glyph.

On SynthWorld-like pictures (a solid palette background) every frame is read with SimVLM's pixel reader, so needle
glyphs go only where no native glyph is on screen and never repeat a kind the video shows itself. Real footage is
decoded sparsely, which also finds a damaged file before any task is written for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from videvolve.media.decode import frames_at, iter_frames
from videvolve.media.info import probe, stream_index
from videvolve.models.sim.perception import perceive

SYNTH_SAMPLES = 8
FOOTAGE_CHECK_EVERY = 10.0
"""Seconds between the sparse frames decoded to check real footage."""


@dataclass
class VideoScan:
    """What a video is and where needles can go."""

    video_id: str
    path: str
    duration: float
    width: int
    height: int
    step: float
    """The shortest frame period: needle times are multiples of frames."""
    synth: bool
    free: list[tuple[float, float]] = field(default_factory=list)
    """Stretches with no native glyph on screen (the whole video for real footage)."""
    native: set[tuple[str, str]] = field(default_factory=set)
    """Glyph kinds (colour, shape) the video shows itself."""
    native_on: set[tuple[str, str, str]] = field(default_factory=set)
    """(background, colour, shape) seen natively."""
    backgrounds: list[tuple[float, float, str]] = field(default_factory=list)
    """Runs of one background colour (SynthWorld-like videos)."""


def scan_video(path: str | Path, video_id: str | None = None) -> VideoScan:
    """Scan one video; a file that cannot be read raises the media error naming it."""
    path = str(path)
    info = probe(path)
    index = stream_index(path)
    step = float(index.min_step * index.time_base) or 1.0 / max(info.fps, 1.0)
    vid = video_id or Path(path).stem
    times = [info.duration * (k + 0.5) / SYNTH_SAMPLES for k in range(SYNTH_SAMPLES)]
    sample = frames_at(path, times, clamp=True)
    synth = sum(perceive(f.image).background is not None for f in sample) >= SYNTH_SAMPLES - 1
    scan = VideoScan(vid, path, info.duration, info.width, info.height, step, synth)
    if not synth:
        n = int(info.duration // FOOTAGE_CHECK_EVERY) + 1
        checks = [min(info.duration, k * FOOTAGE_CHECK_EVERY) for k in range(n)]
        frames_at(path, checks, max_side=64, clamp=True, cache=None)
        scan.free = [(0.0, info.duration)]
        return scan
    start: float | None = None
    bg_run: list[float | str] | None = None
    last = 0.0
    for frame in iter_frames(path, 0.0, info.duration):
        t = float(frame.time)
        p = perceive(np.asarray(frame.to_ndarray(format="rgb24")))
        clear = p.glyph == "none"
        if p.glyph == "clear" and p.colour and p.shape:
            scan.native.add((p.colour, p.shape))
            if p.background:
                scan.native_on.add((p.background, p.colour, p.shape))
        if clear and start is None:
            start = t
        elif not clear and start is not None:
            scan.free.append((start, t))
            start = None
        if p.background and (bg_run is None or bg_run[2] != p.background):
            if bg_run is not None:
                scan.backgrounds.append((float(bg_run[0]), t, str(bg_run[2])))
            bg_run = [t, t, p.background]
        last = t
    end = max(last + step, info.duration)
    if start is not None:
        scan.free.append((start, end))
    if bg_run is not None:
        scan.backgrounds.append((float(bg_run[0]), end, str(bg_run[2])))
    return scan
