"""Write a constant-rate H.264 MP4 from RGB arrays (used by SynthWorld and by the test videos)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from pathlib import Path

import av
import numpy as np


def write_h264(path: str | Path, frames: Iterable[np.ndarray], fps: int, width: int, height: int,
               options: Mapping[str, str]) -> Path:
    """Encode RGB frames (H, W, 3 uint8) at ``fps``; frame ``i`` is shown at ``i / fps``. No metadata is written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    container = av.open(str(path), "w")
    try:
        stream = container.add_stream("libx264", rate=Fraction(fps))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = dict(options)
        container.metadata.clear()
        for i, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()
    return path
