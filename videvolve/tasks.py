"""Tasks, intervals and predictions; JSONL I/O with per-line errors; video-disjoint splits.

A task file is JSON Lines, one :class:`Task` per line. Intervals are written as ``[start, end]`` pairs in seconds.
Relative ``video`` paths are resolved against the directory of the tasks file.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import math
import os
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer, model_validator

from videvolve.atomic import write_text_atomic
from videvolve.errors import InputNotFoundError, StorageError, TaskFormatError, UsageError, describe, json_error

Kind = Literal["mcq", "grounding"]
LabelSource = Literal["gold", "needles", "perceived", "teacher"]
"""Where a task's answer came from: a person (gold), inserted needles, the model's own dense look, or a teacher."""
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
SPLITS = ("train", "selection", "test")
MIN_SELECTION = 50
"""Below this many selection questions one question moves accuracy by more than 2 points (eps = 1/n)."""


class Interval(BaseModel):
    """A closed time interval in seconds, ``start <= end``; serialised as ``[start, end]``."""

    model_config = ConfigDict(frozen=True)

    start: float = Field(ge=0, allow_inf_nan=False, description="start time in seconds")
    end: float = Field(ge=0, allow_inf_nan=False, description="end time in seconds")

    @model_validator(mode="before")
    @classmethod
    def _from_pair(cls, data: Any) -> Any:
        if isinstance(data, list | tuple):
            if len(data) != 2:
                raise ValueError(f"an interval is [start, end], got {list(data)!r}")
            return {"start": data[0], "end": data[1]}
        return data

    @model_validator(mode="after")
    def _ordered(self) -> Interval:
        if self.start > self.end:
            raise ValueError(f"interval start {self.start} is after its end {self.end}")
        return self

    @model_serializer
    def _as_pair(self) -> list[float]:
        return [self.start, self.end]

    @property
    def length(self) -> float:
        """Duration in seconds."""
        return self.end - self.start

    def pair(self) -> tuple[float, float]:
        """``(start, end)`` as a tuple."""
        return (self.start, self.end)


class TaskView(BaseModel):
    """What harness code receives: an allowlist. Never the answer, evidence, split, meta or video path."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: Kind
    question: str
    options: tuple[str, ...] | None = None
    duration: float


class Task(BaseModel):
    """One question about one video, with its gold answer."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, description="unique task id")
    video_id: str = Field(min_length=1, description="id of the video; splits never share one")
    video: str = Field(min_length=1, description="path of the video file (relative to the tasks file)")
    kind: Kind = Field(description="'mcq' (answer is a letter) or 'grounding' (answer is a list of intervals)")
    question: str = Field(min_length=1)
    options: list[str] | None = Field(default=None, description="mcq only: option texts, lettered A, B, ...")
    answer: str | list[Interval] = Field(description="mcq: a letter; grounding: [[start, end], ...], [] if absent")
    duration: float | None = Field(None, gt=0, allow_inf_nan=False, description="video duration in seconds "
                                   "(omitted: probed from the video before the task runs)")
    evidence: list[Interval] = Field(default_factory=list, description="optional: where the answer can be seen")
    split: str | None = Field(default=None, description="train | selection | test (or any name)")
    source: str = Field(default="custom", description="benchmark the task comes from")
    label_source: LabelSource = Field(default="gold", description="where the answer came from: gold, needles, "
                                      "perceived (the model's own dense look) or teacher (an expensive harness)")
    meta: dict[str, Any] = Field(default_factory=dict)
    transcript: str | None = Field(None, description="optional: a subtitle file (.srt, .vtt, or LongVideoBench's "
                                   ".json; relative to the tasks file); default: <video stem>.vtt/.srt beside it")
    transcript_offset: float = Field(0.0, description="seconds subtracted from every subtitle time (LongVideoBench's "
                                     "starting_timestamp_for_subtitles)")

    @model_validator(mode="after")
    def _kind_matches_answer(self) -> Task:
        if self.kind == "mcq":
            if not self.options or len(self.options) < 2:
                raise ValueError("an mcq task needs at least two options")
            if len(self.options) > len(LETTERS):
                raise ValueError(f"at most {len(LETTERS)} options")
            if not isinstance(self.answer, str):
                raise ValueError("an mcq answer is an option letter such as 'B'")
            letters = LETTERS[: len(self.options)]
            if self.answer not in letters:
                raise ValueError(f"answer {self.answer!r} is not one of the option letters {letters}")
        else:
            if self.options:
                raise ValueError("a grounding task has no options")
            if isinstance(self.answer, str):
                raise ValueError("a grounding answer is a list of [start, end] intervals ([] if absent)")
        return self

    def with_duration(self) -> Task:
        """The task, its duration probed from the video when the file did not give one."""
        if self.duration is not None:
            return self
        from videvolve.media import probe

        return self.model_copy(update={"duration": probe(self.video).duration})

    @property
    def intervals(self) -> list[Interval]:
        """Gold intervals of a grounding task (``[]`` when the target is absent)."""
        return self.answer if isinstance(self.answer, list) else []

    def view(self) -> TaskView:
        """The allowlisted view that harness code may see (the duration must be known: see ``with_duration``)."""
        if self.duration is None:
            raise UsageError(f"task {self.id}: the video's duration is unknown; probe {self.video} first")
        return TaskView(
            id=self.id,
            kind=self.kind,
            question=self.question,
            options=tuple(self.options) if self.options else None,
            duration=self.duration,
        )


class Prediction(BaseModel):
    """A harness's answer to one task; ``answer`` is None when no answer could be parsed."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    kind: Kind
    answer: str | list[Interval] | None = None
    raw: str = Field(default="", description="the model's final text, kept for the trace")
    evidence_times: list[float] = Field(default_factory=list, description="times the answer rests on")


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """A UTF-8 file's lines (with their ends) numbered from 1; a leading byte-order mark is skipped.

    Split at newlines only: a JSON string may hold U+2028 or U+0085 as they are. A line that is not UTF-8 raises
    :class:`TaskFormatError` naming it.
    """
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                yield lineno, raw.removeprefix(codecs.BOM_UTF8 if lineno == 1 else b"").decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TaskFormatError(path, [f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                                             f"byte {exc.start + 1} of the line): save the file as UTF-8"]) from None


