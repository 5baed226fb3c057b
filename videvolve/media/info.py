"""Probe a video file: duration, rate, size, codec, keyframes, audio."""

from __future__ import annotations

import functools
import math
import os
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from videvolve.errors import MediaNotFoundError, UnreadableVideoError

FileKey = tuple[str, int, int]
"""(resolved path, size in bytes, mtime in ns): identifies one version of a file."""


@dataclass(frozen=True)
class VideoInfo:
    """What :func:`probe` learns about a file without decoding pixels."""

    path: str
    duration: float
    fps: float
    width: int
    height: int
    frame_count: int
    codec: str
    keyframe_interval: float
    """Mean seconds between keyframes over the whole file (a GOP estimate)."""
    start_time: float
    """Presentation time of the first frame, seconds (usually 0)."""
    has_audio: bool
    variable_frame_rate: bool

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)


def file_key(path: str | Path) -> FileKey:
    """Identify a file version; raises :class:`MediaNotFoundError` if it does not exist."""
    p = Path(path)
    try:
        st = p.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise MediaNotFoundError(p) from None
    if not p.is_file():
        raise MediaNotFoundError(p)
    return (str(p.resolve()), st.st_size, st.st_mtime_ns)


def open_video(path: str | Path) -> av.container.InputContainer:
    """Open a file for reading, mapping every failure to a media error that names the file."""
    file_key(path)
    try:
        container = av.open(os.fspath(path), "r")
    except av.FFmpegError as exc:
        raise UnreadableVideoError(path, f"not a readable media file ({exc})") from exc
    if not container.streams.video:
        container.close()
        raise UnreadableVideoError(path, "the file has no video stream")
    return container


@dataclass(frozen=True)
class StreamIndex:
    """Packet-level index of the video stream (demuxed, not decoded)."""

    time_base: Fraction
    keyframes: np.ndarray
    """Sorted keyframe pts, in ``time_base`` units."""
    pts: np.ndarray
    """Sorted pts of every packet (display order)."""

    @property
    def first_pts(self) -> int:
        """Pts of the first frame."""
        return int(self.pts[0])

    @property
    def last_pts(self) -> int:
        """Pts of the last frame."""
        return int(self.pts[-1])

    @property
    def packets(self) -> int:
        """Number of video packets (frames)."""
        return len(self.pts)

    @property
    def min_step(self) -> int:
        """Smallest pts step between consecutive frames."""
        steps = np.diff(self.pts)
        steps = steps[steps > 0]
        return int(steps.min()) if len(steps) else 1

    @property
    def max_step(self) -> int:
        """Largest pts step between consecutive frames."""
        steps = np.diff(self.pts)
        return int(steps.max()) if len(steps) else 1

    def keyframe_at_or_before(self, pts: int) -> int | None:
        """Pts of the last keyframe at or before ``pts`` (None if there is none)."""
        i = int(np.searchsorted(self.keyframes, pts, side="right")) - 1
        return int(self.keyframes[i]) if i >= 0 else None

    def keyframe_before(self, pts: int) -> int | None:
        """Pts of the last keyframe strictly before ``pts``."""
        i = int(np.searchsorted(self.keyframes, pts, side="left")) - 1
        return int(self.keyframes[i]) if i >= 0 else None

    def next_pts(self, pts: int) -> int | None:
        """Pts of the first frame after ``pts`` (None at the end)."""
        i = int(np.searchsorted(self.pts, pts, side="right"))
        return int(self.pts[i]) if i < len(self.pts) else None


@functools.lru_cache(maxsize=256)
def _stream_index(key: FileKey) -> StreamIndex:
    path = key[0]
    container = open_video(path)
    try:
        stream = container.streams.video[0]
        keyframes: list[int] = []
        all_pts: list[int] = []
        try:
            for packet in container.demux(stream):
                if packet.pts is None:
                    continue
                all_pts.append(packet.pts)
                if packet.is_keyframe:
                    keyframes.append(packet.pts)
        except av.FFmpegError as exc:
            if not all_pts:
                raise UnreadableVideoError(path, f"cannot read packets ({exc})") from exc
        if not all_pts:
            raise UnreadableVideoError(path, "the video stream has no packets")
        pts = np.unique(np.asarray(all_pts, dtype=np.int64))
        return StreamIndex(
            time_base=Fraction(stream.time_base) if stream.time_base else Fraction(1, 1000),
            keyframes=np.unique(np.asarray(keyframes or [int(pts[0])], dtype=np.int64)),
            pts=pts,
        )
    finally:
        container.close()


def stream_index(path: str | Path) -> StreamIndex:
    """The (cached) packet index of a file's video stream."""
    return _stream_index(file_key(path))


@functools.lru_cache(maxsize=256)
def _probe(key: FileKey) -> VideoInfo:
    path = key[0]
    index = _stream_index(key)
    container = open_video(path)
    try:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        fps = float(rate) if rate else 0.0
        tb = index.time_base
        start = float(index.first_pts * tb)
        if stream.duration:
            duration = float(stream.duration * tb)
        elif container.duration:
            duration = container.duration / 1_000_000
        else:
            duration = float((index.last_pts - index.first_pts) * tb) + (1 / fps if fps else 0.0)
        if fps <= 0 and duration > 0:
            fps = index.packets / duration
        span = float((index.keyframes[-1] - index.keyframes[0]) * tb)
        kf_interval = span / (len(index.keyframes) - 1) if len(index.keyframes) > 1 else duration
        vfr = index.max_step > 1.5 * index.min_step and index.packets > 2
        return VideoInfo(
            path=path,
            duration=duration,
            fps=fps,
            width=ctx.width,
            height=ctx.height,
            frame_count=stream.frames or index.packets,
            codec=ctx.name,
            keyframe_interval=kf_interval,
            start_time=start,
            has_audio=bool(container.streams.audio),
            variable_frame_rate=vfr,
        )
    finally:
        container.close()


def probe(path: str | Path) -> VideoInfo:
    """Describe a video file; raises :class:`MediaNotFoundError` or :class:`UnreadableVideoError`."""
    return _probe(file_key(path))


@dataclass(frozen=True)
class HeaderInfo:
    """What a video's header says of its length, no packet read: quick enough for every file of a large folder."""

    duration: float
    frames: int


def header_info(path: str | Path) -> HeaderInfo:
    """The duration and frame count a file's header states (:func:`probe` demuxes every packet; this reads none).

    Raises :class:`MediaNotFoundError` or :class:`UnreadableVideoError` (no video stream, or no length stated).
    """
    container = open_video(path)
    try:
        stream = container.streams.video[0]
        rate = float(stream.average_rate or stream.guessed_rate or 0)
        seconds = float(stream.duration * stream.time_base) if stream.duration and stream.time_base else \
            (container.duration or 0) / 1_000_000
        frames = max(int(stream.frames or 0), math.ceil(seconds * rate))
    finally:
        container.close()
    if seconds <= 0 or frames <= 0:
        raise UnreadableVideoError(path, "its header states no length")
    return HeaderInfo(duration=seconds, frames=frames)
