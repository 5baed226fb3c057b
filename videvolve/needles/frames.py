"""Where the trusted parent gets a task's pictures: the decoded video, with the task's needles painted in.

:class:`TaskServices` asks a :class:`FrameSource` for every frame, sheet cell, OCR image and clip it shows; a task
without a needle plan gets :class:`PlainFrames` (the decoded file), one with a plan :class:`NeedleFrames`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from videvolve.media.decode import Frame, frames_at
from videvolve.needles.needles import NeedlePlan, paint

if TYPE_CHECKING:
    from videvolve.tasks import Task

PLAN_KEY = "needle_plan"
"""The key of a task's needle plan in its ``meta`` (parent side only)."""


class FrameSource(Protocol):
    """Decoded pictures of one task's video."""

    video: str
    key: Hashable
    """Names these pictures in the encoded-image cache (a plan's pictures differ from the file's)."""

    def frames(self, times: Sequence[float], max_side: int | None) -> list[Frame]:
        """The frame on screen at each time (clamped to the video)."""
        ...

    def clip(self, start: float, end: float, out: Path, fps: float, max_side: int | None) -> Path:
        """An MP4 of [start, end) at ``fps``."""
        ...


class PlainFrames:
    """The video's own frames."""

    def __init__(self, video: str) -> None:
        self.video = video
        self.key: Hashable = None

    def frames(self, times: Sequence[float], max_side: int | None) -> list[Frame]:
        """The decoded frames."""
        return frames_at(self.video, times, max_side=max_side, clamp=True)

    def clip(self, start: float, end: float, out: Path, fps: float, max_side: int | None) -> Path:
        """The file's own clip."""
        from videvolve.media import clip as make_clip

        make_clip(self.video, start, end, out, fps=fps, max_side=max_side)
        return out


class NeedleFrames:
    """The video's frames with a needle plan painted in (by each frame's own pts)."""

    def __init__(self, video: str, plan: NeedlePlan) -> None:
        self.video = video
        self.plan = plan
        self.key: Hashable = plan.id

    def frames(self, times: Sequence[float], max_side: int | None) -> list[Frame]:
        """The decoded frames, needles painted in."""
        return [Frame(requested=f.requested, time=f.time, image=paint(f.image, f.time, self.plan))
                for f in frames_at(self.video, times, max_side=max_side, clamp=True)]

    def clip(self, start: float, end: float, out: Path, fps: float, max_side: int | None) -> Path:
        """Every clip of a task with a plan is encoded here, needles or not, so the encoding tells nothing."""
        from videvolve.media.encode import write_h264

        n = max(1, round((end - start) * fps))
        frames = self.frames([start + k / fps for k in range(n)], max_side)
        w, h = (d - d % 2 for d in frames[0].image.size)
        arrays = (np.asarray(f.image.convert("RGB"))[:h, :w] for f in frames)
        write_h264(out, arrays, fps, w, h, {"crf": "18", "preset": "veryfast"})
        return out


def plan_of(task: Task) -> NeedlePlan | None:
    """The task's needle plan, if it has one."""
    data = task.meta.get(PLAN_KEY)
    return NeedlePlan.model_validate(data) if data else None


def frame_source(task: Task) -> FrameSource:
    """The pictures the parent shows for ``task``: with its needles when it has a plan."""
    plan = plan_of(task)
    return NeedleFrames(task.video, plan) if plan is not None else PlainFrames(task.video)
