"""What the catalogue's moves reach: harnesses made by applying operators to a seed, side by side on one split.

Each SPEC is ``op1+op2@key=value,key=value``: the named operators of ``videvolve/editing/operators.py`` applied to
the seed harness in order, then config keys set (``mcq.frames=176`` sets a key of one question kind's table; ``base``
is the seed itself). Every harness is solved with SimVLM on the same seeded sample of one split of a tasks file,
and the table gives its score and visual tokens per question, each also per kind, and the tokens' ratio to the
first SPEC's. Used to ask whether a target is within reach of the moves the search has (docs/benchmarks.md, the
teacher arm).

Usage: ``python bench/looks.py TASKS.jsonl SPEC... [--split train] [--sample 240] [--seed-harness scan_refine]``;
harnesses and results are cached under ``bench/.cache/looks``.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from rich.console import Console
from rich.table import Table

from videvolve.config import RuntimeSettings
from videvolve.editing.base import Proposal, read_files, write_candidate
from videvolve.editing.file_edits import Files, config_of, set_key
from videvolve.editing.operators import OPERATORS
from videvolve.evaluation.results import TaskResult
from videvolve.evaluation.solve import solve_tasks
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness, seed_path
from videvolve.tasks import read_tasks
from videvolve.usage import VISUAL_TOKENS

CACHE = Path(__file__).resolve().parent / ".cache" / "looks"


def build(seed: str, spec: str) -> Files:
    """The files of the harness a SPEC names (see the module's docstring)."""
    moves, _, keys = spec.partition("@")
    files: Files = read_files(seed_path(seed))
    for name in (m for m in moves.split("+") if m and m != "base"):
        if name not in OPERATORS:
            raise SystemExit(f"{spec}: no operator {name!r} (see docs/reference/operators.md)")
        made = OPERATORS[name].apply(files, config_of(files))
        if made is None:
            raise SystemExit(f"{spec}: {name} does not apply to what the moves before it made")
        files = {**files, **made}
    for pair in (k for k in keys.split(",") if k):
        key, _, text = pair.partition("=")
        value: int | float | str
        try:
            value = float(text) if "." in text else int(text)
        except ValueError:
            value = text
        files["config.toml"] = set_key(files["config.toml"], key, value)
    return files


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", type=Path)
    parser.add_argument("specs", nargs="+")
    parser.add_argument("--split", default="train")
    parser.add_argument("--sample", type=int, default=240, help="questions of the split (a seeded sample)")
    parser.add_argument("--seed-harness", default="scan_refine")
    args = parser.parse_args()
    tasks = [t for t in read_tasks(args.tasks) if t.split == args.split]
    if not tasks:
        raise SystemExit(f"{args.tasks}: no {args.split} question")
    random.Random(0).shuffle(tasks)
    tasks = tasks[: args.sample]
    console = Console()
    table = Table(title=f"{args.seed_harness} and moves on {len(tasks)} {args.split} questions of {args.tasks}")
    for col in ("harness", "score", "grounding", "mcq", "visual tokens / q", "grounding tokens", "mcq tokens",
                "ratio"):
        table.add_column(col, justify="right")
    first: float | None = None
    for spec in args.specs:
        proposal = Proposal(operator=spec, rationale=spec, edits=dict(build(args.seed_harness, spec)))
        version = write_candidate(seed_path(args.seed_harness), CACHE / "harnesses", proposal)
        res: list[TaskResult] = solve_tasks(load_harness(CACHE / "harnesses" / version), tasks, SimVLM(),
                                            cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2),
                                            CACHE / "evals" / version / args.tasks.stem)
        tokens = _mean([VISUAL_TOKENS.of(r) for r in res])
        first = tokens if first is None else first
        table.add_row(spec, f"{_mean([r.score for r in res]):.3f}",
                      f"{_mean([r.score for r in res if r.kind == 'grounding']):.3f}",
                      f"{_mean([r.score for r in res if r.kind == 'mcq']):.3f}", f"{tokens:,.0f}",
                      *(f"{_mean([VISUAL_TOKENS.of(r) for r in res if r.kind == k]):,.0f}"
                        for k in ("grounding", "mcq")),
                      f"{tokens / first:.2f}x")
        console.print(f"{spec}: done", highlight=False)
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
