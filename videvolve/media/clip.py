"""Frame-exact clips: decode the source range and re-encode it (a stream copy would start at a keyframe)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av

from videvolve.errors import MediaError
from videvolve.media.decode import iter_frames, scaled_size, to_image
from videvolve.media.info import probe

CLIP_TIME_BASE = Fraction(1, 1000)


@dataclass(frozen=True)
class ClipInfo:
    """A written clip: where it is, the source range, and the source time of each of its frames."""

    path: str
    start: float
    end: float
    width: int
    height: int
    frame_times: list[float] = field(default_factory=list)

    @property
    def frame_count(self) -> int:
        """Number of frames in the clip."""
        return len(self.frame_times)


def clip(
    path: str | Path,
    start: float,
    end: float,
    out: str | Path,
    fps: float | None = None,
    max_side: int | None = None,
    *,
    crf: int = 18,
    preset: str = "veryfast",
) -> ClipInfo:
    """Write the frames on screen during [start, end) of ``path`` to ``out`` (H.264, re-encoded).

    With ``fps`` the clip holds the frames on screen at ``start + k / fps``; without it, every source frame in the
    range with its original timing. Clip time 0 is source time ``start``.
    """
    if end <= start:
        raise MediaError(f"clip end {end} must be after its start {start} ({path})")
    info = probe(path)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    width, height = scaled_size(info.width, info.height, max_side)
    width, height = width - width % 2, height - height % 2
    samples = None
    if fps:
        n = max(1, math.ceil((min(end, info.duration) - start) * fps - 1e-9))
        samples = [start + k / fps for k in range(n)]

    times: list[float] = []
    container = av.open(str(out), "w")
    try:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1000) if fps else None)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.time_base = CLIP_TIME_BASE
        stream.options = {"crf": str(crf), "preset": preset}
        pending = None  # the latest source frame at or before the next sample
        si = 0
        for frame in iter_frames(path, start, end):
            if samples is None:
                _write(container, stream, frame, max(0.0, frame.time - start), width, height)
                times.append(float(frame.time))
                continue
            while si < len(samples) and pending is not None and frame.time > samples[si]:
                _write(container, stream, pending, samples[si] - start, width, height)
                times.append(float(pending.time))
                si += 1
            pending = frame
        while samples is not None and pending is not None and si < len(samples):
            _write(container, stream, pending, samples[si] - start, width, height)
            times.append(float(pending.time))
            si += 1
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()
    return ClipInfo(path=str(out), start=start, end=end, width=width, height=height, frame_times=times)


def _write(container: av.container.OutputContainer, stream: av.VideoStream, frame: av.VideoFrame,
           at: float, width: int, height: int) -> None:
    image = to_image(frame, None)
    if image.size != (width, height):
        image = image.resize((width, height))
    out = av.VideoFrame.from_image(image)
    out.pts = round(at / CLIP_TIME_BASE)
    out.time_base = CLIP_TIME_BASE
    for packet in stream.encode(out):
        container.mux(packet)
