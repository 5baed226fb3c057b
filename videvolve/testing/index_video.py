"""Videos whose frames encode their own index, so a test can tell exactly which frame came back.

Each frame carries its index as a row of black/white blocks (one bit each, most significant first), large enough
to survive H.264 compression and downscaling.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from videvolve.media.encode import write_h264

BITS = 16


def index_frame(i: int, width: int, height: int) -> np.ndarray:
    """An RGB frame whose top band encodes ``i`` in ``BITS`` blocks; the rest is a gradient that changes with i."""
    frame = np.zeros((height, width, 3), dtype=np.uint8)
    band = height // 3
    block = width // BITS
    for b in range(BITS):
        if (i >> (BITS - 1 - b)) & 1:
            frame[:band, b * block : (b + 1) * block] = 255
    frame[band:, :, 0] = (i * 7) % 256
    frame[band:, :, 1] = np.linspace(0, 255, width, dtype=np.uint8)[None, :]
    frame[band:, :, 2] = 96
    return frame


def read_index(image: Image.Image) -> int:
    """Decode the index written by :func:`index_frame` (works on downscaled frames too)."""
    a = np.asarray(image.convert("L"), dtype=np.float32)
    h, w = a.shape
    band = h // 3
    block = w / BITS
    value = 0
    for b in range(BITS):
        x0, x1 = int(b * block + block * 0.25), int((b + 1) * block - block * 0.25)
        bit = a[int(band * 0.2) : int(band * 0.8), x0 : max(x1, x0 + 1)].mean() > 128
        value = (value << 1) | int(bit)
    return value


def make_index_video(path: str | Path, seconds: float = 20.0, fps: int = 25, gop: int = 12,
                     width: int = 320, height: int = 180, preset: str = "veryfast") -> Path:
    """Encode an H.264 MP4 (with B-frames) whose frame ``i`` shows index ``i`` at time ``i / fps``."""
    frames = (index_frame(i, width, height) for i in range(round(seconds * fps)))
    return write_h264(path, frames, fps, width, height, {"preset": preset, "crf": "20", "g": str(gop),
                                                         "keyint_min": str(gop), "sc_threshold": "0", "bf": "2"})
