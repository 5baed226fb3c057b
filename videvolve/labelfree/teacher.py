"""Teacher labels: an expensive harness answers, once, the questions a person left without answers.

The teacher runs through the evaluation's own engine (:func:`videvolve.evaluation.solve.solve_tasks`: cached,
resumable, threads or Ray), its results kept in a folder beside the tasks file, so a rerun reuses every finished
answer and an endpoint that fails stops the run without losing any. An answer the teacher gave becomes the task's
label (``label_source="teacher"``, with the teacher's version and cost in ``meta.teacher``); a question the teacher
failed on (its own error, or no answer that parses) is left out and reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.datasets.own import Question
from videvolve.errors import describe
from videvolve.evaluation.results import TaskResult, reusable_result
from videvolve.evaluation.solve import producer_of, solve_tasks
from videvolve.models.base import VLM
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import CostModel
from videvolve.skill_library.harness import copy_harness, load_harness
from videvolve.tasks import LETTERS, Task

TEACHER_KEY = "teacher"
"""Where a teacher-labelled task's :class:`TeacherLabel` lives in its ``meta``."""


class TeacherLabel(BaseModel):
    """Who gave a task its label, and what that answer cost (``meta.teacher`` of a teacher-labelled task)."""

    harness: str = Field(description="the teacher's harness version (content hash)")
    name: str = Field(description="the seed name or folder it was given as")
    budget: int | None = Field(description="the per-question frame cap it ran under (None: none)")
    visual_tokens: int = Field(description="visual tokens the teacher spent on this question")
    frames: int = Field(description="distinct frames the teacher showed the model for this question")


class TeacherFailure(BaseModel):
    """A question the teacher gave no usable answer to (left out of the tasks)."""

    question_id: str
    line: int
    reason: str


@dataclass(frozen=True)
class TeachReport:
    """The tasks the teacher labelled, the questions it failed on, and how many answers were reused from disk."""

    tasks: list[Task]
    failures: list[TeacherFailure]
    reused: int


def _unanswered_run(question: Question) -> Task:
    """The task the engine runs for a question: the harness sees only its view (no answer exists yet).

    The engine's tasks carry an answer field, so this one holds the first letter (or no interval); it never leaves
    this module, and the score the engine computes against it is not read.
    """
    return question.answered(LETTERS[0] if question.kind == "mcq" else [], "teacher")


def _label(question: Question, result: TaskResult, label: TeacherLabel) -> Task | TeacherFailure:
    def failed(reason: str) -> TeacherFailure:
        return TeacherFailure(question_id=question.id, line=question.line, reason=reason)

    if result.outcome != "ok":
        return failed(f"the teacher's {result.error_kind or 'error'}: {(result.error or '').splitlines()[0][:200]}")
    prediction = result.prediction
    if prediction is None or prediction.answer is None:
        raw = (prediction.raw if prediction else "").strip().replace("\n", " ")
        return failed(f"no answer could be read from the teacher's reply {raw[:120]!r}")
    try:
        return question.answered(prediction.answer, "teacher", {TEACHER_KEY: label.model_dump()})
    except ValidationError as exc:
        return failed(f"the teacher's answer {prediction.answer!r} is not valid: {describe(exc)}")


def teach(questions: Sequence[Question], harness_dir: Path, name: str, out_dir: Path, vlm: VLM, cost: CostModel,
          runtime: RuntimeSettings, cache: ResponseCache | None = None, model: ModelSettings | None = None,
          executor: str = "local", ray_address: str | None = None,
          on_result: Callable[[TaskResult], None] | None = None,
          videos: Callable[[Sequence[Task]], Sequence[Task]] | None = None) -> TeachReport:
    """Have the harness at ``harness_dir`` answer ``questions``; its results are kept in ``out_dir``.

    Raises :class:`~videvolve.errors.InfraError` when the endpoint fails for good: every finished answer is kept, and
    calling again with the same ``out_dir`` continues where it stopped. ``videos`` may swap the videos the harness
    reads (proxies); the tasks keep the originals.
    """
    harness = load_harness(copy_harness(harness_dir, out_dir / "teacher-harness"))
    runs = [_unanswered_run(q) for q in questions]
    runs = list(videos(runs)) if videos else runs
    producer = producer_of(harness, runs, vlm, cost, runtime, out_dir)  # as solve_tasks keys what it reuses
    reused = sum(1 for t in runs if reusable_result(out_dir, t, producer) is not None)
    results = solve_tasks(harness, runs, vlm, cost, runtime, out_dir, cache, on_result=on_result, executor=executor,
                          model=model, ray_address=ray_address)
    tasks: list[Task] = []
    failures: list[TeacherFailure] = []
    for question, result in zip(questions, results, strict=True):
        label = TeacherLabel(harness=harness.version_id, name=name, budget=runtime.budget,
                             visual_tokens=result.usage.visual_tokens, frames=result.frames)
        labelled = _label(question, result, label)
        if isinstance(labelled, Task):
            tasks.append(labelled)
        else:
            failures.append(labelled)
    return TeachReport(tasks, failures, reused)


def teacher_cost(tasks: Sequence[Task], metric: str = "visual_tokens") -> float | None:
    """Mean cost per question the teacher spent on the teacher-labelled ``tasks`` (None: none has one).

    In ``metric``'s units: distinct frames for ``frames``, else visual tokens (the transcript text the teacher read
    is not recorded). What ``--cost-ceiling`` is usually a fraction of: a harness that agrees with the teacher is
    worth having when it costs a good deal less.
    """
    labels = [TeacherLabel.model_validate(t.meta[TEACHER_KEY]) for t in tasks
              if t.label_source == "teacher" and t.meta and TEACHER_KEY in t.meta]
    spent = [lb.frames if metric == "frames" else lb.visual_tokens for lb in labels]
    return sum(spent) / len(spent) if spent else None
