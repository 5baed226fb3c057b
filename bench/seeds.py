"""The seed harnesses on a SynthWorld test split, side by side (the README's seed table).

Generates (once, cached in bench/.cache) a world of 12 videos of 20-30 minutes, runs `uniform`, `scan_refine` and a
zero-frame harness (the model answers without seeing anything) with SimVLM on its test split, and prints grounding
mIoU and R@0.5 (all targets and targets of <= 10 s), mcq accuracy, mean frames and visual tokens per question,
errors. `coevowhen_base` needs a model that chooses tools (a real VLM, or the scripted model of the tests).

Usage: ``python bench/seeds.py [--videos 12] [--minutes 25] [--seed 0]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from videvolve.config import RuntimeSettings
from videvolve.datasets.synthworld import generate_world
from videvolve.evaluation.solve import solve_tasks
from videvolve.evaluation.summary import summarize
from videvolve.metrics import paired_bootstrap
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness, seed_path
from videvolve.tasks import read_tasks

CACHE = Path(__file__).resolve().parent / ".cache"
ZERO = 'def solve(task, ctx):\n    return {"answer": ctx.ask([])}\n'
console = Console(width=140)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=12)
    parser.add_argument("--minutes", type=float, default=25.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", default="test")
    args = parser.parse_args()
    root = CACHE / f"world_v{args.videos}_m{args.minutes:g}_s{args.seed}"
    if not (root / "tasks.jsonl").exists():
        console.print(f"generating {root.name} ...")
        generate_world(root, videos=args.videos, minutes=args.minutes, seed=args.seed)
    tasks = [t for t in read_tasks(root / "tasks.jsonl") if t.split == args.split]
    zero_dir = Path(tempfile.mkdtemp(prefix="zero-frames-"))
    (zero_dir / "solver.py").write_text(ZERO)
    harnesses = {"uniform": seed_path("uniform"), "scan_refine": seed_path("scan_refine"), "zero frames": zero_dir}
    short = [i for i, t in enumerate(tasks) if t.kind == "grounding" and t.intervals
             and max(x.length for x in t.intervals) <= 10]
    table = Table(title=f"seed harnesses, SimVLM, {args.split} split of {root.name}: {len(tasks)} questions over "
                        f"{len({t.video_id for t in tasks})} videos ({len(short)} grounding targets of <= 10 s)")
    for col in ("harness", "grounding mIoU", "R@0.5", "mIoU <= 10 s", "mcq accuracy", "frames/q", "image tok/q",
                "errors", "seconds"):
        table.add_column(col, justify="left" if col == "harness" else "right")
    scores: dict[str, list[float]] = {}
    frames: dict[str, float] = {}
    for name, path in harnesses.items():
        started = time.perf_counter()
        out = CACHE / "seed_runs" / root.name / name.replace(" ", "_")
        results = solve_tasks(load_harness(path), tasks, SimVLM(), cost_model("qwen2.5-vl"),
                              RuntimeSettings(concurrency=2), out)
        s = summarize(tasks, results)
        scores[name] = [results[i].score for i in short]
        frames[name] = s["frames_per_question"]
        g = s.get("grounding", {})
        table.add_row(name, f"{g.get('miou', 0):.3f}", f"{g.get('R@0.5', 0):.3f}", f"{np.mean(scores[name]):.3f}",
                      f"{s['mcq']['accuracy']:.3f}", f"{s['frames_per_question']:.1f}",
                      f"{s['image_tokens_per_question']:.0f}", str(s["errors"]), f"{time.perf_counter() - started:.0f}")
    console.print(table)
    diff = paired_bootstrap(scores["uniform"], scores["scan_refine"])
    ratio = frames["scan_refine"] / frames["uniform"]
    ok = diff.diff >= 0.2 and abs(ratio - 1) <= 0.1
    console.print(f"targets <= 10 s: scan_refine - uniform = {diff.diff:+.3f} mIoU (95% CI {diff.ci_low:+.3f} to "
                  f"{diff.ci_high:+.3f}, paired bootstrap p = {diff.p_value:.4f}); frames ratio {ratio:.2f} "
                  f"-> {'PASS' if ok else 'FAIL'} (>= +0.2 mIoU within +-10 % frames)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
