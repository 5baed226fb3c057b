"""How often does the gate take noise for a gain? The null run, the bucket attack, and multi-fidelity replayed.

World (chosen before any result was seen): the shipped SynthWorld generator with its default settings apart from
size and questions per video, ``--videos 8 --minutes 10 --questions 60``, world seed 8801. The parent is `uniform`
with 64 frames (fewer frames: more questions SimVLM cannot see and must guess, so more for noise to move).

- **Null candidates** (``--null``, 120 by default): the parent with its frame grid shifted by k x 3 ms. They show
  the same pictures but for a few frames, under other captions, so SimVLM's guesses on what it cannot see (a hash
  of the request's text) change: they move selection scores, and cannot help in expectation. The table says how
  many questions each changed, so that the test is seen to test something.
- **Each against a parent of its own** (the headline figures): candidate k is judged against the grid shifted by
  -k x 3 ms, its own parent, so each decision draws its own parent's luck on the questions SimVLM cannot see, as
  runs do. Judged all against one parent (the unshifted grid, a row of its own), the candidates share that one
  parent's luck: an unlucky parent lifts every candidate's chance together (world 99858: 6 / 120 at the first
  level, 16 / 120 at the flat level), so that share is one draw, not the rate a run meets.
- **The bucket attack**: four candidates identical to the parent except that they answer "B" on the mcq questions
  whose (duration, question, options) hash falls in bucket j.
- Each is judged against the parent on the whole selection set by the paired gate at the level of a run's first
  decision, at the flat level (``--gate-spending none``), in sequences of 8 decisions as a run makes them
  (alpha-investing), and by the paper's rule (``--gate video-rsi``).
- **Multi-fidelity replayed**: every candidate's decision by sequential rungs, computed from its stored results
  (evaluation is deterministic), against full validation: agreement and selection evaluations.

Usage: ``python bench/gate_null.py [--null 120] [--world-seed 8801]``; prints a table and writes
``bench/.cache/gate_null/results.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from videvolve.config import RuntimeSettings
from videvolve.datasets.synthworld import generate_world
from videvolve.editing.operators import set_key
from videvolve.evaluation.results import TaskResult
from videvolve.evaluation.solve import solve_tasks
from videvolve.loop.context import Context, GateSettings
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.search.gate import gate_rule, paired_rule
from videvolve.search.history import GateEntry
from videvolve.search.screening import screen
from videvolve.search.spending import next_level
from videvolve.skill_library.harness import load_harness, seed_path
from videvolve.tasks import Task, read_tasks

CACHE = Path(__file__).resolve().parent / ".cache" / "gate_null"
console = Console(width=150)
GRID = "    times = [task.duration * (i + 0.5) / n for i in range(n)]\n"
SHIFTED = ("    shift = float(ctx.config.get(\"grid_shift\", 0.0))\n"
           "    times = [min(task.duration, max(0.0, task.duration * (i + 0.5) / n + shift)) for i in range(n)]\n")
ANSWER = "    return {\"answer\": reply, \"raw\": reply, \"evidence_times\": times}\n"
BUCKETED = ("    if task.options and (int(task.duration * 1000) + sum(ord(c) for c in task.question + \"|\".join("
            "task.options))) % 4 == int(ctx.config.get(\"bucket\", -1)):\n"
            "        reply = \"B\"\n" + ANSWER)


def variant(root: Path, name: str, **config: float) -> Path:
    """The parent (uniform, 64 frames, a shiftable grid) with ``config`` set."""
    out = root / name
    if out.exists():
        return out
    shutil.copytree(seed_path("uniform"), out)
    solver = (out / "solver.py").read_text()
    assert GRID in solver and ANSWER in solver, "the uniform seed changed: update bench/gate_null.py"
    (out / "solver.py").write_text(solver.replace(GRID, SHIFTED).replace(ANSWER, BUCKETED))
    text = set_key((out / "config.toml").read_text(), "n_frames", 64)
    for key, value in config.items():
        text = set_key(text, key, value)
    (out / "config.toml").write_text(text)
    return out


def judged(selection: list[Task], parent: list[TaskResult], cand: list[TaskResult], first: float,
           level: float) -> dict[str, object]:
    """A candidate judged against a parent by the paired gate (first and flat levels) and by the paper's rule."""
    d = paired_rule(selection, parent, cand, first)
    flat = paired_rule(selection, parent, cand, level)
    a, c = sum(r.score for r in parent) / len(parent), sum(r.usage.image_tokens for r in parent)
    a2, c2 = sum(r.score for r in cand) / len(cand), sum(r.usage.image_tokens for r in cand)
    rsi = gate_rule(a, c / len(parent), a2, c2 / len(cand), eps=1 / len(selection))
    return {"first_level": d.accept, "flat": flat.accept, "video_rsi": rsi.accept,
            "discordant": d.stats.discordant if d.stats else 0, "diff": d.stats.diff if d.stats else 0.0,
            "p_gain": d.stats.p_gain if d.stats else 1.0}


