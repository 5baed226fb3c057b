"""The reading half of the trusted SDK services: a task's transcript and on-screen text (OCR).

``transcript(start, end)`` returns the segments overlapping a window and meters their text tokens once per distinct
segment (``transcript_tokens``; never frames); ``search_transcript(text)`` returns the windows where the text is said
(case-folded plain matching) and meters the segments it matched the same way (where a name is said is read from
them), at most :data:`MAX_SEARCHES` times per task. A task without a transcript gets empty results.
``ocr(observation)`` reads the text in a frame or contact sheet of at most :data:`MAX_OCR_PIXELS`: one ``ocr_calls``,
the image's visual tokens in ``ocr_tokens`` (the gate counts them as visual cost), and its frames count against the
frame budget like frames shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from videvolve.errors import RequestRefused
from videvolve.media import contact_sheet
from videvolve.models.cost import text_tokens
from videvolve.skill_library.steps import OcrRead, TranscriptRead, TranscriptSearch

if TYPE_CHECKING:
    from PIL import Image

    from videvolve.config import RuntimeSettings
    from videvolve.datasets.transcripts import Transcript
    from videvolve.models.cost import CostModel
    from videvolve.needles.frames import FrameSource
    from videvolve.skill_library.meter import Meter
    from videvolve.skill_library.trace import TraceWriter
    from videvolve.tasks import TaskView

MAX_OCR_CALLS = 64
"""OCR requests one task may make (each runs a detector and a recogniser on the parent's CPU)."""
MAX_OCR_PIXELS = 4 * 1024 * 1024
"""Pixels of one image OCR reads (a 2560x1440 frame fits): the detector runs on the whole image in the parent, about
100 bytes and a microsecond of CPU a pixel, under a lock every task shares (a 1024x15,500 sheet: 1.6 GB, 80 s)."""
MAX_SEARCH_CHARS = 500
MAX_SEARCHES = 256
"""Transcript searches one task may make."""
MAX_SEGMENTS = 1000
"""Segments one transcript request returns (a long video's whole transcript comes in windows)."""


class ReadingServices:
    """Transcript and OCR requests; mixed into ``TaskServices``, whose state it uses."""

    transcript: Transcript | None
    view: TaskView
    video: str
    pictures: FrameSource
    cost: CostModel
    settings: RuntimeSettings
    meter: Meter
    trace: TraceWriter
    _handles: dict[str, Any]

    def _window(self, value: Any, default: float) -> float:
        if value is None:
            return default
        if not isinstance(value, int | float) or value != value:
            raise RequestRefused("invalid", f"a transcript window bound is a number of seconds, got {value!r}")
        return float(value)

    def op_transcript(self, start: float = 0.0, end: float | None = None) -> list[dict[str, Any]]:
        """The segments overlapping ``[start, end]`` (the first ``MAX_SEGMENTS``), metered once per distinct segment."""
        lo, hi = self._window(start, 0.0), self._window(end, float("inf"))
        if self.transcript is None or hi < lo:
            return []
        out: list[dict[str, Any]] = []
        for k, seg in enumerate(self.transcript.segments):
            if seg.end >= lo and seg.start <= hi and len(out) < MAX_SEGMENTS:
                self._read_segment(k, seg.text)
                out.append({"start": seg.start, "end": seg.end, "text": seg.text})
        self.trace.write(TranscriptRead(start=lo, end=hi if hi != float("inf") else None, segments=len(out),
                                        transcript_tokens=self.meter.transcript_tokens))
        return out

    def op_search_transcript(self, text: str) -> list[list[float]]:
        """``[start, end]`` of each segment where ``text`` is said (plain case-folded matching, no model)."""
        if not isinstance(text, str) or len(text) > MAX_SEARCH_CHARS:
            raise RequestRefused("invalid", f"search_transcript takes a text of at most {MAX_SEARCH_CHARS} characters")
        self.meter.transcript_searches += 1
        if self.meter.transcript_searches > MAX_SEARCHES:
            raise RequestRefused("invalid", f"this task already made {MAX_SEARCHES} transcript searches (the cap)")
        hits: list[list[float]] = []
        segments = self.transcript.segments if self.transcript else []
        found = {id(s) for s in self.transcript.search(text)} if self.transcript else set()
        for k, seg in enumerate(segments):
            if id(seg) in found:
                self._read_segment(k, seg.text)
                hits.append([seg.start, seg.end])
        self.trace.write(TranscriptSearch(text=text[:200], hits=len(hits),
                                          transcript_tokens=self.meter.transcript_tokens))
        return hits

    def _read_segment(self, k: int, text: str) -> None:
        """Meter segment ``k`` as read: its text tokens, once per task."""
        if k not in self.meter.transcript_segments:
            self.meter.transcript_segments.add(k)
            self.meter.transcript_tokens += text_tokens(text)

    def op_ocr(self, handle: str) -> list[dict[str, Any]]:
        """The text lines in a frame or contact-sheet observation."""
        from videvolve.media import ocr

        obs = self._handles.get(handle) if isinstance(handle, str) else None
        if obs is None or obs.kind not in ("frame", "sheet"):
            raise RequestRefused("invalid", "ocr reads one frame or contact-sheet observation of this task")
        pixels = obs.shape.shown_pixels if obs.shape is not None else 0
        if pixels > MAX_OCR_PIXELS:
            raise RequestRefused("invalid", f"OCR reads at most {MAX_OCR_PIXELS:,} pixels; this {obs.kind} is "
                                            f"{pixels:,}: read a smaller one (max_side, fewer cells or cell_width)")
        if self.meter.ocr_calls >= MAX_OCR_CALLS:
            raise RequestRefused("invalid", f"this task already made {MAX_OCR_CALLS} OCR requests (the cap)")
        if not ocr.available():
            raise RequestRefused("invalid", ocr.INSTALL_HINT)
        image, keys = self._image(obs)
        new = keys - self.meter.frame_keys
        budget = self.settings.budget
        if budget is not None and self.meter.frames + len(new) > budget:
            raise RequestRefused("budget", f"reading {len(new)} more frame(s) would exceed the budget of {budget} "
                                           f"(already used: {self.meter.frames})")
        lines = ocr.read_text(image)
        tokens = self.cost.image_tokens(*image.size)
        self.meter.frame_keys |= new
        self.meter.ocr_calls += 1
        self.meter.ocr_tokens += tokens
        self.meter.observed_times |= set(obs.times)
        self.trace.write(OcrRead(observed_times=sorted(obs.times), new_frames=len(new), ocr_tokens=tokens,
                                 text=[t.text for t in lines][:50]))
        return [t.to_dict() for t in lines]

    def _image(self, obs: Any) -> tuple[Image.Image, set[float]]:
        """The image OCR reads; a ``MediaError`` goes on to ``TaskServices.handle``, which takes out the path."""
        if obs.kind == "frame":
            frame = self.pictures.frames(obs.times, obs.max_side)[0]
            return frame.image, {frame.time}
        frames = self.pictures.frames(obs.times, obs.cell_width)
        return contact_sheet(frames, cols=obs.cols, cell_width=obs.cell_width).image, {f.time for f in frames}
