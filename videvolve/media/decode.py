"""Frames at timestamps: the frame on screen at each requested time, decoded with a plan.

The frame on screen at ``t`` is the one with ``pts <= t < next pts``. Targets are sorted and deduplicated; the
decoder seeks (to the last keyframe at or before a target) only when that skips a real stretch of frames, and
otherwise decodes forward, so dense requests become one sequential pass. Results come back in the caller's order.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import av
from PIL import Image

from videvolve.errors import TimeOutOfRangeError, UnreadableVideoError
from videvolve.media.cache import CachedFrame, FrameCache, frame_cache
from videvolve.media.info import StreamIndex, VideoInfo, file_key, open_video, probe, stream_index

SEEK_MIN_SKIP_FRAMES = 12
"""Seek only when it skips at least this many frames; otherwise decoding forward is cheaper than a flush."""
DECODE_WORKERS = min(4, os.cpu_count() or 1)
"""Threads decoding independent stretches of one request in parallel (PyAV releases the GIL while decoding)."""
COST_PER_SEEK_FRAMES = 4
MIN_PARALLEL_FRAMES = 240
"""Below this many frames to decode, one thread is faster than starting several."""
_PTS_EPS = 1e-6


@dataclass(frozen=True)
class Frame:
    """A decoded frame: the time asked for, the frame's own presentation time, and its pixels."""

    requested: float
    time: float
    image: Image.Image


def scaled_size(width: int, height: int, max_side: int | None) -> tuple[int, int]:
    """Size after shrinking so the longer side is at most ``max_side`` (never enlarged; even numbers)."""
    if not max_side or max(width, height) <= max_side:
        return width, height
    scale = max_side / max(width, height)
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


def to_image(frame: av.VideoFrame, max_side: int | None = None) -> Image.Image:
    """RGB PIL image of a decoded frame, area-downscaled to ``max_side`` if given."""
    w, h = scaled_size(frame.width, frame.height, max_side)
    if (w, h) == (frame.width, frame.height):
        return frame.to_image()
    return frame.to_image(width=w, height=h, interpolation="AREA")


def check_times(info: VideoInfo, times: Sequence[float], clamp: bool) -> list[float]:
    """Validate (or clamp) timestamps to [0, duration]."""
    out = []
    for t in times:
        t = float(t)
        if not math.isfinite(t):
            raise TimeOutOfRangeError(info.path, t, info.duration)
        if t < 0 or t > info.duration + _PTS_EPS:
            if not clamp:
                raise TimeOutOfRangeError(info.path, t, info.duration)
            t = min(max(t, 0.0), info.duration)
        out.append(t)
    return out


def pts_of(frame: av.VideoFrame) -> int:
    """A decoded frame's pts (frames without one are skipped before they get here)."""
    assert frame.pts is not None
    return int(frame.pts)


class _Cursor:
    """A decoding position in one open file: the last frame at or before the target, and one frame ahead."""

    def __init__(self, path: str, index: StreamIndex) -> None:
        self.path = path
        self.index = index
        self.container = open_video(path)
        self.stream = self.container.streams.video[0]
        self.stream.thread_type = "AUTO"
        self._frames: Iterator[av.VideoFrame] | None = None
        self.prev: av.VideoFrame | None = None
        self.ahead: av.VideoFrame | None = None
        self.eof = False
        self.error: av.FFmpegError | None = None

    def close(self) -> None:
        self.container.close()

    def seek(self, pts: int) -> None:
        self.container.seek(pts, stream=self.stream, backward=True, any_frame=False)
        self._frames = self.container.decode(self.stream)
        self.prev = self.ahead = None
        self.eof = False
        self.error = None

    @property
    def position(self) -> int | None:
        frame = self.ahead or self.prev
        return pts_of(frame) if frame is not None else None

    def _pull(self, t: float) -> av.VideoFrame | None:
        assert self._frames is not None
        while True:
            try:
                frame = next(self._frames)
            except StopIteration:
                return None
            except av.FFmpegError as exc:  # damage: keep what decoded so far, let the caller decide
                self.error = exc
                return None
            if frame.pts is None:
                continue
            if self.prev is not None and frame.pts <= pts_of(self.prev):
                continue  # out-of-order or repeated pts in a broken stream
            return frame

    def advance_to(self, tp: int, t: float) -> None:
        """Decode forward until ``prev`` is the frame on screen at pts ``tp`` (``ahead`` the next one)."""
        while not self.eof:
            if self.ahead is None:
                self.ahead = self._pull(t)
                if self.ahead is None:
                    self.eof = True
                    break
            if pts_of(self.ahead) <= tp:
                self.prev, self.ahead = self.ahead, None
            else:
                break