class Replay:
    """An evaluator that answers from stored results (what the gate's screening would have paid for)."""

    def __init__(self, ctx: Context, selection: list[Task], results: dict[str, list[TaskResult]]) -> None:
        self.ctx, self.selection = ctx, selection
        self.by = {v: {r.task_id: r for r in rs} for v, rs in results.items()}
        self.evaluated: dict[str, set[str]] = {}

    def evaluate(self, version: str, tasks: list[Task], split: str) -> list[TaskResult]:
        """Stored results, counted."""
        self.evaluated.setdefault(version, set()).update(t.id for t in tasks)
        return [self.by[version][t.id] for t in tasks]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--null", type=int, default=120)
    parser.add_argument("--world-seed", type=int, default=8801)
    parser.add_argument("--level", type=float, default=0.05)
    args = parser.parse_args()
    started = time.time()
    root = CACHE / f"world{args.world_seed}"
    if not (root / "world" / "tasks.jsonl").exists():
        generate_world(root / "world", videos=8, minutes=10, seed=args.world_seed, questions=60)
    selection = [t for t in read_tasks(root / "world" / "tasks.jsonl") if t.split == "selection"]
    versions = {"parent": variant(root / "harnesses", "parent")}
    versions |= {f"null{k:03d}": variant(root / "harnesses", f"null{k:03d}", grid_shift=round(0.003 * k, 3))
                 for k in range(1, args.null + 1)}
    versions |= {f"parent{k:03d}": variant(root / "harnesses", f"parent{k:03d}", grid_shift=round(-0.003 * k, 3))
                 for k in range(1, args.null + 1)}
    versions |= {f"bucket{j}": variant(root / "harnesses", f"bucket{j}", bucket=j) for j in range(4)}
    vlm, cost, runtime = SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2)
    results: dict[str, list[TaskResult]] = {}
    ids: dict[str, str] = {}
    with Progress(console=console) as progress:
        bar = progress.add_task(f"{len(versions)} versions x {len(selection)} selection questions", total=len(versions))
        for name, path in versions.items():
            harness = load_harness(path)
            ids[name] = harness.version_id
            results[name] = solve_tasks(harness, selection, vlm, cost, runtime, root / "evals" / harness.version_id)
            progress.advance(bar)
    parent = results["parent"]
    level = args.level
    first = next_level([], level)
    rows: dict[str, dict[str, object]] = {}
    for name in versions:
        if not name.startswith(("null", "bucket")):
            continue
        own = "parent" + name.removeprefix("null") if name.startswith("null") else "parent"
        rows[name] = {"parent": own, **judged(selection, results[own], results[name], first, level),
                      "one_parent": judged(selection, parent, results[name], first, level)}
    nulls = [n for n in rows if n.startswith("null")]
    # sequences of 8 decisions, as one run would make them: the level follows the alpha-wealth
    in_runs = 0
    for start in range(0, len(nulls), 8):
        history: list[GateEntry] = []
        for name in nulls[start:start + 8]:
            lv = next_level(history, level)
            ok = paired_rule(selection, results[str(rows[name]["parent"])], results[name], lv).accept
            in_runs += ok
            history.append(GateEntry(iteration=len(history), parent=str(rows[name]["parent"]),
                                     decision="accepted" if ok else
                                     "rejected", reason="", level=lv))
    # multi-fidelity replayed against full validation
    ctx = Context(run_dir=str(root / "run"), run_id="null", tasks=str(root / "world" / "tasks.jsonl"),
                  gate=GateSettings(validation="multi-fidelity"), seed=args.world_seed)
    same, mf_evals, full_evals = 0, 0, 0
    for name in rows:
        out = {}
        own = str(rows[name]["parent"])
        for mode in ("multi-fidelity", "full"):
            gate = ctx.gate.model_copy(update={"validation": mode})
            replay = Replay(ctx.model_copy(update={"gate": gate}), selection, {own: results[own], name: results[name]})
            (entry,), _ = screen(replay, own, [name], {}, 0)
            out[mode] = entry.decision
            if mode == "multi-fidelity":
                mf_evals += len(replay.evaluated[name])
            else:
                full_evals += len(replay.evaluated[name])
        same += out["multi-fidelity"] == out["full"]
        rows[name]["mf_decision"], rows[name]["full_decision"] = out["multi-fidelity"], out["full"]
    n = len(nulls)
    buckets = [f"bucket{j}" for j in range(4)]
    own_scores = [sum(r.score for r in results[str(rows[x]["parent"])]) / len(selection) for x in nulls]
    table = Table(title=f"the gate on {n} null candidates, each against a parent of its own, and the bucket attack "
                        f"(world {args.world_seed}, {len(selection)} selection questions; the unshifted parent scores "
                        f"{sum(r.score for r in parent) / len(parent):.3f}, the {n} own parents "
                        f"{min(own_scores, default=0):.3f}-{max(own_scores, default=0):.3f})")
    table.add_column("what")
    table.add_column("value", justify="right")
    moved = [int(rows[x]["discordant"]) for x in nulls]  # type: ignore[call-overload]
    table.add_row("questions a null candidate changes (mean, min-max)",
                  f"{sum(moved) / max(1, n):.1f} ({min(moved, default=0)}-{max(moved, default=0)})")
    for key, what in (("first_level", f"paired gate, a run's first decision (level {first:g})"),
                      ("flat", f"paired gate, every decision at {level:g} (--gate-spending none)"),
                      ("video_rsi", "the paper's rule (--gate video-rsi)")):
        k = sum(bool(rows[x][key]) for x in nulls)
        table.add_row(f"null candidates accepted: {what}", f"{k} / {n} ({k / max(1, n):.1%})")
    for key in ("first_level", "flat"):
        k = sum(bool(rows[x]["one_parent"][key]) for x in nulls)  # type: ignore[index]
        table.add_row(f"  the same, all against the one unshifted parent ({key.replace('_', ' ')})",
                      f"{k} / {n} ({k / max(1, n):.1%})")
    table.add_row("null candidates accepted: paired gate in runs of 8 decisions (alpha-investing)",
                  f"{in_runs} / {n} ({in_runs / max(1, n):.1%})")
    diffs = ", ".join(f"{float(str(rows[b]['diff'])):+.3f}" for b in buckets)
    for key, what in (("first_level", "paired gate"), ("video_rsi", "the paper's rule")):
        table.add_row(f"bucket attack accepted: {what}", f"{sum(bool(rows[b][key]) for b in buckets)} / 4 ({diffs})")
    table.add_row("multi-fidelity: same decisions as full validation", f"{same} / {len(rows)}")
    table.add_row("selection evaluations: full / multi-fidelity",
                  f"{full_evals:,} / {mf_evals:,} ({full_evals / max(1, mf_evals):.2f}x fewer)")
    table.add_row("minutes", f"{(time.time() - started) / 60:.1f}")
    console.print(table)
    (CACHE / "results.json").write_text(json.dumps({"world_seed": args.world_seed, "level": level, "rows": rows,
                                                    "in_runs": in_runs, "versions": ids}, indent=1))
    accepted = sum(bool(rows[x]["first_level"]) for x in nulls)
    attacked = sum(bool(rows[b]["first_level"]) for b in buckets)
    gate_ok = accepted <= 0.05 * n and attacked == 0
    mf_ok = same == len(rows) and full_evals >= 3 * mf_evals
    console.print(f"the gate: {accepted} / {n} null candidates and {attacked}"
                  f" / 4 of the bucket attack accepted at a run's first level (at most 5 % and none asked) -> "
                  f"{'PASS' if gate_ok else 'FAIL'}; multi-fidelity: {same} / {len(rows)} decisions as full validation,"
                  f" {full_evals / max(1, mf_evals):.2f}x fewer selection evaluations (the same decisions at >= 3x "
                  f"asked) -> {'PASS' if mf_ok else 'FAIL'}", highlight=False)
    ok = gate_ok and mf_ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
