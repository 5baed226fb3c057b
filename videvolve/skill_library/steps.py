"""A task's trace steps: one typed line per thing a harness did on one question (``TraceWriter`` writes them).

Each kind of step is a model, told apart by its ``event`` key (one model may take several values: a model call's
says how it asked, a refusal's why). A line's keys are its model's fields, in the order the release before these
models wrote them, so old and new traces are one format. A key a later release added is left out of a line while
it is None, and reads as None in an older trace; a key this release does not know is left out of the step read.

:func:`parse_step` reads one line's object: a step of a kind this release does not know (another release's), or of a
known kind whose keys do not fit its model, is kept as an :class:`UnknownStep` with all its keys; a step cut for its
size (:data:`~videvolve.skill_library.trace.MAX_LINE_BYTES`) reads as a :class:`CutStep`; an object without an
``event`` is no step (ValidationError). :func:`~videvolve.skill_library.trace.read_steps` reads a whole trace.
"""

from __future__ import annotations

import json
import logging
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from videvolve.errors import ErrorKind

log = logging.getLogger(__name__)


class TraceStep(BaseModel):
    """The keys every step has; a kind narrows ``event`` to its own values."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    step: int = Field(0, description="its place in the task's trace, from 1 (the writer numbers it)")
    event: str = Field(description="what kind of step it is")

    def record(self) -> dict[str, Any]:
        """The step as its JSON line's object (values as written: an enum as its text, no float rounded)."""
        return self.model_dump()

    def line(self) -> str:
        """The step's JSON line, with its newline."""
        return json.dumps(self.record(), default=str) + "\n"


def _none(value: Any) -> bool:
    """A key with ``exclude_if=_none`` is left out of the line while it is None (as the writers before did)."""
    return value is None


