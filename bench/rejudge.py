"""Judge a finished run's accepted revisions again with the current paired gate, on the whole selection set.

    python bench/rejudge.py RUN_DIR...

Reads the run's settings, its gate events and its stored selection results (nothing is evaluated); each revision the
run kept is judged against its parent at the level the run gave it, with the seed's cost bounding a gain's too. What
a change of the gate's rule would have decided on runs already made (``docs/guides/search-and-gate.md``: the cost over
the videos).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mf_agreement import gated

from videvolve.evaluation.results import TaskResult, read_result
from videvolve.loop.context import Context
from videvolve.search.gate import paired_rule
from videvolve.tasks import Task, read_tasks


def stored(run: Path, version: str, selection: list[Task]) -> list[TaskResult] | None:
    """A version's results on the whole selection set, or None where some question was not read."""
    out = [read_result(run / "evals" / version / "selection", t.id) for t in selection]
    return [r for r in out if r is not None] if all(r is not None for r in out) else None


def rejudged(run: Path) -> list[str]:
    """One line per revision the run kept: its id, the current verdict and its reason."""
    ctx = Context.model_validate(json.loads((run / "settings.json").read_text(encoding="utf-8")))
    gate = ctx.gate
    selection = [t for t in read_tasks(ctx.tasks) if t.split == "selection"]
    judged = gated(run)
    if not judged:
        return []
    seed = judged[0].parent
    seed_results = stored(run, seed, selection)
    lines = []
    for e in judged:
        if e.decision != "accepted" or e.candidate is None or e.level is None:
            continue
        parent, candidate = stored(run, e.parent, selection), stored(run, e.candidate, selection)
        if parent is None or candidate is None:
            lines.append(f"{e.candidate}: not read on the whole selection set (accepted early); not judged again")
            continue
        verdict = paired_rule(selection, parent, candidate, e.level, gate.cost_measure,
                              gate.alpha, gate.beta, gate.margin, ctx.seed,
                              seed_results if e.parent != seed else None, gate.cost_ceiling,
                              over_videos=len({t.video_id for t in selection}) >= gate.min_videos,
                              stated_level=gate.level)
        lines.append(f"{e.candidate} (iteration {e.iteration}): kept, now "
                     f"{'accepted' if verdict.accept else 'REJECTED'}: {verdict.reason}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    for run in parser.parse_args().runs:
        print(f"== {run}")
        for line in rejudged(run):
            print(line)


if __name__ == "__main__":
    main()
