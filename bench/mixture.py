"""The mixture of harnesses by frame budget against the single best harness, on the held-out test split.

One evolution (SimVLM, heuristic editor, MCTS so that the tree holds several versions) with ``--budgets``; then, at
each tier's per-question frame cap, the version the mixture routes to (``resolve_harness(run, cap)``, as ``eval``
and ``ask`` do) and the run's best harness on the selection set overall both answer the test split under that cap.
The mixture passes a tier when its mean score is at least the single harness's minus one paired standard error
(the standard error of the per-question score differences).

Usage: ``python bench/mixture.py [--seed 0] [--budgets 16 32 64 128] [--iterations 5] [--fresh]`` (the evolution
is resumed from ``bench/.cache`` when it is there, which gives the same run as starting anew)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from videvolve.api import resolve_harness
from videvolve.config import RuntimeSettings
from videvolve.datasets.synthworld import generate_world
from videvolve.evaluation.solve import solve_tasks
from videvolve.evaluation.summary import summarize
from videvolve.folderlock import remove_tree
from videvolve.graph.driver import evolve
from videvolve.loop.context import Context
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness
from videvolve.tasks import read_tasks

CACHE = Path(__file__).resolve().parent / ".cache" / "mixture"
console = Console(width=160)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budgets", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--fresh", action="store_true", help="start the evolution anew (default: resume it)")
    args = parser.parse_args()
    started = time.time()
    root = CACHE / f"seed{args.seed}"
    world = root / "world"
    if not (world / "tasks.jsonl").exists():
        generate_world(world, videos=12, minutes=10, seed=args.seed, questions=20)
    run = root / "run"
    if args.fresh:
        for d in (run, root / "memory"):
            remove_tree(d)
    runtime = RuntimeSettings(concurrency=2)
    ctx = Context(run_dir=str(run), run_id=f"mixture{args.seed}", tasks=str(world / "tasks.jsonl"),
                  memory=str(root / "memory"), embedder="hashing", cache=str(root / "cache.sqlite"),
                  iterations=args.iterations, batch=8, seed=args.seed, search="mcts", children=2,
                  budgets=args.budgets, runtime=runtime)
    final = evolve(ctx)
    best = final["incumbent"]
    mixture = json.loads((run / "mixture.json").read_text())
    console.print(f"evolved {len(final['tree'])} versions in {final['iteration']} iterations, best {best} "
                  f"[{(time.time() - started) / 60:.1f} min]")
    for cap, t in sorted(mixture["tiers"].items(), key=lambda x: int(x[0])):
        top = max(t["candidates"].items(), key=lambda x: x[1])
        console.print(f"selection set, cap {cap}: {t['version']} ({t['score']:.3f}, {t['frames']:.1f} frames/q; "
                      f"top {top[0]} {top[1]:.3f}): {t['why']}")

    tasks = [t for t in read_tasks(world / "tasks.jsonl") if t.split == "test"]
    vlm, cost = SimVLM(), cost_model("qwen2.5-vl")
    table = Table(title=f"mixture vs the single best harness ({best}) on the test split ({len(tasks)} questions), "
                        "each under the tier's frame cap")
    for col in ("cap", "mixture version", "mixture score", "single score", "diff", "paired SE", "mixture mcq",
                "single mcq", "mixture mIoU", "single mIoU", "frames/q mix", "frames/q single", "errors", ""):
        table.add_column(col, justify="right")
    passed = 0
    for cap in sorted(args.budgets):
        routed = resolve_harness(run, cap).name
        capped = runtime.model_copy(update={"budget": cap})
        res = {}
        for name, version in (("mixture", routed), ("single", best)):
            res[name] = solve_tasks(load_harness(run / "harnesses" / version), tasks, vlm, cost, capped,
                                    run / "test" / f"cap{cap}" / version)
        diff = np.array([m.score - s.score for m, s in zip(res["mixture"], res["single"], strict=True)])
        se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
        mix, one = summarize(tasks, res["mixture"]), summarize(tasks, res["single"])
        ok = diff.mean() >= -se
        passed += ok
        table.add_row(str(cap), routed + (" (same)" if routed == best else ""), f"{mix['score']:.3f}",
                      f"{one['score']:.3f}", f"{diff.mean():+.3f}", f"{se:.3f}", f"{mix['mcq']['accuracy']:.3f}",
                      f"{one['mcq']['accuracy']:.3f}", f"{mix['grounding']['miou']:.3f}",
                      f"{one['grounding']['miou']:.3f}", f"{mix['frames_per_question']:.1f}",
                      f"{one['frames_per_question']:.1f}", f"{mix['errors']}/{one['errors']}",
                      "PASS" if ok else "FAIL")
    console.print(table)
    console.print(f"mixture >= single - 1 paired SE at {passed}/{len(args.budgets)} tiers "
                  f"[{(time.time() - started) / 60:.1f} min]")
    return 0 if passed == len(args.budgets) else 1


if __name__ == "__main__":
    sys.exit(main())
