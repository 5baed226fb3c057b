"""Frame access through a proxy: a long 720p source with a 10 s GOP, direct versus through its proxy.

Makes (once, cached in bench/.cache) a 30-minute 1280x720 H.264 source with a 10 s GOP whose frames encode their
index, builds its proxy (reported separately: a one-time cost), then with cold caches times ``frames_at`` at 64
random timestamps on the source and on the proxy, and checks that the proxy returns the same frames to within one
frame period. Usage: ``python bench/proxy.py [--minutes 30]``
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from videvolve.media import frames_at
from videvolve.media.info import _probe, _stream_index
from videvolve.media.proxy import make_proxy
from videvolve.testing import make_index_video, read_index

CACHE = Path(__file__).resolve().parent / ".cache"
FPS, W, H, GOP_S = 25, 1280, 720, 10
console = Console(width=120)


def cold() -> None:
    _probe.cache_clear()
    _stream_index.cache_clear()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    args = parser.parse_args()
    CACHE.mkdir(exist_ok=True)
    source = CACHE / f"index_{W}x{H}_{FPS}fps_gop{GOP_S}s_{args.minutes:g}min.mp4"
    if not source.exists():
        console.print(f"encoding {source.name} (once) ...")
        make_index_video(source.with_suffix(".part.mp4"), seconds=args.minutes * 60, fps=FPS, gop=GOP_S * FPS,
                         width=W, height=H, preset="ultrafast")
        source.with_suffix(".part.mp4").replace(source)
    proxies = CACHE / "proxies"
    shutil.rmtree(proxies, ignore_errors=True)
    started = time.perf_counter()
    proxy = make_proxy(source, proxies)
    build = time.perf_counter() - started
    rng = random.Random(0)
    times = [rng.uniform(0, args.minutes * 60) for _ in range(64)]
    n = round(args.minutes * 60 * FPS)
    expected = [min(math.floor(t * FPS + 1e-9), n - 1) for t in times]
    results = {}
    for name, path in (("source", source), ("proxy", proxy)):
        cold()
        t0 = time.perf_counter()
        frames = frames_at(path, times, cache=None)
        results[name] = (time.perf_counter() - t0, [read_index(f.image) for f in frames])
    within = sum(abs(got - want) <= 1 for got, want in zip(results["proxy"][1], expected, strict=True))
    exact_source = sum(got == want for got, want in zip(results["source"][1], expected, strict=True))
    table = Table(title=f"64 random timestamps, {args.minutes:g} min {W}x{H} {FPS} fps H.264, {GOP_S} s GOP, "
                        "cold caches")
    for col in ("read from", "seconds", "frames right", "speed-up"):
        table.add_column(col, justify="right")
    table.add_row("source", f"{results['source'][0]:.2f}", f"{exact_source}/64 exact", "")
    table.add_row(f"proxy ({proxy.stat().st_size / 1e6:.0f} MB, 640x360, 1 s GOP)", f"{results['proxy'][0]:.2f}",
                  f"{within}/64 within one frame", f"{results['source'][0] / results['proxy'][0]:.1f}x")
    console.print(table)
    console.print(f"proxy build (once per source): {build:.1f} s for {source.stat().st_size / 1e6:.0f} MB")
    ratio = results["source"][0] / results["proxy"][0]
    ok = ratio >= 5 and within == 64
    console.print(f"{'PASS' if ok else 'FAIL'}: {ratio:.1f}x faster through the proxy (target 5x), "
                  f"{within}/64 frames within one frame period")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