class FrameSpec(BaseModel):
    """A frame or a clip as the model was shown it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: Literal["frame", "clip"] = Field(description="frame, or clip (its sampled frames)")
    times: list[float] = Field(description="the video times shown (seconds)")
    max_side: int | None = Field(description="the longer side it was scaled to (None: full resolution)")


class SheetSpec(BaseModel):
    """A contact sheet as it was laid out (the report and the editor's workspace draw it again)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: Literal["sheet"] = Field("sheet", description="sheet")
    times: list[float] = Field(description="its cells' video times (seconds)")
    cell_width: int = Field(description="a cell's width in pixels")
    cols: int | None = Field(None, description="cells per row (absent in a trace from before they were kept)",
                             exclude_if=_none)

    @property
    def columns(self) -> int:
        """Cells per row as the sheet was drawn (6, the SDK's default, where the trace did not keep them)."""
        return 6 if self.cols is None else self.cols


ObservationSpec = FrameSpec | SheetSpec
"""One observation shown in a model call (told apart by its ``kind``)."""


class Observing(TraceStep):
    """A step that looked at the video."""

    observed_times: list[float] = Field(description="the video times it looked at (seconds), sorted")


CallEvent = Literal["ask:answer", "ask:match", "ask:describe", "chat"]
"""How a model call asked: ``ask`` in one of its modes, or a raw ``chat``."""


class ModelCall(Observing):
    """A model request the harness made (``ask`` or ``chat``), what it showed and what the model said."""

    event: CallEvent = Field(description="ask:answer, ask:match, ask:describe or chat")
    observations: list[ObservationSpec] = Field(default_factory=list, description="what it showed, in order")
    new_frames: int = Field(description="frames shown for the first time in the task (they count in the budget)")
    image_tokens: int = Field(description="the images' visual tokens")
    video_tokens: int = Field(description="the clips' visual tokens")
    prompt_tokens: int = Field(description="the request's estimated tokens: text, images and clips")
    reported_prompt_tokens: int | None = Field(description="the server's count (None: it gave none)")
    cached: bool = Field(description="the response cache answered it")
    reply: str = Field(description="the reply's first 500 characters")
    tool_calls: list[str] = Field(description="the tools the model called")
    wall_s: float = Field(description="seconds the parent spent serving it")


class NoticeCheck(Observing):
    """The parent's own request after an unparsable answer, to see whether the model says it cannot serve the task."""

    event: Literal["notice_check"] = "notice_check"
    error: str | None = Field(None, description="why the request failed (absent when it was answered)",
                              exclude_if=_none)
    reply: str | None = Field(None, description="the reply's first 500 characters (absent when it failed)",
                              exclude_if=_none)


class Refused(TraceStep):
    """A model request refused before it was sent: past the frame budget, or another of the request's caps."""

    event: Literal["budget", "invalid"] = Field(description="budget, or invalid (a cap on the request's size)")
    requested: int | None = Field(None, description="new frames it would have shown (the budget's refusal only)",
                                  exclude_if=_none)
    error: str | None = Field(None, description="the cap it broke (a cap's refusal only)", exclude_if=_none)
    used: int = Field(description="frames the task had shown")
    budget: int | None = Field(description="the task's frame budget (None: none)")


class ModelError(TraceStep):
    """The model's server rejected a request."""

    event: Literal["model_error"] = "model_error"
    error: str = Field(description="what it said")


class InvalidToolCalls(TraceStep):
    """The model called a tool in a way nobody can read (the harness's parse error)."""

    event: Literal["invalid_tool_calls"] = "invalid_tool_calls"
    calls: list[dict[str, Any]] = Field(description="the calls, as the model's client gave them")
    reply: str = Field(description="the reply's first 500 characters")


class RequestError(TraceStep):
    """A request the parent's code could not serve: the harness's error, not the run's."""

    event: Literal["request_error"] = "request_error"
    op: str = Field(description="the request (its first 100 characters)")
    error: str = Field(description="the exception")


class TranscriptRead(TraceStep):
    """The harness read the transcript's segments overlapping a window."""

    event: Literal["transcript"] = "transcript"
    start: float = Field(description="the window's start (seconds)")
    end: float | None = Field(description="its end (None: the video's end)")
    segments: int = Field(description="segments returned")
    transcript_tokens: int = Field(description="the task's transcript tokens so far")


class TranscriptSearch(TraceStep):
    """The harness searched the transcript for a text."""

    event: Literal["search_transcript"] = "search_transcript"
    text: str = Field(description="the text (its first 200 characters)")
    hits: int = Field(description="segments where it is said")
    transcript_tokens: int | None = Field(None, description="the task's transcript tokens so far (absent in a trace "
                                          "from before they were counted)", exclude_if=_none)


class OcrRead(Observing):
    """The harness read the on-screen text of a frame or contact sheet."""

    event: Literal["ocr"] = "ocr"
    new_frames: int = Field(description="frames read for the first time in the task (they count in the budget)")
    ocr_tokens: int = Field(description="the image's visual tokens")
    text: list[str] = Field(description="the lines read (the first 50)")


class LogNote(TraceStep):
    """A note the harness logged (``ctx.log``); its data is cut to a JSON text past the note's cap."""

    event: Literal["log"] = "log"
    message: str = Field(description="the message (its first 2,000 characters)")
    data: Any = Field(description="the data it gave (JSON)")


class ToolNote(TraceStep):
    """A tool call the harness counted (``ctx.tool``); its parameters are cut to a JSON text past the note's cap."""

    event: Literal["tool"] = "tool"
    tool: str = Field(description="the tool's name (its first 200 characters)")
    params: Any = Field(description="the parameters it gave (JSON)")


class Final(TraceStep):
    """The harness's answer."""

    event: Literal["final"] = "final"
    answer: str = Field(description="the answer as text (its first 2,000 characters)")
    parsed: bool = Field(description="it could be read as an answer to the task")


class Failed(TraceStep):
    """What ended the task without an answer: the harness's failure, a timeout, a refusal before it ran, ..."""

    event: Literal["error"] = "error"
    kind: ErrorKind = Field(description="the task's error kind (``errors.ErrorKind``: crash, timeout, parse, ...)")
    error: str = Field(description="what happened")


class Result(TraceStep):
    """The task's scored result (the trace's last step)."""

    event: Literal["result"] = "result"
    outcome: str = Field(description="ok or error")
    error_kind: str | None = Field(description="the error kind (None: ok)")
    score: float = Field(description="the task's score")
    frames: int = Field(description="distinct frames the harness was shown or read")


class NotesCapped(TraceStep):
    """The harness left more notes than a task may; later ones are dropped."""

    event: Literal["notes_capped"] = "notes_capped"
    error: str = Field(description="what was dropped")


class TraceCapped(TraceStep):
    """The trace reached its byte cap; later steps are dropped (but what ends the task)."""

    event: Literal["trace_capped"] = "trace_capped"
    error: str = Field(description="what was dropped")


class CutStep(TraceStep):
    """A step too long to write (any kind): only its event is kept."""

    cut: str = Field(description="its size and the cap")


class UnknownStep(TraceStep):
    """A step of a kind this release does not know, or whose keys do not fit its kind: kept as it is."""

    model_config = ConfigDict(extra="allow", frozen=True)


KnownStep = (ModelCall | NoticeCheck | Refused | ModelError | InvalidToolCalls | RequestError | TranscriptRead
             | TranscriptSearch | OcrRead | LogNote | ToolNote | Final | Failed | Result | NotesCapped | TraceCapped)
"""What a task's services write."""
KINDS: tuple[type[TraceStep], ...] = typing.get_args(KnownStep)


def events_of(kind: type[TraceStep]) -> tuple[str, ...]:
    """The ``event`` values of a kind."""
    return typing.get_args(kind.model_fields["event"].annotation)


BY_EVENT: dict[str, type[TraceStep]] = {event: kind for kind in KINDS for event in events_of(kind)}
"""``event`` -> the model of that kind."""


def parse_step(data: dict[str, Any]) -> TraceStep:
    """One line's object as its kind (see the module's docstring); ValidationError: no step at all."""
    if "cut" in data and set(data) <= {"step", "event", "cut"}:
        try:
            return CutStep.model_validate(data)
        except ValidationError:
            pass
    kind = BY_EVENT.get(str(data.get("event")))
    if kind is not None:
        try:
            return kind.model_validate(data)
        except ValidationError as exc:
            log.warning("a %s step this release cannot read is kept as unknown: %s", data.get("event"),
                        "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    return UnknownStep.model_validate(data)
