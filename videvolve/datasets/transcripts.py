"""Transcripts: timed text segments from subtitle files (``.srt``, ``.vtt``, LongVideoBench's JSON).

Where a task's transcript comes from, first found wins: the task's ``transcript`` field (a benchmark importer sets
it), a subtitle file beside the video with the same stem (``match.vtt`` or ``match.srt`` for ``match.mp4``), or the
cache that ``videvolve videos transcribe --cache`` writes, keyed by the video's content fingerprint.
A malformed file raises :class:`TranscriptFormatError` naming the file and the line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from videvolve.config import cache_home
from videvolve.errors import TaskFormatError
from videvolve.tasks import Task

SUBTITLE_EXTENSIONS = (".vtt", ".srt")
TOLERANCE_S = 1.0
"""A segment may end this much past the video's duration (subtitle files round their times)."""
_TIME = r"(?:(\d+):)?(\d{1,2}):(\d{2})[,.](\d{1,3})"
_CUE = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}(?:\s+.*)?$")
_TAG = re.compile(r"<[^>]*>")


class TranscriptFormatError(TaskFormatError):
    """A subtitle file that cannot be read; its problems name the file and line."""


class Segment(BaseModel):
    """One timed piece of text, in seconds of the video."""

    model_config = ConfigDict(frozen=True)

    start: float = Field(description="start time in seconds")
    end: float = Field(description="end time in seconds")
    text: str
    line: int = Field(0, description="line of the subtitle file where the segment starts (0: not from a file)")


class Transcript(BaseModel):
    """The segments of one video's speech or subtitles, in time order."""

    source: str = Field("", description="the file it was read from")
    segments: list[Segment] = Field(default_factory=list)

    def window(self, start: float = 0.0, end: float | None = None) -> list[Segment]:
        """The segments that overlap ``[start, end]`` (whole segments; ``end=None``: to the end)."""
        hi = float("inf") if end is None else end
        return [s for s in self.segments if s.end >= start and s.start <= hi]

    def search(self, text: str) -> list[Segment]:
        """The segments whose text contains ``text`` (case-folded, whitespace and punctuation normalised)."""
        needle = normalise(text)
        if not needle:
            return []
        return [s for s in self.segments if needle in normalise(s.text)]


def normalise(text: str) -> str:
    """Case-folded words separated by single spaces (punctuation dropped), for plain text matching."""
    return " ".join(re.findall(r"\w+", text.casefold()))


def render(segments: Sequence[Segment]) -> str:
    """Segments as prompt text: one ``[start-end s] text`` line each (:func:`videvolve.media.captions.said_caption`)."""
    from videvolve.media.captions import said_caption

    return "\n".join(said_caption(s.start, s.end, s.text) for s in segments)


def _seconds(groups: Sequence[str | None]) -> float:
    h, m, s, ms = groups
    return int(h or 0) * 3600 + int(m or 0) * 60 + int(s or 0) + int((ms or "0").ljust(3, "0")) / 1000


def parse_subtitles(path: str | Path, offset: float = 0.0) -> Transcript:
    """Read an ``.srt`` or ``.vtt`` file (or LongVideoBench's ``.json``); ``offset`` is subtracted from every time."""
    path = Path(path)
    if not path.is_file():
        raise TranscriptFormatError(path, [f"{path}: transcript file not found"])
    if path.suffix.lower() == ".json":
        return _parse_lvb_json(path, offset)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise TranscriptFormatError(path, [f"{path}: not UTF-8 text ({exc.reason})"]) from None
    vtt = path.suffix.lower() == ".vtt"
    if vtt and (not lines or not lines[0].startswith("WEBVTT")):
        raise TranscriptFormatError(path, [f"{path}:1: a WebVTT file starts with 'WEBVTT'"])
    return Transcript(source=str(path), segments=_cues(path, lines, vtt, offset))


def _cues(path: Path, lines: list[str], vtt: bool, offset: float) -> list[Segment]:
    segments: list[Segment] = []
    problems: list[str] = []
    i = 0
    while vtt and i < len(lines) and lines[i].strip():  # the WEBVTT header block (Kind:, Language: ...)
        i += 1
    while i < len(lines):
        block_start = i
        block: list[str] = []
        while i < len(lines) and lines[i].strip():
            block.append(lines[i])
            i += 1
        i += 1
        if not block or (vtt and block[0].split(" ", 1)[0] in ("NOTE", "STYLE", "REGION")):
            continue
        timing = next((k for k, text in enumerate(block[:2]) if "-->" in text), None)
        if timing is None:
            what = "a cue needs a timing line 'HH:MM:SS,mmm --> HH:MM:SS,mmm'"
            problems.append(f"{path}:{block_start + 1}: {what}, got {block[0][:60]!r}")
            continue
        lineno = block_start + timing + 1
        m = _CUE.match(block[timing])
        if m is None:
            problems.append(f"{path}:{lineno}: cannot read the timing {block[timing].strip()[:60]!r}")
            continue
        start, end = _seconds(m.groups()[:4]) - offset, _seconds(m.groups()[4:]) - offset
        if end < start:
            problems.append(f"{path}:{lineno}: the cue ends ({end:.3f} s) before it starts ({start:.3f} s)")
            continue
        text = " ".join(_TAG.sub("", t).strip() for t in block[timing + 1:]).strip()
        if text:
            segments.append(Segment(start=start, end=end, text=text, line=lineno))
    if problems:
        raise TranscriptFormatError(path, problems)
    return sorted(segments, key=lambda s: (s.start, s.end))


