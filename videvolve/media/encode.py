"""Write a constant-rate H.264 MP4 from RGB arrays (used by SynthWorld and by the test videos)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

MILLISECOND = Fraction(1, 1000)


def write_h264(path: str | Path, frames: Iterable[np.ndarray], fps: float, width: int, height: int,
               options: Mapping[str, str]) -> Path:
    """Encode RGB frames (H, W, 3 uint8) at ``fps``; frame ``i`` is shown at ``i / fps``. No metadata is written.

    The stream's rate is ``fps`` itself (to a thousandth), fractional ones too: vLLM's loader reads it back as the
    clip's frame rate and tells the model each frame's time by it (a 0.25 fps clip written at 1 fps had its frames
    said to be 1 s apart, not 4 s).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    container = av.open(str(path), "w")
    try:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1000))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        tb = Fraction(1, int(fps)) if float(fps).is_integer() else MILLISECOND  # exact frame times where it can
        stream.codec_context.time_base = tb
        stream.options = dict(options)
        container.metadata.clear()
        for i, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts, frame.time_base = round(i / fps / tb), tb
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()
    return path
