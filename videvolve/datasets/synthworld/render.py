"""Render a script to frames and encode them (H.264, fixed GOP, no scene-cut keyframes)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from videvolve.datasets.synthworld.palette import BACKGROUNDS, GLYPH_COLOURS, glyph_alpha
from videvolve.datasets.synthworld.script import VideoScript
from videvolve.media.encode import write_h264

GOP_SECONDS = 4
CRF = 16


@functools.lru_cache(maxsize=64)
def _background(width: int, height: int, name: str) -> np.ndarray:
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[:] = BACKGROUNDS[name]
    frame.setflags(write=False)
    return frame


def render_frame(script: VideoScript, t: float) -> np.ndarray:
    """The RGB frame (H, W, 3) uint8 on screen at time ``t`` (read-only when no glyph is on screen)."""
    bg = _background(script.width, script.height, script.scene_at(t).background)
    event = script.event_at(t)
    if event is None:
        return bg
    frame = bg.copy()
    x, y = event.position(t)
    alpha = glyph_alpha(event.shape, event.size, event.size)[..., None]
    colour = np.array(GLYPH_COLOURS[event.colour], dtype=np.float32)
    region = frame[y : y + event.size, x : x + event.size]
    region[:] = np.clip(alpha * colour + (1 - alpha) * region + 0.5, 0, 255).astype(np.uint8)
    return frame


def encode_video(script: VideoScript, out: str | Path, crf: int = CRF) -> Path:
    """Write the script as an MP4.

    The GOP is fixed and scene-cut detection off, so keyframe positions and sizes never mark scenes or events.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".part.mp4")
    gop = str(GOP_SECONDS * script.fps)
    n = round(script.duration * script.fps)
    write_h264(tmp, (render_frame(script, i / script.fps) for i in range(n)), script.fps, script.width,
               script.height, {"crf": str(crf), "preset": "veryfast", "g": gop, "keyint_min": gop,
                               "sc_threshold": "0", "tune": "animation"})
    tmp.replace(out)
    return out
