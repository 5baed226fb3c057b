"""Does a kept revision's gain hold on every video? Seed against best, per video, on selection and on test.

``python bench/per_video.py RUN_DIR...`` (finished ``evolve`` runs whose test split was evaluated, e.g. the
protocol's ``bench/.cache/protocol/world13449-uniform/run``): for each run, the mean per-question difference of its
best harness over its seed on each selection video and each test video, from stored results (nothing is run).

The gate treats selection questions as independent; questions about one video are not. When a change suits some
videos more than others, a selection split of a few videos can show a large, significant gain that a test split of
a few other videos does not confirm: this prints how much of a run's gain moved between videos, and the one-sided
sign-flip p of the gain with videos as the units (what the per-question p overstates when videos differ).
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from videvolve.evaluation.experiment import compared_versions
from videvolve.evaluation.results import read_result
from videvolve.metrics import cluster_sign_flip
from videvolve.rundir import EvalDir, RunDir
from videvolve.tasks import Task, read_tasks


def per_video(tasks: list[Task], seed: EvalDir, best: EvalDir) -> dict[str, list[float]]:
    """Per video, the differences best - seed on the questions both answered."""
    out: dict[str, list[float]] = defaultdict(list)
    for t in tasks:
        a, b = read_result(seed.path, t.id), read_result(best.path, t.id)
        if a is not None and b is not None:
            out[t.video_id].append(b.score - a.score)
    return dict(out)


def _cell(diffs: dict[str, list[float]]) -> str:
    means = [sum(d) / len(d) for d in diffs.values()]
    every = [x for d in diffs.values() for x in d]
    if not every:
        return "-"
    spread = f", sd across videos {statistics.stdev(means):.3f}" if len(means) > 1 else ""
    videos = " ".join(f"{sum(d) / len(d):+.3f}" for _, d in sorted(diffs.items()))
    up = sum(m > 0 for m in means)
    return (f"{sum(every) / len(every):+.3f} on {len(every)} q; videos: {videos}{spread}; {up} of {len(means)} "
            f"videos gain, video-level p {video_level_p(diffs):.3f}")


def video_level_p(diffs: dict[str, list[float]]) -> float:
    """One-sided p of "the gain holds across videos": the sign-flip test on the per-video mean differences.

    Videos, not questions, are the independent units when a change suits some videos more than others; with v
    videos the smallest p is 2^-v (0.0039 at 8, 0.0625 at 4).
    """
    pairs = [(v, x) for v, d in diffs.items() for x in d]
    return cluster_sign_flip([0.0] * len(pairs), [x for _, x in pairs], [v for v, _ in pairs], "greater").p_value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    table = Table(title="best - seed, per video (mean per-question difference)")
    for col in ("run", "seed -> best", "selection", "test"):
        table.add_column(col)
    for path in args.runs:
        run = RunDir(path)
        seed, best = compared_versions(run)
        tasks = read_tasks(run.read_settings()["tasks"])
        splits = {s: [t for t in tasks if t.split == s] for s in ("selection", "test")}
        sel = per_video(splits["selection"], run.evals(seed, "selection"), run.evals(best, "selection"))
        test = per_video(splits["test"], run.test_evals(seed), run.test_evals(best))
        table.add_row(str(path), f"{seed} -> {best}", _cell(sel), _cell(test))
    Console(width=200).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
