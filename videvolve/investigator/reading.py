"""Whether the answer was said (transcript) or written (on screen) in the window, and the harness read it there.

Trusted code, no model: the investigator knows the gold. For a multiple-choice question the window is its evidence
(the whole video when it has none) and the answer is the correct option's text; for a grounding question the window
is the gold interval and what must be said is the query's content words. "Said" is plain case-folded matching on the
transcript; "written" is OCR (when the extra is installed) of a few full-resolution frames inside the window. The
harness read the window when its trace holds a transcript read (or an OCR read) overlapping it.
"""

from __future__ import annotations

from collections.abc import Sequence

from videvolve.datasets.transcripts import Transcript, normalise
from videvolve.memory.records import Evidence
from videvolve.skill_library.steps import OcrRead, TraceStep, TranscriptRead
from videvolve.tasks import LETTERS, Task

STOP = frozenset({"the", "a", "an", "of", "in", "on", "at", "to", "and", "or", "is", "are", "was", "were", "does",
                  "do", "did", "when", "what", "which", "who", "how", "this", "that", "with", "for", "from", "by",
                  "it", "its", "his", "her", "their", "there", "be", "been", "has", "have"})
OCR_FRAMES = 3


def _words(text: str) -> set[str]:
    return {w for w in normalise(text).split() if w not in STOP and len(w) > 2}


def _windows(task: Task) -> list[tuple[float, float]]:
    if task.kind == "grounding":
        return [i.pair() for i in task.intervals]
    return [i.pair() for i in task.evidence] or [(0.0, float(task.duration or float("inf")))]


def _says_answer(task: Task, text: str) -> bool:
    """The window's text carries the answer: the right option (and no other), or half of the query's words or more."""
    said = normalise(text)
    if task.kind == "mcq":
        options = [normalise(o) for o in task.options or []]
        right = options[LETTERS.index(str(task.answer))] if options else ""
        return bool(right) and f" {right} " in f" {said} " and not any(
            o and o != right and f" {o} " in f" {said} " for o in options)
    wanted = _words(task.question)
    return bool(wanted) and len(wanted & set(said.split())) >= max(1, (len(wanted) + 1) // 2)


def _read_transcript(trace: Sequence[TraceStep], windows: list[tuple[float, float]]) -> bool:
    """The trace reads the transcript over one of the windows."""
    return any(step.start <= b and a <= (float("inf") if step.end is None else step.end)
               for step in trace if isinstance(step, TranscriptRead) for a, b in windows)


def _read_screen(trace: Sequence[TraceStep], windows: list[tuple[float, float]]) -> bool:
    """The trace reads the on-screen text (OCR) at a time inside one of the windows."""
    return any(a <= t <= b for step in trace if isinstance(step, OcrRead) for t in step.observed_times
               for a, b in windows)


def said_unread(task: Task, transcript: Transcript | None, trace: Sequence[TraceStep]) -> list[Evidence]:
    """Segments of the window that say the answer, when the harness did not read the transcript there."""
    windows = _windows(task)
    if transcript is None or not windows or _read_transcript(trace, windows):
        return []
    segments = [s for a, b in windows for s in transcript.window(a, b)]
    if not segments or not _says_answer(task, " ".join(s.text for s in segments)):
        return []
    return [Evidence(time=s.start, seen="said in the transcript there; the harness did not read it")
            for s in segments[:8]]


def written_unread(task: Task, trace: Sequence[TraceStep]) -> tuple[list[Evidence], int]:
    """Frames of the window whose on-screen text gives the answer, when the harness did not OCR there; OCR calls."""
    from videvolve.media import ocr
    from videvolve.needles.frames import frame_source

    windows = _windows(task)
    if not ocr.available() or task.kind != "mcq" or not task.evidence or _read_screen(trace, windows):
        return [], 0
    times = [a + (b - a) * (k + 0.5) / OCR_FRAMES for a, b in windows[:2] for k in range(OCR_FRAMES)]
    found = []
    for frame in frame_source(task).frames(times, None):
        if _says_answer(task, " ".join(line.text for line in ocr.read_text(frame.image))):
            found.append(Evidence(time=frame.time, seen="written on screen there; the harness did not read it"))
    return found, len(times)
