"""One harness on one task: run it in the sandbox, score it, write its result and trace."""

from __future__ import annotations

from pathlib import Path

from videvolve.config import RuntimeSettings
from videvolve.datasets.transcripts import load_transcript
from videvolve.errors import ErrorKind, MediaError, StorageError
from videvolve.evaluation.opaque_ids import OpaqueIds
from videvolve.evaluation.results import TaskResult, write_result
from videvolve.metrics import task_score
from videvolve.models.base import VLM, served_context_of
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import CostModel
from videvolve.needles.frames import frame_source
from videvolve.rundir import EvalDir
from videvolve.skill_library.harness import Harness
from videvolve.skill_library.meter import Meter
from videvolve.skill_library.outcome import RunOutcome
from videvolve.skill_library.pool import WarmPool
from videvolve.skill_library.runner import run_task
from videvolve.skill_library.services import TaskServices, TraceWriter
from videvolve.skill_library.steps import Failed, Result
from videvolve.tasks import Task


def run_one(harness: Harness, task: Task, vlm: VLM, cost: CostModel, settings: RuntimeSettings, out_dir: Path,
            cache: ResponseCache | None = None, view_id: str | None = None,
            pool: WarmPool | None = None, produced_by: str | None = None, revision: str | None = None) -> TaskResult:
    """Run and score one task, write its result; raises :class:`InfraError` without writing anything.

    Its trace is written to ``<trace>.running`` and takes the trace's place only with the result: a run stopped
    mid-task leaves the stored result (another producer's, reused later) with the trace that goes with it.

    ``view_id`` is the opaque id harness code sees instead of the task's (``evaluation.opaque_ids``); the result
    carries the real one. ``pool``: sandboxes started ahead of time for this harness. ``produced_by``: the
    :class:`~videvolve.evaluation.results.Producer` key the result is stored under (None: never reused).
    ``revision``: the model's revision that key names; where the model's is another by the task's end (a server
    restarted mid-run with another checkpoint under the served name), the result is stored under no key: it is not
    that producer's, and is run again rather than reused as its answer.
    """
    final = EvalDir(out_dir).trace(task.id)
    running = final.with_name(final.name + ".running")  # the stored result keeps its own trace till this one ends
    trace = TraceWriter(running)
    view = task.view().model_copy(update={"id": view_id or OpaqueIds(out_dir).of(task.id)})
    try:
        pictures = frame_source(task)
    except MediaError as exc:  # a video its needles splice in is gone or changed: the whole task fails up front,
        trace.write(Failed(kind=ErrorKind.MEDIA, error=str(exc)))  # never frame by frame (that says where)
        run = RunOutcome("error", ErrorKind.MEDIA, str(exc), usage=Meter().to_dict())
    else:
        services = TaskServices(view, task.video, vlm, cost, settings, skill=harness.skill, cache=cache,
                                trace=trace, transcript=load_transcript(task), frames=pictures)
        run = run_task(harness, services, pool=pool)
    prediction = run.prediction.model_copy(update={"task_id": task.id}) if run.prediction else None
    score = task_score(task, prediction) if run.outcome == "ok" else 0.0
    if run.error_kind == ErrorKind.MEDIA and run.error and task.video not in run.error:  # harnesses see no path
        run.error = f"{run.error} (video: {task.video})"
    if revision is not None and vlm.revision != revision:
        produced_by = None
    result = TaskResult(task_id=task.id, harness_id=harness.version_id, split=task.split, kind=task.kind,
                        outcome=run.outcome, error_kind=run.error_kind, error=run.error, prediction=prediction,
                        score=score, usage=run.usage, wall_s=run.wall_s, produced_by=produced_by,
                        time_limit_s=settings.wall_seconds, memory_bytes=settings.memory_bytes,
                        served_context=served_context_of(vlm))
    trace.write(Result(outcome=result.outcome, error_kind=result.error_kind, score=score, frames=result.frames))
    try:
        running.replace(final)
    except OSError as exc:
        raise StorageError.writing("the trace", final, exc) from exc
    write_result(out_dir, result)
    return result
