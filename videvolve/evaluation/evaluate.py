"""``evaluate()``: a harness on a set of tasks, end to end, as ``eval``, the Python API and the experiments use it.

It copies the harness into the output folder (so the results name an immutable version), reads frames from
proxies when asked, runs every task (finished ones are reused), and writes ``summary.json``,
``predictions.jsonl`` and each benchmark's submission file next to the results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.datasets.submissions import write_submissions
from videvolve.errors import HarnessError, UsageError
from videvolve.evaluation.results import TaskResult, read_result, reusable_result
from videvolve.evaluation.solve import producer_of, solve_tasks
from videvolve.evaluation.summary import summarize, write_summary
from videvolve.models.base import VLM
from videvolve.models.cache import CacheUse, ResponseCache
from videvolve.models.cost import CostModel
from videvolve.rundir import EvalDir
from videvolve.skill_library.harness import Harness, copy_harness, load_harness, validate_harness
from videvolve.tasks import Task


@dataclass
class Evaluation:
    """What ``evaluate`` produced: the harness version, every result, the summary and where they are."""

    harness: Harness
    results: list[TaskResult]
    summary: dict[str, Any]
    out_dir: Path


def select(tasks: Sequence[Task], split: str, limit: int | None = None, source: str = "the tasks file") -> list[Task]:
    """The tasks of a split (``all`` for every task), the first ``limit`` of them; none is an error."""
    chosen = [t for t in tasks if split == "all" or t.split == split][: limit or None]
    if not chosen:
        raise UsageError(f"no tasks in split {split!r} of {source} (see `videvolve tasks validate`)")
    return chosen


def with_proxies(tasks: Sequence[Task], mode: str, on_build: Callable[[str], None] | None = None) -> list[Task]:
    """Tasks whose video is a low-resolution proxy of a slow source (``mode``: never, auto or always).

    A proxied task keeps its source's transcript (beside the source, or cached by the source's content), which
    nothing would find by the proxy's name.
    """
    if mode == "never":
        return list(tasks)
    from videvolve.datasets.transcripts import find_transcript
    from videvolve.media.proxy import proxied

    mapping = proxied([t.video for t in tasks], mode, on_build=on_build)
    out = []
    for t in tasks:
        update: dict[str, Any] = {"video": mapping[t.video]}
        if update["video"] != t.video and (found := find_transcript(t)) is not None:
            update |= {"transcript": str(found[0]), "transcript_offset": found[1]}
        out.append(t.model_copy(update=update))
    return out


def evaluate(harness_dir: Path, tasks: Sequence[Task], out_dir: Path, vlm: VLM, cost: CostModel,
             runtime: RuntimeSettings, cache: ResponseCache | None = None, model: ModelSettings | None = None,
             executor: str = "local", ray_address: str | None = None,
             on_result: Callable[[TaskResult], None] | None = None, meta: dict[str, Any] | None = None) -> Evaluation:
    """Run a harness on tasks and write results, summary, predictions and submission files into ``out_dir``.

    Raises :class:`~videvolve.errors.InfraError` when the endpoint fails for good; every finished result is kept,
    and calling again with the same ``out_dir`` continues where it stopped.
    """
    if (reason := validate_harness(harness_dir)) is not None:  # named as given, not as the copy under out_dir
        raise HarnessError(f"harness {harness_dir} is not valid: {reason}")
    harness = load_harness(copy_harness(harness_dir, EvalDir(out_dir).harnesses))
    producer = producer_of(harness, tasks, vlm, cost, runtime, out_dir)  # as solve_tasks keys what it reuses
    reused = {t.id for t in tasks if reusable_result(out_dir, t, producer) is not None}
    rerun = sum(1 for t in tasks if t.id not in reused and read_result(out_dir, t.id) is not None)
    results = solve_tasks(harness, tasks, vlm, cost, runtime, out_dir, cache, on_result=on_result,
                          executor=executor, model=model, ray_address=ray_address)
    cache_use = CacheUse.of([r.usage.model_dump() for r in results if r.task_id not in reused], cache is not None,
                            len(reused), rerun)
    summary = {**summarize(tasks, results), "harness_id": harness.version_id, "cache_use": cache_use.model_dump(),
               **(meta or {})}
    write_summary(out_dir, summary)
    by_id = {r.task_id: r for r in results}
    write_submissions(list(tasks), [by_id[t.id].prediction for t in tasks], out_dir)
    return Evaluation(harness=harness, results=results, summary=summary, out_dir=out_dir)
