"""One harness version's result on one task, and where results live on disk (one JSON file per task)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from videvolve.tasks import Prediction, Task
from videvolve.usage import TaskUsage


class TaskResult(BaseModel):
    """One harness version on one task: outcome, prediction, score and cost."""

    task_id: str
    harness_id: str
    split: str | None = None
    kind: str
    outcome: str = Field(description="ok or error")
    error_kind: str | None = Field(None, description="an ErrorKind value: parse, budget, timeout, memory, crash, "
                                                     "static, invalid, bad_request, media")
    error: str | None = None
    prediction: Prediction | None = None
    score: float = Field(description="1/0 for mcq, interval-set IoU for grounding; 0 for an error")
    usage: TaskUsage = Field(default_factory=TaskUsage, description="frames, tokens, calls, observed times")
    wall_s: float = 0.0

    @property
    def frames(self) -> int:
        """Distinct frames shown to the model."""
        return self.usage.frames


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


def write_result(out_dir: Path, result: TaskResult) -> None:
    """Store a result atomically (a crash never leaves half a file)."""
    path = result_path(out_dir, result.task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(result.model_dump_json(indent=1), encoding="utf-8")
    tmp.replace(path)


def cost_of(result: TaskResult, metric: str = "visual_tokens", text_weight: float = 1.0) -> float:
    """One question's cost: distinct frames, or visual tokens (images, video, the images OCR read).

    With ``visual_tokens+text``, plus ``text_weight`` x the text tokens of the transcript read
    (:meth:`TaskUsage.cost`, the one definition the budgets and the status line share).
    """
    return result.usage.cost(metric, text_weight)