def _parse_lvb_json(path: Path, offset: float) -> Transcript:
    """LongVideoBench's records: ``{"start": "HH:MM:SS.mmm", "end": ..., "line"}`` or ``{"timestamp": [s, e], "text"}``.

    An open end (``null``) becomes the segment's start.
    """
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TranscriptFormatError(path, [f"{path}:{getattr(exc, 'lineno', 1)}: not JSON ({exc})"]) from None
    except RecursionError:
        raise TranscriptFormatError(path, [f"{path}: nested too deep to read (hundreds of levels of [ or {{)"]) \
            from None
    if not isinstance(records, list):
        raise TranscriptFormatError(path, [f"{path}: expected a list of subtitle records"])
    segments, problems = [], []
    for k, r in enumerate(records, start=1):
        try:
            if "timestamp" in r:
                start, end = (float(t) if t is not None else None for t in r["timestamp"])
                text = str(r["text"])
                end = start if end is None else end
            else:
                start, end = (_clock(r["start"]), _clock(r["end"]))
                text = str(r["line"])
            assert start is not None and end is not None
            segments.append(Segment(start=start - offset, end=end - offset, text=text.strip(), line=k))
        except (KeyError, TypeError, ValueError, AssertionError) as exc:
            problems.append(f"{path}: record {k}: cannot read a subtitle from it ({type(exc).__name__}: {exc})")
    if problems:
        raise TranscriptFormatError(path, problems)
    return Transcript(source=str(path), segments=sorted((s for s in segments if s.text), key=lambda s: s.start))


def _clock(text: str) -> float:
    parts = [float(p) for p in str(text).split(":")]
    return sum(p * 60 ** k for k, p in enumerate(reversed(parts)))


def to_vtt(segments: Sequence[Segment]) -> str:
    """WebVTT text of segments."""
    def stamp(t: float) -> str:
        ms = round(max(t, 0.0) * 1000)
        return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"
    cues = [f"{stamp(s.start)} --> {stamp(s.end)}\n{s.text}" for s in segments]
    return "WEBVTT\n\n" + "\n\n".join(cues) + ("\n" if cues else "")


def default_transcript_cache() -> Path:
    """``~/.cache/videvolve/transcripts`` (``videos transcribe --cache`` writes there)."""
    return cache_home() / "transcripts"


def cached_transcript_path(video: str | Path, cache_dir: Path | None = None) -> Path:
    """Where the cached transcript of a video lives, keyed by its content fingerprint."""
    from videvolve.media.fingerprint import fingerprint

    return (cache_dir or default_transcript_cache()) / f"{fingerprint(video)}.vtt"


def find_transcript(task: Task, cache_dir: Path | None = None) -> tuple[Path, float] | None:
    """The file holding a task's transcript and the offset to subtract, or None."""
    if task.transcript:
        return Path(task.transcript), task.transcript_offset
    return _beside_or_cached(Path(task.video), cache_dir)


def _beside_or_cached(video: Path, cache_dir: Path | None) -> tuple[Path, float] | None:
    for ext in SUBTITLE_EXTENSIONS:
        beside = video.with_suffix(ext)
        if beside.is_file():
            return beside, 0.0
    if video.is_file() and (cache_dir or default_transcript_cache()).is_dir():  # fingerprint only if a cache exists
        cached = cached_transcript_path(video, cache_dir)
        if cached.is_file():
            return cached, 0.0
    return None


def load_transcript(task: Task | str | Path, cache_dir: Path | None = None) -> Transcript | None:
    """A task's transcript (or a video file's: beside it or cached), or None when it has none."""
    found = find_transcript(task, cache_dir) if isinstance(task, Task) else _beside_or_cached(Path(task), cache_dir)
    if found is None:
        return None
    path, offset = found
    st = path.stat() if path.is_file() else None
    return _load(str(path), offset, st.st_mtime_ns if st else 0, st.st_size if st else 0)


@lru_cache(maxsize=64)
def _load(path: str, offset: float, mtime_ns: int, size: int) -> Transcript:
    return parse_subtitles(path, offset)


def check_transcripts(tasks: Sequence[Task]) -> list[str]:
    """'file:line: reason' for every transcript that does not parse or falls outside its video."""
    problems: list[str] = []
    seen: set[tuple[str, float, float | None]] = set()
    for task in tasks:
        found = find_transcript(task)
        if found is None:
            continue
        path, offset = found
        key = (str(path), offset, task.duration)
        if key in seen:
            continue
        seen.add(key)
        try:
            transcript = load_transcript(task)
        except TaskFormatError as exc:
            problems += exc.problems
            continue
        assert transcript is not None
        problems += _outside(task, path, transcript)
    return problems


def _outside(task: Task, path: Path, transcript: Transcript) -> list[str]:
    duration = task.duration
    if duration is None and Path(task.video).is_file():
        from videvolve.media import probe

        duration = probe(task.video).duration
    out = []
    for s in transcript.segments:
        if s.start < -TOLERANCE_S or (duration is not None and s.end > duration + TOLERANCE_S):
            span = f"{s.start:.2f}-{s.end:.2f} s"
            limit = f"0-{duration:.2f} s" if duration is not None else "times >= 0"
            out.append(f"{path}:{s.line}: segment {span} falls outside the video {task.video} ({limit})")
            break
    return out
