"""A first look at a video before needles are placed: is it SynthWorld-like, and where is no native glyph.

On SynthWorld-like pictures (a solid palette background) every frame is read with SimVLM's pixel reader, so needle
glyphs go only where no native glyph is on screen and never repeat a kind the video shows itself. Real footage is
decoded sparsely, which also finds a damaged file before any task is written for it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import av
import numpy as np

from videvolve.media.decode import frames_at, iter_frames
from videvolve.media.info import probe, stream_index
from videvolve.models.sim.perception import Percept, perceive
from videvolve.needles.needles import NeedlePlan

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
    synth = _synth_like(path, info.duration)
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
        p = _read(frame, scan)
        clear = p.glyph == "none"
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


def _synth_like(path: str, duration: float) -> bool:
    """Whether a video looks like a SynthWorld's (a solid palette background in nearly every sampled frame)."""
    times = [duration * (k + 0.5) / SYNTH_SAMPLES for k in range(SYNTH_SAMPLES)]
    sample = frames_at(path, times, clamp=True)
    return sum(perceive(f.image).background is not None for f in sample) >= SYNTH_SAMPLES - 1


def _read(frame: av.VideoFrame, scan: VideoScan) -> Percept:
    """One frame perceived; a glyph on it is added to what ``scan`` says the video shows itself."""
    p = perceive(np.asarray(frame.to_ndarray(format="rgb24")))
    if p.glyph == "clear" and p.colour and p.shape:
        scan.native.add((p.colour, p.shape))
        if p.background:
            scan.native_on.add((p.background, p.colour, p.shape))
    return p


def with_splices(scan: VideoScan, plan: NeedlePlan) -> VideoScan:
    """``scan`` with the glyphs the plan's splices show counted as the video's own (questions avoid those).

    A spliced stretch of a SynthWorld-like video shows that video's glyphs; each is scanned as a video is (every
    frame perceived when its source looks like a SynthWorld's, nothing read from real footage), from one frame
    before the stretch to its end.
    """
    splices = [n for n in plan.needles if n.kind == "splice" and n.source]
    if not splices:
        return scan
    out = dataclasses.replace(scan, native=set(scan.native), native_on=set(scan.native_on))
    for n in splices:
        assert n.source is not None
        info = probe(n.source)
        if not _synth_like(n.source, info.duration):
            continue
        index = stream_index(n.source)
        before = float(index.min_step * index.time_base) or 1.0 / max(info.fps, 1.0)
        for frame in iter_frames(n.source, max(0.0, n.offset - before), n.offset + (n.end - n.start)):
            _read(frame, out)
    return out
