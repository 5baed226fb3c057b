"""Check a folder of real videos before a run: what each file is, and what will be slow or fail."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from videvolve.errors import MediaError, UnreadableVideoError
from videvolve.media.decode import frames_at, iter_frames
from videvolve.media.info import VideoInfo, probe, stream_index

VIDEO_SUFFIXES = (".mp4", ".mkv", ".webm", ".mov", ".avi", ".m4v", ".mpg", ".mpeg", ".ts", ".flv", ".wmv")
SLOW_CODECS = ("hevc", "av1", "vp9", "prores")
LONG_SECONDS = 3600.0
LARGE_GOP_SECONDS = 5.0
LARGE_PIXELS = 1920 * 1080
CHECK_POINTS = 16


@dataclass
class VideoCheck:
    """One file's facts and verdict."""

    path: Path
    info: VideoInfo | None = None
    status: str = "ok"
    """ok, slow (works, but a proxy would make frame access much faster), or fail."""
    notes: list[str] = field(default_factory=list)
    damage_at: float | None = None

    @property
    def needs_proxy(self) -> bool:
        """Whether a proxy would help."""
        return self.status == "slow"


def list_videos(folder: Path) -> list[Path]:
    """Video files under a folder (recursively), sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES)


def slow_reasons(info: VideoInfo) -> list[str]:
    """Why frame access on this file will be slow (empty when it will not)."""
    slow = []
    if info.codec in SLOW_CODECS:
        slow.append(f"{info.codec} decodes slowly on a CPU")
    if info.width * info.height > LARGE_PIXELS:
        slow.append(f"{info.width}x{info.height} is large")
    if info.duration > LONG_SECONDS and info.keyframe_interval > LARGE_GOP_SECONDS:
        slow.append(f"{info.duration / 3600:.1f} h with a keyframe every {info.keyframe_interval:.0f} s")
    if info.variable_frame_rate:
        slow.append("variable frame rate")
    return slow


def _damage(path: Path, info: VideoInfo, failed_at: float) -> float:
    """The time where decoding first fails, found by decoding forward from the keyframe before ``failed_at``."""
    index = stream_index(path)
    tp = int(failed_at / index.time_base)
    kf = index.keyframe_at_or_before(tp)
    start = float(kf * index.time_base) if kf is not None else 0.0
    last = start
    try:
        for frame in iter_frames(path, start, info.duration):
            last = float(frame.time)
    except UnreadableVideoError:
        return last
    return failed_at


def check_video(path: Path) -> VideoCheck:
    """Probe a file and decode frames spread over it; say what will be slow or fail."""
    check = VideoCheck(path)
    try:
        info = probe(path)
    except MediaError as exc:
        check.status, check.notes = "fail", [str(exc).split(" (")[0]]
        return check
    check.info = info
    slow = slow_reasons(info)
    times = [info.duration * (i + 0.5) / CHECK_POINTS for i in range(CHECK_POINTS)] + [info.duration]
    try:
        frames_at(path, times, max_side=64, cache=None)
    except UnreadableVideoError as exc:
        check.status = "fail"
        check.damage_at = _damage(path, info, exc.time if exc.time is not None else 0.0)
        check.notes = [f"damaged: decoding fails after {check.damage_at:.2f} s (frames before it still decode)"]
        return check
    if slow:
        check.status, check.notes = "slow", [*slow, "make a proxy: `videvolve videos proxy`"]
    return check
