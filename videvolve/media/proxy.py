"""Proxies: a one-time, low-resolution, short-GOP copy of a slow source, cached by a content fingerprint.

Every frame keeps its source timestamp, so a time on the proxy is the same time on the source; frame access on a
3-hour, 4K or HEVC source then costs what it costs on a small file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import av

from videvolve.config import cache_home
from videvolve.media.decode import iter_frames, scaled_size, to_image
from videvolve.media.fingerprint import fingerprint
from videvolve.media.info import file_key, probe

PROXY_MAX_SIDE = 640
PROXY_GOP_SECONDS = 1.0


def default_proxy_dir() -> Path:
    """``~/.cache/videvolve/proxies``."""
    return cache_home() / "proxies"


def proxy_path(path: str | Path, cache_dir: Path | None = None, max_side: int = PROXY_MAX_SIDE) -> Path:
    """Where the proxy of a file lives (whether or not it exists yet)."""
    return (cache_dir or default_proxy_dir()) / f"{fingerprint(path)}-{max_side}.mp4"


def make_proxy(path: str | Path, cache_dir: Path | None = None, max_side: int = PROXY_MAX_SIDE,
               gop_seconds: float = PROXY_GOP_SECONDS) -> Path:
    """The proxy of ``path`` (built once; later calls return the cached file)."""
    file_key(path)
    out = proxy_path(path, cache_dir, max_side)
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    info = probe(path)
    width, height = scaled_size(info.width, info.height, max_side)
    width, height = width - width % 2, height - height % 2
    gop = max(1, round((info.fps or 25) * gop_seconds))
    fd, tmp_name = tempfile.mkstemp(suffix=".mp4", dir=out.parent)
    os.close(fd)
    container = av.open(tmp_name, "w")
    try:
        stream = container.add_stream("libx264")
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        tb = Fraction(1, 1000)
        stream.codec_context.time_base = tb
        stream.options = {"crf": "20", "preset": "veryfast", "g": str(gop), "keyint_min": str(gop),
                          "sc_threshold": "0", "bf": "0"}
        last_pts = -1
        for frame in iter_frames(path, 0.0, info.duration):
            image = to_image(frame, max_side)
            if image.size != (width, height):
                image = image.resize((width, height))
            out_frame = av.VideoFrame.from_image(image)
            pts = max(last_pts + 1, round(float(frame.time) / tb))  # the source's own timestamps
            out_frame.pts, out_frame.time_base, last_pts = pts, tb, pts
            for packet in stream.encode(out_frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()
    Path(tmp_name).replace(out)
    return out


def proxied(videos: list[str], mode: str, cache_dir: Path | None = None,
            on_build: Callable[[str], None] | None = None) -> dict[str, str]:
    """Source path -> the path to read frames from: its proxy (``always``, or ``auto`` when the source is slow)."""
    from videvolve.media.check import slow_reasons

    out = {}
    for video in dict.fromkeys(videos):
        use = mode == "always" or (mode == "auto" and bool(slow_reasons(probe(video))))
        if use:
            if on_build is not None and not proxy_path(video, cache_dir).exists():
                on_build(video)
            out[video] = str(make_proxy(video, cache_dir))
        else:
            out[video] = video
    return out
