"""``videvolve compare``: a run's seed and its best harness on held-out questions, with paired tests.

The questions are the run's test split, or a file of one's own (gold questions about other videos: how a run on
generated labels is checked). The model and the runtime are the run's own, as ``--resume`` takes them: where the
server is and how many tasks run at once may change; what is asked may not.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from videvolve.cli.common import open_cache
from videvolve.cli.flags import add_settings, given
from videvolve.cli.resume_flags import MOVABLE
from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.errors import HostError, InfraError, UsageError

out = Console()
err = Console(stderr=True, soft_wrap=True)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``compare``."""
    p = sub.add_parser("compare", help="a run's seed and best harness on held-out questions (its test split, or "
                       "gold questions of your own), paired tests; the report shows it")
    p.add_argument("--run", type=Path, required=True, help="the run directory")
    p.add_argument("--tasks", type=Path, default=None, help="questions to compare on (default: the run's tasks "
                   "file); none may ask about a video the run evolved or selected on")
    p.add_argument("--split", default=None, help="the split of --tasks to use, or 'all' (default: test for the "
                   "run's tasks file, all for a file of your own)")
    for section, cls in (("model", ModelSettings), ("runtime", RuntimeSettings)):
        add_settings(p.add_argument_group(f"{section} (the run's own; these may change)"), cls,
                     skip=[k for k in cls.model_fields if k not in MOVABLE[section]])
    c = p.add_argument_group("cache")
    c.add_argument("--cache", type=Path, default=None, help="response cache file (default ~/.cache/videvolve)")
    c.add_argument("--no-cache", action="store_true", help="do not read or write the response cache")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    """``videvolve compare``."""
    from videvolve.evaluation.experiment import compare_on_test
    from videvolve.labelfree.labels import LabelMix, labels_line
    from videvolve.loop.context import nest
    from videvolve.models import make_vlm
    from videvolve.models.cost import cost_model
    from videvolve.report import build_report
    from videvolve.rundir import RunDir
    from videvolve.tasks import read_tasks

    run = RunDir(args.run)
    if not run.is_run():
        raise UsageError(f"{args.run} is not a run directory (`videvolve evolve --run DIR` makes one)")
    stored = nest(run.read_settings())
    model = ModelSettings.model_validate({**stored.get("model", {}), **given(args, ModelSettings)})
    runtime = RuntimeSettings.model_validate({**stored.get("runtime", {}), **given(args, RuntimeSettings)})
    tasks, questions = None, None
    if args.tasks is not None:
        split = args.split or "all"
        tasks = [t for t in read_tasks(args.tasks) if split == "all" or t.split == split]
        questions = f"{args.tasks}" + ("" if split == "all" else f" (split {split})")
    elif args.split not in (None, "test"):
        raise UsageError("--split picks questions of --tasks FILE; the run's own tasks are compared on their test "
                         "split, which neither the editor nor the gate saw")
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as progress:
        bar = progress.add_task("seed, then best", total=None)
        try:
            cmp = compare_on_test(run.root, make_vlm(model), cost_model(model.family, model.max_pixels), runtime,
                                  tasks, questions, open_cache(args), lambda _: progress.advance(bar))
        except (InfraError, HostError) as exc:
            progress.stop()
            err.print(f"[bold red]stopped:[/] {exc}\nthe results made so far are kept; rerun the same command to "
                      "continue.", highlight=False)
            return 3
    out.print(comparison_table(cmp.to_dict()))
    out.print(paired_line(cmp.to_dict()), highlight=False)
    if cmp.seed["version"] == cmp.best["version"]:
        err.print("note: the run kept no revision, so its best is its seed: both rows are the same harness",
                  highlight=False)
    labels = labels_line([LabelMix(split="compared", counts=dict(Counter(t.label_source for t in tasks)))]) \
        if tasks else ""
    if labels:
        err.print(f"note: not all of these labels are gold ({labels}): the comparison measures agreement with them",
                  highlight=False)
    out.print(f"written to {run.comparison}; the report shows it: {build_report(run.root)}")
    return 0


def comparison_table(cmp: dict[str, Any], seed_name: str = "seed") -> Table:
    """The seed's and the evolved harness's summaries side by side."""
    table = Table(title=f"{cmp.get('questions', 'test split')}: {cmp['seed']['n']} questions")
    for col in ("harness", "mcq accuracy", "grounding mIoU", "R@0.5", "frames/q", "visual tokens/q", "errors"):
        table.add_column(col, justify="left" if col == "harness" else "right")
    for name, s in ((seed_name, cmp["seed"]), ("evolved", cmp["best"])):
        mcq, grounding = s.get("mcq"), s.get("grounding")
        table.add_row(f"{name} {s['version']}", f"{mcq['accuracy']:.3f}" if mcq else "-",
                      f"{grounding['miou']:.3f}" if grounding else "-",
                      f"{grounding['R@0.5']:.3f}" if grounding else "-", f"{s['frames_per_question']:.1f}",
                      f"{visual_tokens(s):,.0f}", str(s["errors"]))
    return table


def paired_line(cmp: dict[str, Any]) -> str:
    """The paired tests in one sentence."""
    parts = [f"paired tests: mean score {cmp['score_diff']:+.3f} (bootstrap p = {cmp['score_p']:.4f})"]
    if cmp.get("grounding_p") is not None:
        parts.append(f"grounding bootstrap p = {cmp['grounding_p']:.4f}")
    if cmp.get("mcq_p") is not None:
        parts.append(f"mcq McNemar p = {cmp['mcq_p']:.4f}")
    videos = int(cmp.get("videos") or 0)
    if videos:
        parts.append(f"with videos as the units, {cmp['videos_gaining']} of {videos} videos gain (sign-flip p = "
                     f"{cmp['video_p']:.4f}, at best {2 * 0.5 ** videos:.4f} with {videos})")
    return "; ".join(parts)


def visual_tokens(summary: dict[str, Any]) -> float:
    """Image and video tokens per question of a summary."""
    return float(summary["image_tokens_per_question"] + summary.get("video_tokens_per_question", 0.0))