def read_text(path: Path) -> str:
    """A UTF-8 file's text, as :func:`text_lines` reads it."""
    return "".join(line for _, line in text_lines(path))


def parse_json(text: str, path: Path, lineno: int | None = None) -> Any:
    """``json.loads``; bad syntax, or nesting too deep for Python, is a :class:`TaskFormatError` naming the line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskFormatError(path, [json_error(path, exc, lineno)]) from None
    except RecursionError:
        where = f"{path}:{lineno}" if lineno else str(path)
        raise TaskFormatError(path, [f"{where}: nested too deep to read (hundreds of levels of [ or {{)"]) from None


def _read_jsonl_records(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    records: list[tuple[int, dict[str, Any]]] = []
    problems: list[tuple[int, str]] = []
    for lineno, line in text_lines(path):
        if not line.strip():
            continue
        try:
            obj = parse_json(line, path, lineno)
        except TaskFormatError as exc:
            problems += [(lineno, p) for p in exc.problems]
            continue
        if not isinstance(obj, dict):
            problems.append((lineno, f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}"))
            continue
        records.append((lineno, obj))
    return records, problems


def read_tasks(path: str | Path) -> list[Task]:
    """Read a tasks JSONL file; raise :class:`TaskFormatError` listing the file and line of every bad record."""
    path = Path(path)
    if path.is_dir():
        raise InputNotFoundError(f"{path} is a folder: give the tasks file (.jsonl) inside it")
    if not path.is_file():
        raise InputNotFoundError(f"tasks file not found: {path}")
    records, problems = _read_jsonl_records(path)
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for lineno, obj in records:
        try:
            task = Task.model_validate(obj)
        except ValidationError as exc:
            problems.append((lineno, f"{path}:{lineno}: {describe(exc)}"))
            continue
        if task.id in seen:
            problems.append((lineno, f"{path}:{lineno}: duplicate task id {task.id!r} (first on line {seen[task.id]})"))
            continue
        seen[task.id] = lineno
        tasks.append(_resolved(task, path.parent))
    if problems:
        raise TaskFormatError(path, [msg for _, msg in sorted(problems)])
    return tasks


def _resolved(task: Task, base: Path) -> Task:
    """The task with its video and transcript paths resolved against the tasks file's folder."""
    update = {k: str((base / v).resolve()) for k, v in (("video", task.video), ("transcript", task.transcript))
              if v and not Path(v).is_absolute()}
    return task.model_copy(update=update) if update else task


def write_tasks(tasks: Iterable[Task], path: str | Path) -> Path:
    """Write tasks as JSONL; video paths under the file's directory are written relative to it."""
    path = Path(path)
    base = path.parent.resolve()
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)
        _write_lines(tasks, tmp, base)
        tmp.replace(path)
    except OSError as exc:  # a full disk: the former file stays as it was
        with contextlib.suppress(OSError):  # a file where a folder should be: nothing was made
            tmp.unlink(missing_ok=True)
        raise StorageError.writing("the tasks file", path, exc) from exc
    return path


def _write_lines(tasks: Iterable[Task], tmp: Path, base: Path) -> None:
    # 0600: the answers are in here, and harness code under a weak sandbox may run as another local user
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as fh:
        for task in tasks:
            data = task.model_dump(mode="json")
            for key in ("video", "transcript"):
                file = Path(data[key]) if data.get(key) else None
                if file is not None and file.is_absolute() and file.resolve().is_relative_to(base):
                    data[key] = str(file.resolve().relative_to(base))
            if data.get("transcript") is None:  # files without transcripts stay as they were
                data.pop("transcript", None)
                data.pop("transcript_offset", None)
            if data.get("label_source") == "gold":  # gold files stay as they were
                data.pop("label_source")
            fh.write(json.dumps(data, ensure_ascii=False) + "\n")


