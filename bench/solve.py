"""Throughput of the solve engine against a server with GPU-like latency: concurrency 1 vs 8, side by side.

Two servers on 127.0.0.1, each answering after ``--latency-ms`` (200 by default), evaluated with one fixed harness
(uniform, 16 frames) over the same tasks through the OpenAI-compatible client, response cache off:

1. `serve-sim` (SimVLM perceives every frame, on the same 2 cores as the client);
2. `serve-sim --canned A` (a fixed reply and no work, so the cores measure only the client): concurrency 8 should
   reach at least 7x concurrency 1 (8x is the limit), and the table says where a task's client time goes
   (sandbox start, decoding, encoding, waiting for the model).

Usage: ``python bench/solve.py [--tasks 24] [--latency-ms 200]``
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
from videvolve.tasks import read_tasks
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
    tasks = read_tasks(root / "tasks.jsonl")[: args.tasks]
    harness_dir = Path(tempfile.mkdtemp(prefix="bench-uniform-")) / "uniform16"
    shutil.copytree(seed_path("uniform"), harness_dir)
    (harness_dir / "config.toml").write_text("n_frames = 16\nmax_side = 160\n")
    harness = load_harness(harness_dir)
    table = Table(title=f"solve throughput: {len(tasks)} tasks, uniform (16 frames), serve-sim with "
                        f"{args.latency_ms:g} ms latency, cache off")
    for col in ("concurrency", "seconds", "tasks/s", "speed-up"):
        table.add_column(col, justify="right")
    rates, _ = throughput(harness, tasks, ("--latency-ms", str(args.latency_ms)), table)
    console.print(table)
    ratio = rates[8] / rates[1]
    console.print(f"{'PASS' if ratio >= 3 else 'FAIL'}: concurrency 8 is {ratio:.1f}x concurrency 1 (target 3x)")

    mcq = [t for t in read_tasks(root / "tasks.jsonl") if t.kind == "mcq"][: args.tasks]
    canned = Table(title=f"the client alone: {len(mcq)} mcq tasks, uniform (16 frames), a canned reply after "
                         f"{args.latency_ms:g} ms, cache off")
    for col in ("concurrency", "seconds", "tasks/s", "speed-up"):
        canned.add_column(col, justify="right")
    client_rates, seconds = throughput(harness, mcq, ("--canned", "A", "--latency-ms", str(args.latency_ms)), canned)
    console.print(canned)
    where = Table(title="where one task's client time goes (concurrency 1, mean seconds per task)")
    for col in ("sandbox start", "decoding", "encoding", "waiting for the model", "the rest", "task wall time"):
        where.add_column(col, justify="right")
    where.add_row(*(f"{seconds[k]:.3f}" for k in ("sandbox_start", "decode", "encode", "model_wait", "rest", "wall")))
    console.print(where)
    client = client_rates[8] / client_rates[1]
    console.print(f"{'PASS' if client >= 7 else 'FAIL'}: against the canned server concurrency 8 is {client:.1f}x "
                  f"concurrency 1 (target 7x, limit 8x)")
    return 0 if ratio >= 3 and client >= 7 else 1


def throughput(harness, tasks, server_flags, table) -> tuple[dict[int, float], dict[str, float]]:
    """Tasks per second at concurrency 1 and 8 against a fresh server; the mean client seconds at concurrency 1."""
    rates: dict[int, float] = {}
    seconds: dict[str, float] = {}
    with serve_sim(*server_flags) as base:
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
            if concurrency == 1:
                for r in results:
                    for k, v in r.usage.get("client_s", {}).items():
                        seconds[k] = seconds.get(k, 0.0) + v / len(results)
                seconds["wall"] = sum(r.wall_s for r in results) / len(results)
    known = sum(seconds.get(k, 0.0) for k in ("sandbox_start", "decode", "encode", "model_wait"))
    seconds = {k: seconds.get(k, 0.0) for k in ("sandbox_start", "decode", "encode", "model_wait", "wall")}
    seconds["rest"] = max(0.0, seconds["wall"] - known)
    return rates, seconds


if __name__ == "__main__":
    sys.exit(main())
