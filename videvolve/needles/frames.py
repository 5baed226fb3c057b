"""Where the trusted parent gets a task's pictures: the decoded video, with the task's needles painted in.

:class:`TaskServices` asks a :class:`FrameSource` for every frame, sheet cell, OCR image and clip it shows; a task
without a needle plan gets :class:`PlainFrames` (the decoded file), one with a plan :class:`NeedleFrames`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from videvolve.errors import MediaNotFoundError, SpliceSourceError
from videvolve.media.decode import Frame, frames_at
from videvolve.media.fingerprint import fingerprint
from videvolve.media.info import file_key
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
        """The decoded frames, needles painted in (none at all while a spliced video is gone: see check_splices)."""
        check_splices(self.plan)
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
    """The pictures the parent shows for ``task``: with its needles when it has a plan.

    Raises :class:`~videvolve.errors.SpliceSourceError` (a media error naming the file) when a video the plan
    splices in is gone or changed, before any frame is shown: see :func:`check_splices`.
    """
    plan = plan_of(task)
    if plan is None:
        return PlainFrames(task.video)
    check_splices(plan)
    return NeedleFrames(task.video, plan)


def check_splices(plan: NeedlePlan) -> None:
    """Every video the plan splices in is there and is the file the plan was made from (its fingerprint), or raise.

    Decoded lazily, frame by frame, a missing source failed only the frames inside the splice, and a harness that
    caught those errors read off the splice's times; a replaced one showed other pictures than the plan's. A plan
    made before fingerprints were kept is checked for the file's existence only.
    """
    for needle in plan.needles:
        if needle.kind != "splice" or not needle.source:
            continue
        try:
            key = file_key(needle.source)
        except MediaNotFoundError:
            raise SpliceSourceError(needle.source, changed=False) from None
        if needle.fingerprint is not None:
            try:
                now = fingerprint(key[0])
            except OSError:  # unreadable (permissions, removed meanwhile): not the file the plan was made from
                now = None
            if now != needle.fingerprint:
                raise SpliceSourceError(needle.source, changed=True)

