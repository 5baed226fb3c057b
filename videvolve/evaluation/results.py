"""One harness version's result on one task, and where results live on disk (one JSON file per task).

A stored result names what produced it (:class:`Producer`: harness version, backend, model, decoding, the cost
model that metered it, the runtime settings that change replies, and the task's content); it is reused only by the
same producer, and never when it is an error a rerun may cure (a video that was missing or unreadable: ``media``;
a timeout reached under a shorter task timeout, or before model calls were off the task's clock; a memory error
reached under a smaller address-space limit).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from videvolve.atomic import write_text_atomic
from videvolve.config import RuntimeSettings
from videvolve.datasets.transcripts import find_transcript
from videvolve.errors import ErrorKind, MediaNotFoundError
from videvolve.media import ocr
from videvolve.media.fingerprint import fingerprint
from videvolve.media.info import file_key
from videvolve.models.base import VLM, served_context_of
from videvolve.models.cost import CostModel
from videvolve.needles.frames import plan_of
from videvolve.rundir import EvalDir
from videvolve.tasks import Prediction, Task
from videvolve.usage import TaskUsage
from videvolve.version import result_release

RETRIED_ON_RERUN = frozenset({ErrorKind.MEDIA, ErrorKind.BAD_REQUEST})
"""Errors caused by what can change between runs: tried again, never reused. A missing or unreadable video; a
request the server refused or answered unreadably, which depends on how it was started (``--max-model-len``,
``--limit-mm-per-prompt``, the media it accepts, its chat template), and the endpoint reports only part of that."""
ENDPOINT_BOUND = frozenset({ErrorKind.BUDGET})
"""Errors that come from the endpoint's context length (a request the context guard refused as too long before
sending it): reused only where the endpoint takes as many prompt tokens as when they were made."""
LIMITS = ("time_limit_s", "memory_bytes", "served_context")
"""A producer's limits: not part of a result's key (they change no answer), but they decide which errors are reused."""
REPLY_SETTINGS = ("budget", "image_format", "jpeg_quality", "clip_mode")
"""Runtime settings that change what the model is shown, so a result made under others is not reused."""


class Producer(BaseModel):
    """Everything that decides a result besides the task: a stored result is reused only by the same producer."""

    harness_id: str
    release: str = Field(default_factory=result_release, description="the videvolve release and a digest of the "
                         "code that makes a result (media, prompts, the SDK, model clients, scoring: "
                         "version.RESULT_CODE): a result made by other code is not reused")
    backend: str = Field(description="the model client's class (SimVLM, ChatModelVLM, ...)")
    model: str
    revision: str
    decoding: dict[str, Any]
    cost: dict[str, Any] = Field(description="the cost model (--family) that metered its tokens and bounds its context")
    runtime: dict[str, Any] = Field(description="the REPLY_SETTINGS of the run")
    ocr: str | None = Field(None, description="the OCR engine ctx.ocr reads with (None: none installed, and ctx.ocr "
                            "refused; left out of the key then, as keys were before it was named)")
    time_limit_s: float | None = Field(None, description="the run's --task-timeout: not part of the key (it changes "
                                       "no answer), but a timeout is reused only under a limit no longer than its own")
    memory_bytes: int | None = Field(None, description="the run's --memory-bytes: not part of the key either, but a "
                                     "memory error is reused only under a limit no larger than its own")
    served_context: int | None = Field(None, description="the prompt tokens the endpoint takes (its max_model_len "
                                       "less --context-margin): not part of the key, but a request the context "
                                       "guard refused as too long is reused only under the same")

    @classmethod
    def of(cls, harness_id: str, vlm: VLM, runtime: RuntimeSettings, cost: CostModel) -> Producer:
        """The producer of results of ``harness_id`` answered by ``vlm``, metered by ``cost``, under ``runtime``."""
        return cls(harness_id=harness_id, backend=type(vlm).__qualname__, model=vlm.name, revision=vlm.revision,
                   decoding=vlm.decoding(), cost=dataclasses.asdict(cost),
                   runtime=runtime.model_dump(include=set(REPLY_SETTINGS)), ocr=ocr.engine(),
                   time_limit_s=runtime.wall_seconds,
                   memory_bytes=runtime.memory_bytes, served_context=served_context_of(vlm))

    def key(self, task: Task) -> str:
        """The id of this producer's result on ``task``: its whole content, that of its video and transcript files too.

        A video or subtitle file replaced under the same name makes another task, whose stored result is not reused.
        """
        unnamed = {"ocr"} if self.ocr is None else set()
        payload = {"producer": self.model_dump(mode="json", exclude=set(LIMITS) | unnamed),
                   "task": task.model_dump(mode="json"), "files": input_files(task)}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]


def input_files(task: Task) -> dict[str, Any]:
    """Content fingerprints of the files a task reads (None: no such file).

    Its video, its transcript, and the other videos its needle plan splices in: what the model is shown of those
    changes with their content too.
    """
    transcript = find_transcript(task)
    out: dict[str, Any] = {"video": video_fingerprint(task.video),
                           "transcript": video_fingerprint(transcript[0]) if transcript else None}
    plan = plan_of(task)
    sources = sorted({n.source for n in plan.needles if n.source}) if plan is not None else []
    if sources:
        out["splices"] = {source: video_fingerprint(source) for source in sources}
    return out


def video_fingerprint(path: str | Path) -> str | None:
    """The content fingerprint of a media file (None: it cannot be read), read once per file version."""
    try:
        file_key(path)  # a folder or a missing file: no fingerprint
        return fingerprint(path)
    except (MediaNotFoundError, OSError):
        return None


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
    score: float = Field(allow_inf_nan=False,
                         description="1/0 for mcq, interval-set IoU for grounding; 0 for an error")
    usage: TaskUsage = Field(default_factory=TaskUsage, description="frames, tokens, calls, observed times")
    wall_s: float = 0.0
    produced_by: str | None = Field(None, description="Producer.key of what produced it (None: before keys existed, "
                                    "never reused)")
    time_limit_s: float | None = Field(None, description="the harness's own-time limit it ran under (--task-timeout; "
                                       "None: written before model calls were off the task's clock)")
    memory_bytes: int | None = Field(None, description="the harness's address-space limit it ran under "
                                     "(--memory-bytes; None: not recorded)")
    served_context: int | None = Field(None, description="the prompt tokens its endpoint took (None: unknown, or a "
                                       "model with no endpoint)")

    @property
    def frames(self) -> int:
        """Distinct frames shown to the model."""
        return self.usage.frames


def result_path(out_dir: Path, task_id: str) -> Path:
    """Where one task's result lives (``out_dir`` is an :class:`~videvolve.rundir.EvalDir`'s folder)."""
    return EvalDir(out_dir).result(task_id)


def read_result(out_dir: Path, task_id: str) -> TaskResult | None:
    """Whatever result is stored for a task id, whoever produced it."""
    path = result_path(out_dir, task_id)
    if not path.is_file():
        return None
    try:
        return TaskResult.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        return None


def load_result(out_dir: Path, task: Task, producer: Producer) -> TaskResult | None:
    """A stored result of this producer on this task (this very task content), if any."""
    result = read_result(out_dir, task.id)
    return result if result is not None and result.produced_by == producer.key(task) else None


def reusable_result(out_dir: Path, task: Task, producer: Producer) -> TaskResult | None:
    """A stored result a rerun may take instead of running the task: this producer's, and no input error.

    A timeout is taken only when it was reached under a limit at least as long as this run's, on the harness's own
    time: one written by an older version (whose clock also ran while the endpoint served the harness) or under a
    shorter ``--task-timeout`` says nothing about this run, and the task runs again. A memory error likewise, only
    when reached under a ``--memory-bytes`` at least as large as this run's. A request the context guard refused as
    too long only where the endpoint takes as many prompt tokens as it did then: a server restarted with another
    ``--max-model-len``, or another ``--context-margin``, runs it again. Any other result only where the endpoint
    still takes its largest request, as the guard counted it: under a shorter context its requests may no longer fit
    (the rerun asks the response cache for the requests that still do, and the guard refuses the rest). A request
    the server itself refused, never.
    """
    result = load_result(out_dir, task, producer)
    if result is None or result.error_kind in RETRIED_ON_RERUN:
        return None
    if result.error_kind == ErrorKind.TIMEOUT and (
            result.time_limit_s is None or (producer.time_limit_s or 0.0) > result.time_limit_s):
        return None
    if result.error_kind == ErrorKind.MEMORY and (
            result.memory_bytes is None or (producer.memory_bytes or 0) > result.memory_bytes):
        return None
    if result.error_kind in ENDPOINT_BOUND and result.served_context != producer.served_context:
        return None
    if producer.served_context is not None and not still_fits(result, producer.served_context):
        return None
    return result


def still_fits(result: TaskResult, usable: int) -> bool:
    """Whether an endpoint that takes ``usable`` prompt tokens would take every request ``result`` made.

    Its largest request as the context guard counted it; a result that recorded none though it made requests (one
    stored before that was recorded) only where the endpoint takes at least what it took then, and never where
    that was not known (read at the task's end, while ``/v1/models`` was busy).
    """
    if result.usage.largest_request_tokens:
        return result.usage.largest_request_tokens <= usable
    if result.usage.requests == 0:
        return True
    return result.served_context is not None and usable >= result.served_context


def write_result(out_dir: Path, result: TaskResult) -> None:
    """Store a result atomically (a crash never leaves half a file)."""
    write_text_atomic(result_path(out_dir, result.task_id), result.model_dump_json(indent=1), "the result")
