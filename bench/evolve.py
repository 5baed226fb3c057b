"""Search and validation strategies, side by side (VidHarness vs Video-RSI).

A. Multi-fidelity vs full validation: one fixed sequence of candidate revisions (operators applied to whatever the
   incumbent is at that point) is replayed twice on the same world; we count the selection-set evaluations each
   needs and check that both end with the same accepted incumbent.
B. MCTS vs chain at an equal call budget (``--max-calls``): the held-out test score of each, on three world seeds.

Usage: ``python bench/evolve.py [--seeds 0 1 2] [--calls 700] [--parts ab] [--with-policy-edits] [--fresh]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from videvolve.config import RuntimeSettings
from videvolve.datasets.synthworld import generate_world
from videvolve.editing import Proposal, read_files, write_candidate
from videvolve.editing.operators import OPERATORS, config_of, set_key
from videvolve.evaluation.experiment import compare_on_test
from videvolve.folderlock import remove_tree
from videvolve.graph.driver import evolve
from videvolve.loop.context import Context
from videvolve.loop.services import open_run
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.search.screening import screen
from videvolve.skill_library.harness import copy_harness, seed_path

CACHE = Path(__file__).resolve().parent / ".cache" / "evolve"
console = Console(width=150)
# the fixed sequence: rounds of the same menu of revisions, each applied to the incumbent of the moment and
# validated on its own, as a chain proposes them one an iteration; inapplicable or repeated revisions are skipped.
# Policy-text-only edits (stricter_format) are left out: SimVLM reads no policy text, so such an edit ties its parent
# on every question, which no screen can tell from a gain still to come (``--with-policy-edits`` puts them back).
MENU = [("raise_resolution", None), ("sparser_sampling", None), ("denser_sampling", None), ("add_refinement", None),
        ("max_side", 96), ("max_side", 64), ("n_frames", 128), ("n_frames", 64), ("n_frames", 32)]
POLICY_EDITS = [("stricter_format", None)]
ROUNDS = 3
def world(seed: int) -> Path:
    root = CACHE / f"world{seed}"
    if not (root / "tasks.jsonl").exists():
        generate_world(root, videos=12, minutes=10, seed=seed, questions=20)
    return root / "tasks.jsonl"


def replay(mode: str, tasks: Path, menu: list[tuple[str, Any]], fresh: bool) -> tuple[int, str, list[str]]:
    """Selection-set evaluations the sequence needs, counted from the rungs each decision was made on.

    Results already on disk are reused (they are deterministic), which changes how long this takes, not the count.
    """
    root = CACHE / f"replay-{mode}"
    if fresh:
        remove_tree(root)
    ctx = Context(run_dir=str(root / "run"), run_id=f"replay-{mode}", tasks=str(tasks), memory=str(root / "memory"),
                  embedder="hashing", cache=str(root / "cache.sqlite"), validation=mode,  # type: ignore[arg-type]
                  runtime=RuntimeSettings(concurrency=2))
    with open_run(ctx) as run:
        incumbent = copy_harness(seed_path("uniform"), run.root / "harnesses").name
        seen, decisions = {incumbent}, []
        evaluations = len(run.selection)  # the seed, once
        for i in range(ROUNDS):
            for what, value in menu:
                files = read_files(run.harness_dir(incumbent))
                if what in OPERATORS:
                    edits = OPERATORS[what].apply(files, config_of(files))
                else:
                    edits = {"config.toml": set_key(files["config.toml"], what, value)}
                if not edits:
                    continue
                cand = write_candidate(run.harness_dir(incumbent), run.root / "harnesses",
                                       Proposal(operator=what, rationale=f"replay round {i}", edits=edits))
                if cand in seen:
                    continue
                seen.add(cand)
                entries, _ = screen(run, incumbent, [cand], {cand: what}, len(decisions))
                decisions.append(f"{what}:{entries[0]['decision']}@{entries[0]['n']}")
                evaluations += entries[0]["n"]
                if entries[0]["decision"] == "accepted":
                    incumbent = cand
        return evaluations, incumbent, decisions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--calls", type=int, default=700, help="model-call budget of each search run")
    parser.add_argument("--parts", default="ab", help="which parts to run: a, b or ab")
    parser.add_argument("--with-policy-edits", action="store_true", help="part A: replay policy-text edits too")
    parser.add_argument("--fresh", action="store_true", help="part A: recompute results instead of reusing them")
    args = parser.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.time()
    menu = MENU + POLICY_EDITS if args.with_policy_edits else MENU
    ok_a = part_a(args.seeds[0], started, menu, args.fresh) if "a" in args.parts else True
    if "b" in args.parts:
        part_b(args.seeds, args.calls, started)
    return 0 if ok_a else 1


def part_a(seed: int, started: float, menu: list[tuple[str, Any]], fresh: bool) -> bool:
    full, inc_full, dec_full = replay("full", world(seed), menu, fresh)
    multi, inc_multi, dec_multi = replay("multi-fidelity", world(seed), menu, fresh)
    a = Table(title=f"A. replaying {len(dec_full)} fixed revisions: selection-set evaluations needed")
    for col in ("validation", "selection evaluations", "accepted", "final incumbent"):
        a.add_column(col, justify="right")
    a.add_row("full", str(full), str(sum("accepted" in d for d in dec_full)), inc_full)
    a.add_row("multi-fidelity", str(multi), str(sum("accepted" in d for d in dec_multi)), inc_multi)
    console.print(a)
    ratio = full / max(1, multi)
    same = [d.split("@")[0] for d in dec_full] == [d.split("@")[0] for d in dec_multi]
    ok_a = inc_full == inc_multi and same and ratio >= 2
    console.print(f"{'PASS' if ok_a else 'FAIL'}: {ratio:.2f}x fewer evaluations, same incumbent: "
                  f"{inc_full == inc_multi}, same decisions: {same}; multi-fidelity decisions (@ questions): "
                  f"{dec_multi} "
                  f"[{(time.time() - started) / 60:.1f} min]")
    return ok_a


def part_b(seeds: list[int], calls: int, started: float) -> None:
    b = Table(title=f"B. chain vs mcts at {calls} model calls each (multi-fidelity validation), test split")
    for col in ("world seed", "search", "iterations", "calls", "test score", "mcq acc.", "grounding mIoU",
                "frames/q"):
        b.add_column(col, justify="right")
    wins = 0
    for seed in seeds:
        tasks = world(seed)
        scores = {}
        for search in ("chain", "mcts"):
            root = CACHE / f"search{seed}-{search}"
            remove_tree(root)
            ctx = Context(run_dir=str(root / "run"), run_id=f"{search}{seed}", tasks=str(tasks),
                          memory=str(root / "memory"), cache=str(root / "cache.sqlite"), iterations=100,
                          max_calls=calls, search=search, validation="multi-fidelity",  # type: ignore[arg-type]
                          seed=seed, batch=8, runtime=RuntimeSettings(concurrency=2))
            final = evolve(ctx)
            cmp = compare_on_test(root / "run", SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2))
            best = cmp.best
            scores[search] = best["score"]
            b.add_row(str(seed), search, str(final.get("iteration")), f"{final['spent'].get('model_calls', 0):.0f}",
                      f"{best['score']:.3f}", f"{best['mcq']['accuracy']:.3f}", f"{best['grounding']['miou']:.3f}",
                      f"{best['frames_per_question']:.1f}")
        wins += scores["mcts"] >= scores["chain"]
        console.print(b)
    console.print(f"mcts >= chain on {wins}/{len(seeds)} seeds [{(time.time() - started) / 60:.1f} min]")


if __name__ == "__main__":
    sys.exit(main())
