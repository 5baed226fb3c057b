"""The solve engine: run a harness on tasks with bounded concurrency, keep every result on disk as it arrives.

Each (harness version, task) result is written to ``<out>/results/<task_id>.json`` when it exists, with the
task's trace in ``<out>/traces/<task_id>.jsonl``; a rerun skips what the same producer (harness version, backend,
model, decoding, cost model, task content) finished, except input errors (``media``), which it tries again. In every
aggregate a harness is judged by, an error scores 0 and its frames still count, so failing on hard questions never
looks cheaper or better. An infrastructure error stops the run after the running tasks finish; nothing finished is lost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.errors import ErrorKind, MediaError, UsageError
from videvolve.evaluation.one_task import run_one
from videvolve.evaluation.opaque_ids import OpaqueIds
from videvolve.evaluation.results import Producer, TaskResult, reusable_result, write_result
from videvolve.folderlock import hold
from videvolve.models.base import VLM, reach
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import CostModel
from videvolve.skill_library.harness import Harness
from videvolve.skill_library.pool import WarmPool
from videvolve.skill_library.runner import code_problems
from videvolve.tasks import Task
from videvolve.threads import run_in_threads


def solve_tasks(harness: Harness, tasks: Sequence[Task], vlm: VLM, cost: CostModel, settings: RuntimeSettings,
                out_dir: Path, cache: ResponseCache | None = None,
                on_result: Callable[[TaskResult], None] | None = None, executor: str = "local",
                model: ModelSettings | None = None, ray_address: str | None = None) -> list[TaskResult]:
    """Results for every task (stored ones reused), in the order of ``tasks``.

    ``executor="ray"`` runs the pending tasks as Ray tasks (``model`` says how workers reach the model).
    """
    out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # results hold the gold answers
    with hold(out_dir, "evaluation folder"):  # another process writing here would overwrite these results
        return _solve(harness, tasks, vlm, cost, settings, out_dir, cache, on_result, executor, model, ray_address)


def producer_of(harness: Harness, tasks: Sequence[Task], vlm: VLM, cost: CostModel, settings: RuntimeSettings,
                out_dir: Path) -> Producer:
    """Who makes ``tasks``' results in ``out_dir``: when any is to be made, the model's endpoint is asked first.

    Its revision then names the checkpoint the endpoint serves, also where the server was still loading a moment ago
    (:func:`~videvolve.models.base.reach`); a run whose results are all stored needs no endpoint.
    """
    producer = Producer.of(harness.version_id, vlm, settings, cost)
    if any(reusable_result(out_dir, t, producer) is None for t in tasks):
        reach(vlm)
        producer = Producer.of(harness.version_id, vlm, settings, cost)
    return producer


def _solve(harness: Harness, tasks: Sequence[Task], vlm: VLM, cost: CostModel, settings: RuntimeSettings,
           out_dir: Path, cache: ResponseCache | None, on_result: Callable[[TaskResult], None] | None,
           executor: str, model: ModelSettings | None, ray_address: str | None) -> list[TaskResult]:
    producer = producer_of(harness, tasks, vlm, cost, settings, out_dir)
    keys = {t.id: producer.key(t) for t in tasks}  # of the tasks as given (a probed duration changes nothing)
    done: dict[str, TaskResult] = {}
    pending = []
    for task in tasks:
        stored = reusable_result(out_dir, task, producer)
        if stored is not None:
            done[task.id] = stored
            if on_result:
                on_result(stored)
        else:
            pending.append(task)
    ready = []
    for task in pending:  # a task file may leave durations to be probed; a video that cannot be read is an error
        try:
            ready.append(task.with_duration())
        except MediaError as exc:
            failed = TaskResult(task_id=task.id, harness_id=harness.version_id, split=task.split, kind=task.kind,
                                outcome="error", error_kind=ErrorKind.MEDIA, error=str(exc), score=0.0,
                                usage={"frames": 0}, produced_by=keys[task.id])
            write_result(out_dir, failed)
            done[task.id] = failed
            if on_result:
                on_result(failed)
    pending = ready
    ids = OpaqueIds(out_dir)
    view_ids = {t.id: ids.of(t.id) for t in pending}  # made here, so Ray workers never write the mapping
    if executor == "ray" and pending:
        from videvolve.evaluation.executors import run_on_ray

        if model is None:
            raise UsageError("the ray executor needs the model settings to rebuild the client in its workers")
        for r in run_on_ray(harness.path, pending, view_ids, keys, model, settings, out_dir,
                            str(cache.path) if cache else None, ray_address, on_result, producer.revision):
            done[r.task_id] = r
        return [done[t.id] for t in tasks]
    with _warm_pool(harness, settings, len(pending)) as warm:
        def keep(task: Task, result: TaskResult) -> None:
            done[task.id] = result
            if on_result:
                on_result(result)

        run_in_threads(pending, lambda task: run_one(harness, task, vlm, cost, settings, out_dir, cache,
                                                     view_ids[task.id], warm, keys[task.id], producer.revision),
                       settings.concurrency,
                       keep)
    return [done[t.id] for t in tasks]


def _warm_pool(harness: Harness, settings: RuntimeSettings, tasks: int) -> contextlib.AbstractContextManager[Any]:
    """Sandboxes started ahead of time, as many as run at once (none for a harness the static check refuses)."""
    if not settings.warm_sandboxes or not tasks or code_problems(harness):
        return contextlib.nullcontext()
    return WarmPool(harness, settings, size=settings.concurrency, total=tasks)
