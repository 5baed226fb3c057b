"""Frame access speed: videvolve's planned ``frames_at`` against the usual ways, side by side in one run.

Makes (once, cached in bench/.cache) a 20-minute 640x360 30 fps H.264 video whose frames encode their index,
with a 2 s and a 10 s GOP; then, with cold caches, times 64 random timestamps and a dense 1 fps sweep:

- ``frames_at`` (plans the decode: sorted targets, seeks only when it skips frames, one pass for dense requests);
- moviepy ``VideoFileClip.get_frame`` (random timestamps);
- one ffmpeg subprocess per frame, ``-ss`` snapped to the frame's start (random timestamps; STACK.md);
- per-frame seeking: one open file, seek to the keyframe before each target and decode forward (the sweep).

Every returned frame is checked against its encoded index. Usage: ``python bench/media.py [--minutes 20]``.
"""

from __future__ import annotations

import argparse
import math
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import av
import imageio_ffmpeg
import numpy as np
from PIL import Image
from rich.console import Console
from rich.table import Table

from videvolve.media import frames_at
from videvolve.media.info import _probe, _stream_index
from videvolve.testing import make_index_video, read_index

CACHE = Path(__file__).resolve().parent / ".cache"
FPS, W, H = 30, 640, 360
console = Console(width=130)


def video(gop_seconds: int, minutes: float) -> Path:
    path = CACHE / f"index_{W}x{H}_{FPS}fps_gop{gop_seconds}s_{minutes:g}min.mp4"
    if not path.exists():
        console.print(f"encoding {path.name} (once) ...")
        make_index_video(path.with_suffix(".part.mp4"), seconds=minutes * 60, fps=FPS, gop=gop_seconds * FPS,
                         width=W, height=H, preset="veryfast")
        path.with_suffix(".part.mp4").replace(path)
    return path


def expected(t: float, n: int) -> int:
    return min(math.floor(t * FPS + 1e-9), n - 1)


def cold() -> None:
    _probe.cache_clear()
    _stream_index.cache_clear()


def ours(path: Path, times: list[float]) -> list[Image.Image]:
    cold()
    return [f.image for f in frames_at(path, times, cache=None)]


def per_frame_seek(path: Path, times: list[float]) -> list[Image.Image]:
    """The unplanned way: for each time, seek to the keyframe before it and decode forward to the frame."""
    out = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        tb = stream.time_base
        for t in times:
            container.seek(int(t / tb), stream=stream, backward=True)
            prev = None
            for frame in container.decode(stream):
                if frame.time > t + 1e-9:
                    break
                prev = frame
            out.append((prev or frame).to_image())
    return out


def moviepy_get_frame(path: Path, times: list[float]) -> list[Image.Image]:
    from moviepy import VideoFileClip

    with VideoFileClip(str(path), audio=False) as clip:
        return [Image.fromarray(clip.get_frame(t)) for t in times]


def ffmpeg_per_frame(path: Path, times: list[float]) -> list[Image.Image]:
    exe = imageio_ffmpeg.get_ffmpeg_exe()
    out = []
    for t in times:
        start = math.floor(math.floor(t * FPS + 1e-9) / FPS * 1e6) / 1e6  # snap to the frame's start, round down
        raw = subprocess.run([exe, "-v", "error", "-ss", f"{start:.6f}", "-i", str(path), "-frames:v", "1",
                              "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], capture_output=True, check=True).stdout
        out.append(Image.fromarray(np.frombuffer(raw, np.uint8).reshape(H, W, 3)))
    return out


def timed(fn: Callable[[Path, list[float]], list[Image.Image]], path: Path, times: list[float],
          n: int) -> tuple[float, int]:
    start = time.perf_counter()
    images = fn(path, times)
    elapsed = time.perf_counter() - start
    right = sum(read_index(im) == expected(t, n) for im, t in zip(images, times, strict=True))
    return elapsed, right


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    CACHE.mkdir(exist_ok=True)
    n = round(args.minutes * 60 * FPS)
    rng = random.Random(args.seed)
    random_times = [rng.uniform(0, args.minutes * 60) for _ in range(64)]
    sweep = [float(s) for s in range(int(args.minutes * 60))]
    table = Table(title=f"frame access, {args.minutes:g} min {W}x{H} {FPS} fps H.264, cold caches")
    numeric = ("seconds", "frames right", "videvolve is faster by")
    for col in ("GOP", "request", "method", *numeric):
        table.add_column(col, justify="right" if col in numeric else "left")
    checks: list[tuple[str, float, float]] = []
    for gop in (2, 10):
        path = video(gop, args.minutes)
        for label, times, baselines, targets in (
            ("64 random", random_times, [("moviepy get_frame", moviepy_get_frame),
                                         ("ffmpeg -ss per frame", ffmpeg_per_frame)],
             {"moviepy get_frame": 3.0 if gop == 2 else 2.0, "ffmpeg -ss per frame": 2.0}),
            (f"1 fps sweep ({len(sweep)})", sweep, [("per-frame seeking", per_frame_seek)],
             {"per-frame seeking": 2.0 if gop == 10 else 0.0}),
        ):
            t_ours, ok_ours = timed(ours, path, times, n)
            table.add_row(f"{gop} s", label, "videvolve frames_at", f"{t_ours:.2f}", f"{ok_ours}/{len(times)}", "")
            for name, fn in baselines:
                t_base, ok_base = timed(fn, path, times, n)
                ratio = t_base / t_ours
                table.add_row("", "", name, f"{t_base:.2f}", f"{ok_base}/{len(times)}", f"{ratio:.1f}x")
                checks.append((f"{gop} s GOP, {label}: vs {name}", ratio, targets[name]))
            if ok_ours != len(times):
                checks.append((f"{gop} s GOP, {label}: frames_at returned a wrong frame", 0.0, 1.0))
    console.print(table)
    failed = False
    for what, ratio, target in checks:
        if target == 0.0:
            console.print(f"[dim]INFO[/] {what}: {ratio:.1f}x (no target: with a 2 s GOP a 1 fps sweep needs the same "
                          "frames either way; the gain is parallel decoding)")
            continue
        ok = ratio >= target
        failed |= not ok
        console.print(f"[{'green' if ok else 'red'}]{'PASS' if ok else 'FAIL'}[/] {what}: {ratio:.1f}x "
                      f"(target {target:g}x)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
