"""A task's trace: one JSON line per step, capped in bytes for every event, with the harness's notes capped too.

The steps are typed (:mod:`videvolve.skill_library.steps`): :class:`TraceWriter` writes them, :func:`read_steps`
reads them back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from videvolve.errors import StorageError
from videvolve.skill_library.steps import CutStep, LogNote, NotesCapped, ToolNote, TraceCapped, TraceStep, parse_step

MAX_NOTES = 1000
"""Log and tool notes a harness may leave per task; later ones are dropped (one line says so)."""
MAX_NOTE_CHARS = 4000
"""A note's data, as JSON, is cut to this many characters."""
MAX_TRACE_BYTES = 8 * 1024 * 1024
"""Bytes of one task's trace: past them, steps are dropped (one line says so); the task's end is always written."""
MAX_LINE_BYTES = 64 * 1024
"""Bytes of one step; a longer one keeps its event and says it was cut."""
ENDING_EVENTS = frozenset({"final", "error"})
"""Steps written past the cap: what ended the task (each is small: its texts are cut where they are written)."""
StepListener = Callable[[TraceStep], None]
"""Told every step as it is written (numbered): a server narrating a question in progress."""
log = logging.getLogger(__name__)


class TraceWriter:
    """Appends one JSON line per step to a task's trace file (at most :data:`MAX_TRACE_BYTES`)."""

    def __init__(self, path: Path | None, listener: StepListener | None = None) -> None:
        self.path = path
        self.listener = listener
        self.step = 0
        self.notes = 0
        self.bytes = 0
        self.dropped = 0
        self.sealed = False
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")

    def write(self, step: TraceStep) -> None:
        """One step, numbered here (dropped past the byte cap, unless it ends the task)."""
        if self.sealed:
            return
        self.step += 1
        step = step.model_copy(update={"step": self.step})
        if self.listener is not None:
            try:
                self.listener(step)
            except Exception as exc:  # a listener's failure never ends the task
                log.warning("a trace listener failed on %r: %s", step.event, exc)
        if self.path is None:
            return
        line = step.line()
        if len(line) > MAX_LINE_BYTES:
            line = CutStep(step=self.step, event=step.event,
                           cut=f"a step of {len(line):,} bytes (cap {MAX_LINE_BYTES:,})").line()
        if self.bytes + len(line) > MAX_TRACE_BYTES and step.event not in ENDING_EVENTS:
            self.dropped += 1
            if self.dropped > 1:
                return
            line = TraceCapped(step=self.step, error=f"this task's trace reached {MAX_TRACE_BYTES:,} bytes; later "
                                                     "steps are dropped").line()
        self.bytes += len(line)
        try:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError as exc:
            raise StorageError.writing("the trace", self.path, exc) from exc

    def seal(self) -> None:
        """Write nothing more (the task ended without the thread that was still serving it)."""
        self.sealed = True

    def note(self, step: LogNote | ToolNote) -> None:
        """A step the harness asked for (``log``, ``tool``): at most :data:`MAX_NOTES`, each size-capped."""
        self.notes += 1
        if self.notes > MAX_NOTES:
            if self.notes == MAX_NOTES + 1:
                self.write(NotesCapped(error=f"more than {MAX_NOTES} log or tool notes; later ones dropped"))
            return
        clipped = {k: v if len(text := _dumps(v)) <= MAX_NOTE_CHARS else text[:MAX_NOTE_CHARS]
                   for k, v in step.record().items() if k not in ("step", "event")}
        self.write(step.model_copy(update=clipped))


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, default=str)
    except (ValueError, RecursionError):
        return "<not JSON>"


def iter_steps(path: Path, max_bytes: int = MAX_TRACE_BYTES + MAX_LINE_BYTES) -> Iterator[TraceStep]:
    """A trace's steps read as a stream: at most ``max_bytes`` of it.

    Left out: an over-long line, one that is not JSON, and a JSON line that is no step (not an object with an
    ``event``). A step of an unknown kind, or one that does not fit its kind, is an
    :class:`~videvolve.skill_library.steps.UnknownStep` (:func:`~videvolve.skill_library.steps.parse_step`).
    """
    if not path.exists():
        return
    read, skipping = 0, False
    with path.open("rb") as fh:
        while read < max_bytes:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            read += len(raw)
            whole = raw.endswith(b"\n")
            if skipping or (not whole and len(raw) > MAX_LINE_BYTES):  # an over-long line: skipped to its end
                skipping = not whole
                continue
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            if not isinstance(data, dict):
                continue
            try:
                step = parse_step(data)
            except ValidationError:  # an object without an event
                continue
            yield step


def read_steps(path: Path) -> list[TraceStep]:
    """A trace's steps (empty when there is none), read as :func:`iter_steps` does."""
    return list(iter_steps(path))
