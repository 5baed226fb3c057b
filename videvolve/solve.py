"""The solve engine: run a harness on tasks with bounded concurrency, keep every result on disk as it arrives.

Each (harness version, task) result is written to ``<out>/results/<task_id>.json`` when it exists, with the
task's trace in ``<out>/traces/<task_id>.jsonl``; a rerun skips what is done. In every aggregate a harness is
judged by, an error scores 0 and its frames still count, so failing on hard questions never looks cheaper or
better. An infrastructure error stops the run after the running tasks finish; nothing finished is lost.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.errors import InfraError, MediaError
from videvolve.metrics import summarize_scores, task_score
from videvolve.models.base import VLM
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import CostModel
from videvolve.skill_library.harness import Harness
from videvolve.skill_library.runner import run_task
from videvolve.skill_library.services import TaskServices, TraceWriter
from videvolve.tasks import Prediction, Task


class TaskResult(BaseModel):
    """One harness version on one task: outcome, prediction, score and cost."""

    task_id: str
    harness_id: str
    split: str | None = None
    kind: str
    outcome: str = Field(description="ok or error")
    error_kind: str | None = Field(None, description="parse, budget, timeout, memory, crash, bad_request, media")
    error: str | None = None
    prediction: Prediction | None = None
    score: float = Field(description="1/0 for mcq, interval-set IoU for grounding; 0 for an error")
    usage: dict[str, Any] = Field(default_factory=dict, description="frames, tokens, calls, observed times")
    wall_s: float = 0.0

    @property
    def frames(self) -> int:
        """Distinct frames shown to the model."""
        return int(self.usage.get("frames", 0))


def result_path(out_dir: Path, task_id: str) -> Path:
    """Where one task's result lives."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id)
    return out_dir / "results" / f"{safe}.json"


def load_result(out_dir: Path, task: Task, harness_id: str) -> TaskResult | None:
    """A stored result of this harness version on this task, if any."""
    path = result_path(out_dir, task.id)
    if not path.is_file():
        return None
    try:
        result = TaskResult.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    return result if result.harness_id == harness_id else None


def _write(out_dir: Path, result: TaskResult) -> None:
    path = result_path(out_dir, result.task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(result.model_dump_json(indent=1), encoding="utf-8")
    tmp.replace(path)


def run_one(harness: Harness, task: Task, vlm: VLM, cost: CostModel, settings: RuntimeSettings, out_dir: Path,
            cache: ResponseCache | None = None) -> TaskResult:
    """Run and score one task, write its result; raises :class:`InfraError` without writing anything."""
    trace = TraceWriter(out_dir / "traces" / f"{result_path(out_dir, task.id).stem}.jsonl")
    services = TaskServices(task.view(), task.video, vlm, cost, settings, skill=harness.skill, cache=cache,
                            trace=trace)
    run = run_task(harness, services)
    score = task_score(task, run.prediction) if run.outcome == "ok" else 0.0
    result = TaskResult(task_id=task.id, harness_id=harness.version_id, split=task.split, kind=task.kind,
                        outcome=run.outcome, error_kind=run.error_kind, error=run.error, prediction=run.prediction,
                        score=score, usage=run.usage, wall_s=run.wall_s)
    trace.write("result", outcome=result.outcome, error_kind=result.error_kind, score=score,
                frames=result.frames)
    _write(out_dir, result)
    return result


def solve_tasks(harness: Harness, tasks: Sequence[Task], vlm: VLM, cost: CostModel, settings: RuntimeSettings,
                out_dir: Path, cache: ResponseCache | None = None,
                on_result: Callable[[TaskResult], None] | None = None, executor: str = "local",
                model: ModelSettings | None = None, ray_address: str | None = None) -> list[TaskResult]:
    """Results for every task (stored ones reused), in the order of ``tasks``.

    ``executor="ray"`` runs the pending tasks as Ray tasks (``model`` says how workers reach the model).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    done: dict[str, TaskResult] = {}
    pending = []
    for task in tasks:
        stored = load_result(out_dir, task, harness.version_id)
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
                                outcome="error", error_kind="media", error=str(exc), score=0.0,
                                usage={"frames": 0})
            _write(out_dir, failed)
            done[task.id] = failed
            if on_result:
                on_result(failed)
    pending = ready
    if executor == "ray" and pending:
        from videvolve.executors import run_on_ray

        if model is None:
            raise ValueError("the ray executor needs the model settings to rebuild the client in its workers")
        for r in run_on_ray(harness.path, pending, model, settings, out_dir, str(cache.path) if cache else None,
                            ray_address, on_result):
            done[r.task_id] = r
        return [done[t.id] for t in tasks]
    lock = threading.Lock()
    stop = threading.Event()

    def work(task: Task) -> TaskResult | None:
        if stop.is_set():
            return None
        result = run_one(harness, task, vlm, cost, settings, out_dir, cache)
        with lock:
            done[task.id] = result
            if on_result:
                on_result(result)
        return result

    with ThreadPoolExecutor(max_workers=settings.concurrency) as pool:
        futures: list[Future[TaskResult | None]] = [pool.submit(work, t) for t in pending]
        finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failure = next((f.exception() for f in finished if f.exception() is not None), None)
        if failure is not None:
            stop.set()
            for f in futures:
                f.cancel()
            wait(futures)
            if isinstance(failure, InfraError):
                raise failure
            raise failure
    return [done[t.id] for t in tasks]


def summarize(tasks: Sequence[Task], results: Sequence[TaskResult]) -> dict[str, Any]:
    """Score and cost of a harness on tasks; errors score 0 and their frames count."""
    by_id = {r.task_id: r for r in results}
    rs = [by_id[t.id] for t in tasks if t.id in by_id]
    preds = [by_id[t.id].prediction if t.id in by_id and by_id[t.id].outcome == "ok" else None for t in tasks]
    out = summarize_scores(tasks, preds)

    def mean(key: str, kind: str | None = None) -> float:
        vals = [r.usage.get(key, 0) for r in rs if kind is None or r.kind == kind]
        return float(np.mean(vals)) if vals else 0.0

    for kind in ("mcq", "grounding"):
        if kind in out:
            out[kind].update({"frames_per_question": mean("frames", kind),
                              "image_tokens_per_question": mean("image_tokens", kind),
                              "errors": sum(1 for r in rs if r.kind == kind and r.outcome == "error")})

    out.update({
        "frames_per_question": mean("frames"), "image_tokens_per_question": mean("image_tokens"),
        "video_tokens_per_question": mean("video_tokens"), "cumulative_tokens_per_question": mean("cumulative_tokens"),
        "requests": int(sum(r.usage.get("requests", 0) for r in rs)),
        "model_calls": int(sum(r.usage.get("model_calls", 0) for r in rs)),
        "cache_hits": int(sum(r.usage.get("cache_hits", 0) for r in rs)),
        "tool_calls": int(sum(r.usage.get("tool_calls", 0) for r in rs)),
        "errors": sum(1 for r in rs if r.outcome == "error"),
        "errors_by_kind": dict(Counter(r.error_kind or "?" for r in rs if r.outcome == "error")),
        "wall_s": float(sum(r.wall_s for r in rs)),
    })
    return out


def write_summary(out_dir: Path, summary: dict[str, Any]) -> Path:
    """``<out>/summary.json``."""
    path = out_dir / "summary.json"
    path.write_text(json.dumps(summary, indent=1, default=float), encoding="utf-8")
    return path
