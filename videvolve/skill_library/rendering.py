"""The rendering half of the trusted SDK services: observation handles turned into captioned images or clips.

A request's observation references become the parts the model sees: a frame with its time, a contact sheet with its
grid, a clip as a video or as frames (``RuntimeSettings.clip_mode``); each returns the pts keys it showed and its
image and video tokens, which ``TaskServices._call`` meters. Mixed into ``TaskServices``, whose state it uses.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from videvolve.media import contact_sheet
from videvolve.media.captions import frame_caption, sheet_caption, video_caption
from videvolve.media.data_url import data_url_cache
from videvolve.media.info import file_key
from videvolve.skill_library import limits
from videvolve.skill_library.steps import FrameSpec, SheetSpec

if TYPE_CHECKING:
    from PIL import Image

    from videvolve.config import RuntimeSettings
    from videvolve.media.decode import Frame
    from videvolve.models.base import Message
    from videvolve.models.cost import CostModel
    from videvolve.needles.frames import FrameSource
    from videvolve.skill_library.meter import Meter


@dataclass
class Obs:
    """What one observation handle stands for: its kind, times and how it is shown (the parent's side only)."""

    kind: str
    times: list[float]
    max_side: int | None = None
    cols: int = 6
    cell_width: int = 160
    start: float = 0.0
    end: float = 0.0
    fps: float = 0.0
    shape: limits.Shape | None = None


class RenderingServices:
    """Observation references to model content; mixed into ``TaskServices``, whose state it uses."""

    video: str
    pictures: FrameSource
    cost: CostModel
    settings: RuntimeSettings
    meter: Meter
    _handles: dict[str, Obs]
    _video_key: Hashable

    def _spec(self, handle: str) -> FrameSpec | SheetSpec:
        obs = self._handles[handle]
        if obs.kind == "sheet":  # as it was laid out: the report and the editor's workspace draw it again so
            return SheetSpec(times=obs.times, cell_width=obs.cell_width, cols=obs.cols)
        return FrameSpec(kind="clip" if obs.kind == "clip" else "frame", times=obs.times, max_side=obs.max_side)

    def _render(self, messages: list[Message]) -> tuple[list[Message], set[float], int, int, set[float]]:
        """Replace observation references by captioned images; return pts keys, tokens and observed times."""
        keys: set[float] = set()
        image_tokens = video_tokens = 0
        observed: set[float] = set()
        out: list[Message] = []
        frames = self._single_frames(messages)  # also notes the video's version, the key of its encoded frames
        for m in messages:
            content = m.get("content")
            if not isinstance(content, list):
                out.append(m)
                continue
            parts: list[dict[str, Any]] = []
            for part in content:
                if part.get("type") != "observation_ref":
                    parts.append(part)
                    continue
                obs = self._handles[part["handle"]]
                rendered, k, it, vt = self._render_obs(obs, frames)
                parts += rendered
                keys |= k
                image_tokens += it
                video_tokens += vt
                observed |= set(obs.times)
            out.append({**m, "content": parts})
        return out, keys, image_tokens, video_tokens, observed

    def _single_frames(self, messages: list[Message]) -> dict[tuple[int | None, float], Frame]:
        """Every frame observation of a request, decoded in one pass per size (not one per frame)."""
        wanted: dict[int | None, list[float]] = {}
        for m in messages:
            for part in m["content"] if isinstance(m.get("content"), list) else ():
                obs = self._handles[part["handle"]] if part.get("type") == "observation_ref" else None
                if obs is not None and obs.kind == "frame":
                    wanted.setdefault(obs.max_side, []).append(obs.times[0])
        self._video_key = (file_key(self.video), self.pictures.key)
        return {(side, t): f for side, times in wanted.items()
                for t, f in zip(times, self.pictures.frames(times, side), strict=True)}

    def _render_obs(self, obs: Obs, single: dict[tuple[int | None, float], Frame]
                    ) -> tuple[list[dict[str, Any]], set[float], int, int]:
        if obs.kind == "frame":
            frame = single[(obs.max_side, obs.times[0])]
            return ([{"type": "text", "text": frame_caption(obs.times[0])},
                     self._image_part(frame.image, (obs.max_side, frame.time))],
                    {frame.time}, self.cost.image_tokens(*frame.image.size), 0)
        if obs.kind == "sheet":
            frames = self.pictures.frames(obs.times, obs.cell_width)
            sheet = contact_sheet(frames, cols=obs.cols, cell_width=obs.cell_width)
            return ([{"type": "text", "text": sheet_caption(sheet)}, self._image_part(sheet.image)],
                    {f.time for f in frames}, self.cost.image_tokens(*sheet.image.size), 0)
        frames = self.pictures.frames(obs.times, obs.max_side)
        keys = {f.time for f in frames}
        if self.settings.clip_mode == "video" and len(frames) > 1:  # Qwen3-VL refuses a one-frame video
            w, h = frames[0].image.size  # the clip's size: even, as H.264 needs (media/clip.py)
            return self._video_part(obs, frames), keys, 0, self.cost.video_tokens(w - w % 2, h - h % 2,
                                                                                   len(frames), obs.fps)
        parts: list[dict[str, Any]] = []
        tokens = 0
        for t, f in zip(obs.times, frames, strict=True):
            parts += [{"type": "text", "text": frame_caption(t)}, self._image_part(f.image, (obs.max_side, f.time))]
            tokens += self.cost.image_tokens(*f.image.size)
        return parts, keys, tokens, 0

    def _video_part(self, obs: Obs, frames: list[Any]) -> list[dict[str, Any]]:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="videvolve-clip-") as scratch:
            out = Path(scratch) / "clip.mp4"
            # exactly the frames on screen at obs.times (start + k / fps), whatever the clip's end or the frame cap
            self.pictures.clip(obs.start, obs.times[-1] + 1 / obs.fps, out, obs.fps, obs.max_side)
            url = "data:video/mp4;base64," + base64.b64encode(out.read_bytes()).decode()
        return [{"type": "text", "text": video_caption(obs.start, obs.end, obs.times)},
                {"type": "video_url", "video_url": {"url": url}, "num_frames": len(frames)}]

    def _image_part(self, image: Image.Image, frame: tuple[int | None, float] | None = None) -> dict[str, Any]:
        """An ``image_url`` part; a video frame's (``frame``: its max side and start) encoding is cached."""
        encoding = time.perf_counter()
        key = (self._video_key, *frame) if frame is not None else None
        url = data_url_cache.url(key, image, self.settings.image_format, self.settings.jpeg_quality)
        self.meter.spend("encode", time.perf_counter() - encoding)
        return {"type": "image_url", "image_url": {"url": url}}
