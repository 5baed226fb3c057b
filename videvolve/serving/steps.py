"""What a harness is doing, in a line per step: how ``serve`` narrates a streamed question while it is answered.

A step is one typed step of the task's trace (:mod:`videvolve.skill_library.steps`), told as the
:class:`~videvolve.skill_library.trace.TraceWriter` writes it: a model call with the moments it showed and the start
of what the model said, an OCR read, a transcript read, a refused request, the harness's failure. Steps that say
nothing to a person (notes, the final answer, which comes as the content) have no line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from videvolve.skill_library.steps import (
    Failed,
    InvalidToolCalls,
    ModelCall,
    ModelError,
    OcrRead,
    Refused,
    RequestError,
    TraceStep,
    TranscriptRead,
    TranscriptSearch,
)
from videvolve.skill_library.trace import StepListener

REPLY_CHARS = 160
"""The part of a model's reply a line quotes."""


def clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour)."""
    s = max(0, int(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _moments(times: list[float]) -> str:
    ts = sorted(times)
    if not ts:
        return "no moment of the video"
    if len(ts) == 1:
        return f"the moment {clock(ts[0])}"
    return f"{len(ts)} moments from {clock(ts[0])} to {clock(ts[-1])}"


def _short(text: Any, limit: int = REPLY_CHARS) -> str:
    one = " ".join(str(text or "").split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def step_line(step: TraceStep) -> str | None:
    """A person's line for one step of a task's trace, or None for a step with nothing to tell."""
    if isinstance(step, ModelCall):
        _, _, mode = step.event.partition(":")  # ask:describe, ask:match, ask:answer; chat
        said = _short(step.reply)
        answer = f"it called {', '.join(step.tool_calls)}" if step.tool_calls else (f"it said: {said}" if said else "")
        return (f"Asked the model{f' ({mode})' if mode else ''} about {_moments(step.observed_times)} "
                f"({step.new_frames} new frame(s))" + (f"; {answer}" if answer else "") + ".")
    if isinstance(step, OcrRead):
        return f"Read the on-screen text at {_moments(step.observed_times)}."
    if isinstance(step, TranscriptRead):
        end = "the end" if step.end is None else clock(step.end)
        return f"Read the transcript from {clock(step.start)} to {end}."
    if isinstance(step, TranscriptSearch):
        return f"Searched the transcript for \"{_short(step.text, 60)}\" ({step.hits} hit(s))."
    if isinstance(step, Refused) and step.error is None:  # the frame budget's: it says how far past it would go
        budget = "no budget" if step.budget is None else f"a budget of {step.budget}"
        return (f"A request was refused ({step.event}): {step.requested or 0} new frame(s) after {step.used} shown, "
                f"{budget}.")
    if isinstance(step, Refused | ModelError | RequestError):
        return f"A request was refused ({step.event}): {_short(step.error)}"
    if isinstance(step, InvalidToolCalls):
        return f"A request was refused ({step.event}): {_short(step.reply)}"
    if isinstance(step, Failed):
        return f"The harness failed ({step.kind}): {_short(step.error)}"
    return None


def narrated(say: Callable[[str], None]) -> StepListener:
    """A step listener that tells ``say`` a person's line for each step that has one."""
    def on_step(step: TraceStep) -> None:
        if (line := step_line(step)) is not None:
            say(line)
    return on_step


def steps_text(lines: list[str]) -> str:
    """Lines of steps as one text (a ``reasoning`` field or delta)."""
    return "".join(f"{line}\n" for line in lines)