def _decode_sorted(
    path: str, info: VideoInfo, targets: list[float]
) -> Iterator[tuple[float, av.VideoFrame, float]]:
    """Yield ``(target, frame, end)`` for sorted unique targets; ``end`` is when the next frame starts."""
    index = stream_index(path)
    tb = index.time_base
    cursor = _Cursor(path, index)
    min_skip = SEEK_MIN_SKIP_FRAMES * index.min_step
    try:
        started = False
        for t in targets:
            tp = math.floor(t / tb + _PTS_EPS)
            kf = index.keyframe_at_or_before(tp)
            pos = cursor.position
            if not started or pos is None or (kf is not None and kf > pos and kf - pos >= min_skip):
                _seek_to(cursor, index, tp, t)
                started = True
            else:
                cursor.advance_to(tp, t)
            frame = cursor.prev
            if frame is None:  # target before the first frame: show the first frame
                frame = cursor.ahead
                if frame is None:
                    raise _damage(cursor, t, "no frame could be decoded")
                yield t, frame, float(frame.time)
                continue
            if cursor.ahead is not None:
                end = float(cursor.ahead.time)
            else:  # end of the stream, or damage right after this frame
                nxt = index.next_pts(pts_of(frame))
                if nxt is not None and tp >= nxt:
                    raise _damage(cursor, t, "decoding stopped early")
                end = float(nxt * tb) if nxt is not None else max(info.duration, float(frame.time) + 1e-3)
                if cursor.error is not None:
                    started = False  # a later target must seek past the damage, never decode through it
            yield t, frame, end
    finally:
        cursor.close()


def _damage(cursor: _Cursor, t: float, what: str) -> UnreadableVideoError:
    reason = f"{what} ({cursor.error})" if cursor.error is not None else what
    if cursor.prev is not None:
        reason += f"; last good frame at {cursor.prev.time:.3f} s"
    return UnreadableVideoError(cursor.path, reason, time=t)


def _seek_to(cursor: _Cursor, index: StreamIndex, tp: int, t: float) -> None:
    """Seek so that the frame on screen at ``tp`` is decoded; back off a keyframe if a seek overshoots."""
    kf = index.keyframe_at_or_before(tp)
    if kf is None:
        kf = int(index.keyframes[0])
    while True:
        cursor.seek(kf)
        cursor.advance_to(tp, t)
        if cursor.prev is not None or tp < index.first_pts:
            return
        earlier = index.keyframe_before(kf)
        if earlier is None:
            return
        kf = earlier


def frames_at(
    path: str | Path,
    times: Sequence[float],
    max_side: int | None = None,
    *,
    clamp: bool = False,
    cache: FrameCache | None = frame_cache,
) -> list[Frame]:
    """Return the frame on screen at each time, in the caller's order (duplicates allowed).

    ``max_side`` shrinks each image so its longer side fits. Times outside [0, duration] raise
    :class:`TimeOutOfRangeError` unless ``clamp`` is set. A missing file raises ``MediaNotFoundError``; a file or
    region that cannot be decoded raises ``UnreadableVideoError`` naming the file and the time.
    """
    key = file_key(path)
    info = probe(path)
    checked = check_times(info, times, clamp)
    out: list[Frame | None] = [None] * len(checked)
    pending: dict[float, list[int]] = {}
    for i, t in enumerate(checked):
        hit = cache.get(key, max_side, t) if cache is not None else None
        if hit is not None:
            out[i] = Frame(requested=t, time=hit.time, image=hit.image)
        else:
            pending.setdefault(t, []).append(i)
    if pending:
        groups = plan_groups(stream_index(key[0]), sorted(pending), DECODE_WORKERS)
        if len(groups) == 1:
            results = [_decode_group(key[0], info, groups[0], max_side)]
        else:
            with ThreadPoolExecutor(max_workers=len(groups)) as pool:
                futures = [pool.submit(_decode_group, key[0], info, g, max_side) for g in groups]
                results = []
                for future in futures:  # in time order, so the earliest damage is the one reported
                    results.append(future.result())
        for result in results:
            for t, entry in result:
                if cache is not None:
                    cache.put(key, max_side, entry)
                for i in pending[t]:
                    out[i] = Frame(requested=t, time=entry.time, image=entry.image)
    return [f for f in out if f is not None]


