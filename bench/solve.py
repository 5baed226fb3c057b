"""Throughput of the solve engine against a server with GPU-like latency: concurrency 1 vs 8, side by side.

Starts `videvolve serve-sim --latency-ms 200` on 127.0.0.1, evaluates one fixed harness (uniform, 16 frames) over
the same tasks through the OpenAI-compatible client at concurrency 1 and 8 with the response cache off, and prints
tasks per second and the ratio. Usage: ``python bench/solve.py [--tasks 24] [--latency-ms 200]``
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.datasets.synthworld import generate_world
from videvolve.evaluation.solve import solve_tasks
from videvolve.models import make_vlm
from videvolve.models.cost import cost_model
from videvolve.skill_library.harness import load_harness, seed_path
from videvolve.testing import serve_sim

CACHE = Path(__file__).resolve().parent / ".cache"
console = Console(width=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    args = parser.parse_args()
    root = CACHE / "world_v4_m3_s1"
    if not (root / "tasks.jsonl").exists():
        generate_world(root, videos=4, minutes=3, seed=1)
    from videvolve.tasks import read_tasks

    tasks = read_tasks(root / "tasks.jsonl")[: args.tasks]
    harness_dir = Path(tempfile.mkdtemp(prefix="bench-uniform-")) / "uniform16"
    shutil.copytree(seed_path("uniform"), harness_dir)
    (harness_dir / "config.toml").write_text("n_frames = 16\nmax_side = 160\n")
    harness = load_harness(harness_dir)
    table = Table(title=f"solve throughput: {len(tasks)} tasks, uniform (16 frames), serve-sim with "
                        f"{args.latency_ms:g} ms latency, cache off")
    for col in ("concurrency", "seconds", "tasks/s", "speed-up"):
        table.add_column(col, justify="right")
    rates = {}
    with serve_sim("--latency-ms", str(args.latency_ms)) as base:
        vlm = make_vlm(ModelSettings(backend="openai", base_url=base, model="simvlm"))
        for concurrency in (1, 8):
            out = Path(tempfile.mkdtemp(prefix=f"bench-solve-{concurrency}-"))
            started = time.perf_counter()
            results = solve_tasks(harness, tasks, vlm, cost_model("qwen2.5-vl"),
                                  RuntimeSettings(concurrency=concurrency, image_format="png"), out, cache=None)
            elapsed = time.perf_counter() - started
            assert all(r.outcome == "ok" for r in results), [r.error for r in results if r.outcome != "ok"][:2]
            rates[concurrency] = len(tasks) / elapsed
            table.add_row(str(concurrency), f"{elapsed:.2f}", f"{rates[concurrency]:.2f}",
                          f"{rates[concurrency] / rates[1]:.1f}x")
    console.print(table)
    ratio = rates[8] / rates[1]
    console.print(f"{'PASS' if ratio >= 3 else 'FAIL'}: concurrency 8 is {ratio:.1f}x concurrency 1 (target 3x)")
    return 0 if ratio >= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