def read_predictions(path: str | Path) -> list[Prediction]:
    """Read a predictions JSONL file (one :class:`Prediction` per line)."""
    path = Path(path)
    records, problems = _read_jsonl_records(path)
    preds = []
    for lineno, obj in records:
        try:
            preds.append(Prediction.model_validate(obj))
        except ValidationError as exc:
            problems.append((lineno, f"{path}:{lineno}: {describe(exc)}"))
    if problems:
        raise TaskFormatError(path, [msg for _, msg in sorted(problems)])
    return preds


def write_predictions(preds: Iterable[Prediction], path: str | Path) -> Path:
    """Write predictions as JSONL."""
    path = Path(path)
    write_text_atomic(path, "".join(p.model_dump_json() + "\n" for p in preds), "the predictions")
    return path


def parse_fractions(text: str) -> dict[str, float]:
    """Parse ``train=0.6,selection=0.2,test=0.2`` (or ``0.6,0.2,0.2`` for the three standard splits)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    out: dict[str, float] = {}
    for i, part in enumerate(parts):
        if "=" in part:
            name, value = part.split("=", 1)
        elif i < len(SPLITS) and len(parts) == len(SPLITS):
            name, value = SPLITS[i], part
        else:
            raise UsageError(f"cannot read fraction {part!r}: use name=value, e.g. train=0.6,selection=0.2,test=0.2")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise UsageError(f"cannot read fraction {part!r}: the share must be a number, e.g. train=0.7") from None
    if not all(math.isfinite(v) and v >= 0 for v in out.values()) or sum(out.values()) <= 0:
        raise UsageError(f"fractions must be finite, non-negative and not all zero: {text!r}")
    return out


def split_by_video(tasks: Sequence[Task], fractions: Mapping[str, float], seed: int = 0) -> list[Task]:
    """Assign each task a split so that no video appears in two splits (its video's, :func:`video_splits`)."""
    assignment = video_splits({t.video_id for t in tasks}, fractions, seed)
    return [t.model_copy(update={"split": assignment[t.video_id]}) for t in tasks]


def video_splits(video_ids: Iterable[str], fractions: Mapping[str, float], seed: int = 0) -> dict[str, str]:
    """Each video's split.

    Videos are shuffled with ``seed`` and dealt to splits by largest remainder on the fractions; every split with a
    positive fraction gets at least one video when there are enough videos.
    """
    if not fractions:
        raise UsageError("no split fractions given")
    total = sum(fractions.values())
    names = list(fractions)
    videos = sorted(set(video_ids))
    random.Random(seed).shuffle(videos)
    n = len(videos)
    quotas = {k: fractions[k] / total * n for k in names}
    counts = {k: int(q) for k, q in quotas.items()}
    for k in sorted(names, key=lambda k: quotas[k] - counts[k], reverse=True)[: n - sum(counts.values())]:
        counts[k] += 1
    for k in names:  # make sure no positive split is empty if another can spare a video
        if fractions[k] > 0 and counts[k] == 0:
            donor = max(names, key=lambda d: counts[d])
            if counts[donor] > 1:
                counts[donor] -= 1
                counts[k] += 1
    return dict(zip(videos, [k for k in names for _ in range(counts[k])], strict=True))


def check_video_disjoint(tasks: Iterable[Task]) -> list[str]:
    """Return the ids of videos that appear in more than one split (empty when the splits are disjoint)."""
    splits_of: dict[str, set[str]] = defaultdict(set)
    for t in tasks:
        splits_of[t.video_id].add(t.split or "")
    return sorted(v for v, s in splits_of.items() if len(s) > 1)


def selection_warning(n_selection: int, minimum: int = MIN_SELECTION) -> str | None:
    """A warning when the selection set is too small for the gate to tell a one-question change from noise."""
    if n_selection == 0:
        return "no selection split: `evolve` needs one for its gate"
    if n_selection < minimum:
        eps = 1 / n_selection
        return (
            f"the selection split has only {n_selection} questions: one question moves its score by "
            f"eps = 1/{n_selection} = {eps:.3f}, so the gate cannot tell a one-question change from noise; "
            f"aim for at least {minimum}"
        )
    return None


def selection_size(tasks: Sequence[Task]) -> tuple[int, int]:
    """How many selection questions there are, and from how many videos."""
    selection = [t for t in tasks if t.split == "selection"]
    return len(selection), len({t.video_id for t in selection})


def summarize(tasks: Sequence[Task]) -> dict[str, Any]:
    """Counts per split and kind, number of videos, and the mcq letter distribution."""
    by_split: dict[str, Counter[str]] = defaultdict(Counter)
    for t in tasks:
        by_split[t.split or "-"][t.kind] += 1
    letters = Counter(t.answer for t in tasks if t.kind == "mcq" and isinstance(t.answer, str))
    return {
        "tasks": len(tasks),
        "videos": len({t.video_id for t in tasks}),
        "by_split": {s: dict(c) for s, c in sorted(by_split.items())},
        "videos_by_split": {
            s: len({t.video_id for t in tasks if (t.split or "-") == s}) for s in sorted(by_split)
        },
        "mcq_letters": dict(sorted(letters.items())),
        "absent_targets": sum(1 for t in tasks if t.kind == "grounding" and not t.intervals),
    }
