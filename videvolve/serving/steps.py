"""What a harness is doing, in a line per step: how ``serve`` narrates a streamed question while it is answered.

A step is one event of the task's trace (:class:`~videvolve.skill_library.trace.TraceWriter`), told as it is
written: a model call with the moments it showed and the start of what the model said, an OCR read, a transcript
read, a refused request, the harness's failure. Steps that say nothing to a person (notes, the final answer, which
comes as the content) have no line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from videvolve.skill_library.trace import StepListener

REPLY_CHARS = 160
"""The part of a model's reply a line quotes."""


def clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour)."""
    s = max(0, int(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _moments(times: Any) -> str:
    ts = sorted(float(t) for t in times or [] if isinstance(t, int | float))
    if not ts:
        return "no moment of the video"
    if len(ts) == 1:
        return f"the moment {clock(ts[0])}"
    return f"{len(ts)} moments from {clock(ts[0])} to {clock(ts[-1])}"


def _short(text: Any, limit: int = REPLY_CHARS) -> str:
    one = " ".join(str(text or "").split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def step_line(event: str, data: dict[str, Any]) -> str | None:
    """A person's line for one step of a task's trace, or None for a step with nothing to tell."""
    op, _, mode = event.partition(":")  # ask:describe, ask:match, ask:answer; chat
    if op in ("ask", "chat"):
        said = _short(data.get("reply"))
        tools = data.get("tool_calls") or []
        answer = f"it called {', '.join(map(str, tools))}" if tools else (f"it said: {said}" if said else "")
        new = int(data.get("new_frames") or 0)
        return (f"Asked the model{f' ({mode})' if mode else ''} about {_moments(data.get('observed_times'))} "
                f"({new} new frame(s))" + (f"; {answer}" if answer else "") + ".")
    if event == "ocr":
        return f"Read the on-screen text at {_moments(data.get('observed_times'))}."
    if event == "transcript":
        end = data.get("end")
        span = f"{clock(float(data.get('start') or 0))} to {clock(float(end))}" if isinstance(end, int | float) \
            else f"{clock(float(data.get('start') or 0))} to the end"
        return f"Read the transcript from {span}."
    if event == "search_transcript":
        return f"Searched the transcript for \"{_short(data.get('text'), 60)}\" ({data.get('hits', 0)} hit(s))."
    if event in ("budget", "invalid", "model_error", "request_error", "invalid_tool_calls"):
        return f"A request was refused ({event}): {_short(data.get('error') or data.get('reply'))}"
    if event == "error":
        return f"The harness failed ({data.get('kind')}): {_short(data.get('error'))}"
    return None


def narrated(say: Callable[[str], None]) -> StepListener:
    """A step listener that tells ``say`` a person's line for each step that has one."""
    def on_step(event: str, data: dict[str, Any]) -> None:
        if (line := step_line(event, data)) is not None:
            say(line)
    return on_step


def steps_text(lines: list[str]) -> str:
    """Lines of steps as one text (a ``reasoning`` field or delta)."""
    return "".join(f"{line}\n" for line in lines)