def _decode_group(path: str, info: VideoInfo, targets: list[float],
                  max_side: int | None) -> list[tuple[float, CachedFrame]]:
    images: dict[int, CachedFrame] = {}
    out = []
    for t, frame, end in _decode_sorted(path, info, targets):
        entry = images.get(pts_of(frame))
        if entry is None:
            entry = CachedFrame(time=float(frame.time), end=end, image=to_image(frame, max_side))
            images[pts_of(frame)] = entry
        out.append((t, entry))
    return out


def plan_groups(index: StreamIndex, targets: list[float], workers: int) -> list[list[float]]:
    """Split sorted targets into at most ``workers`` contiguous groups that decode independently.

    A target starts a new segment when reaching it means seeking anyway (its keyframe lies well past the previous
    target); segments are then dealt to groups in order, balancing the frames each group must decode.
    """
    if workers <= 1 or len(targets) < 2:
        return [targets]
    tb, step = index.time_base, index.min_step
    min_skip = SEEK_MIN_SKIP_FRAMES * step
    segments: list[list[float]] = []
    costs: list[float] = []
    prev_tp: int | None = None
    for t in targets:
        tp = math.floor(t / tb + _PTS_EPS)
        kf = index.keyframe_at_or_before(tp)
        kf = index.first_pts if kf is None else kf
        if prev_tp is None or (kf > prev_tp and kf - prev_tp >= min_skip):
            segments.append([t])
            costs.append((tp - kf) / step + 1 + COST_PER_SEEK_FRAMES)
        else:
            segments[-1].append(t)
            costs[-1] += (tp - prev_tp) / step + 1
        prev_tp = tp
    total = sum(costs)
    if len(segments) < 2 or total < MIN_PARALLEL_FRAMES:
        return [targets]
    n = min(workers, len(segments))
    groups: list[list[float]] = [[]]
    acc = 0.0
    for seg, cost in zip(segments, costs, strict=True):
        if groups[-1] and acc >= total * len(groups) / n and len(groups) < n:
            groups.append([])
        groups[-1].extend(seg)
        acc += cost
    return groups


def iter_frames(path: str | Path, start: float, end: float) -> Iterator[av.VideoFrame]:
    """Decode sequentially every frame on screen during [start, end): the one at ``start``, then each after."""
    info = probe(path)
    start, end = check_times(info, [start, end], clamp=True)
    index = stream_index(path)
    tp = math.floor(start / index.time_base + _PTS_EPS)
    cursor = _Cursor(str(path), index)
    try:
        _seek_to(cursor, index, tp, start)
        first = cursor.prev or cursor.ahead
        if first is None:
            raise _damage(cursor, start, "no frame could be decoded")
        yield first
        if cursor.prev is not None and cursor.ahead is not None and cursor.ahead.time < end:
            yield cursor.ahead
        last = cursor.ahead or cursor.prev
        cursor.prev = last
        while last is not None and last.time < end:
            frame = cursor._pull(float(last.time))
            if frame is None:
                nxt = index.next_pts(pts_of(last))
                if cursor.error is not None and nxt is not None and nxt * index.time_base < end:
                    raise _damage(cursor, float(nxt * index.time_base), "decoding stopped early")
                break
            if frame.time >= end:
                break
            yield frame
            cursor.prev = last = frame
    finally:
        cursor.close()
