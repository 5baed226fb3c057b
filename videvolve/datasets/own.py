"""Your own data: a CSV (or JSONL) of questions about a folder of videos, turned into tasks.

Columns: ``video`` (a file in the videos folder), ``question``, ``answer``; optional ``options`` (separated by
``|``; present means multiple choice), ``kind`` (``mcq`` or ``grounding``), ``evidence``, ``id``. A grounding
answer is a list of intervals in seconds: ``12.5-20; 40-45``, ``[[12.5, 20], [40, 45]]`` or
``00:01:05-00:01:20``; ``none`` (or ``[]``) means the event never happens. Durations are probed from the videos.
A row without an answer (no column, or an empty cell) is a :class:`Question` for a teacher
(``videvolve.labelfree.teacher``), never a task.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from videvolve.errors import InputNotFoundError, MediaError, TaskFormatError, UsageError, describe
from videvolve.media import probe
from videvolve.metrics.intervals import to_seconds
from videvolve.tasks import LETTERS, Interval, Kind, LabelSource, Task, parse_json, read_text, text_lines

_ABSENT = {"", "none", "never", "[]", "absent", "no"}
END_SLACK = 2.0
"""Seconds an interval may end after its video's probed duration unremarked (frame rounding), as `tasks validate`."""


def parse_intervals_cell(text: str) -> list[Interval]:
    """``12.5-20; 40-45`` / ``[[12.5, 20]]`` / ``00:01:05-00:01:20`` / ``none``."""
    s = text.strip()
    if s.lower() in _ABSENT:
        return []
    if s.startswith("["):
        try:
            pairs = json.loads(s)
        except (json.JSONDecodeError, RecursionError):
            pairs = None
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise UsageError(f"cannot read the intervals {s[:60]!r} (write [[start, end], ...] in seconds)")
        return [Interval.model_validate(p) for p in pairs]
    out = []
    for part in re.split(r"[;,]\s*", s):
        if not part.strip():
            continue
        m = re.fullmatch(r"\s*([\d:.]+)\s*(?:-|to|–)\s*([\d:.]+)\s*", part)
        if not m:
            raise UsageError(f"cannot read the interval {part!r} (write start-end in seconds or hh:mm:ss)")
        out.append(Interval(start=to_seconds(m.group(1)), end=to_seconds(m.group(2))))
    return out


def _rows(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    """The file's rows by line, and the lines that are not rows (not JSON objects, not CSV of the header's width)."""
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[tuple[int, str]] = []
    if path.suffix.lower() == ".jsonl":
        for i, line in text_lines(path):
            if not line.strip():
                continue
            try:
                row = parse_json(line, path, i)
            except TaskFormatError as exc:
                problems += [(i, p) for p in exc.problems]
                continue
            if isinstance(row, dict):
                rows.append((i, row))
            else:
                problems.append((i, f"{path}:{i}: expected a JSON object, got {type(row).__name__}"))
    else:
        reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
        try:
            for row in reader:  # line_num: the row's last line (a quoted cell may span lines; blank lines skipped)
                if None in row:
                    problems.append((reader.line_num, f"{path}:{reader.line_num}: {len(row) - 1 + len(row[None])} "
                                     f"cells, but the header names {len(reader.fieldnames or [])} columns (quote a "
                                     "cell that holds a comma)"))
                else:
                    rows.append((reader.line_num, dict(row)))
        except csv.Error as exc:
            problems.append((reader.line_num, f"{path}:{reader.line_num}: cannot read this row as CSV ({exc})"))
    return rows, problems


def _cell(row: dict[str, Any], name: str) -> Any:
    """A required cell; a CSV row shorter than its header has None there."""
    value = row[name]
    if value is None:
        raise ValueError(f"no {name!r} (the row has fewer cells than the header)")
    return value


class Question(BaseModel):
    """A row without an answer: everything a task has but its label, which a teacher must supply.

    Not a :class:`Task`, so an unanswered question can never be written, scored or gated as if it had a gold answer;
    :meth:`answered` makes the task once an answer exists.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    line: int = Field(description="the row's line in the questions file")
    id: str = Field(min_length=1)
    video_id: str = Field(min_length=1)
    video: str = Field(min_length=1)
    kind: Kind
    question: str = Field(min_length=1)
    options: list[str] | None = None
    duration: float | None = Field(None, gt=0)
    evidence: list[Interval] = Field(default_factory=list)
    source: str = "custom"
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _kind_matches_options(self) -> Question:
        if self.kind == "mcq" and (not self.options or len(self.options) < 2):
            raise ValueError("an mcq question needs at least two options")
        if self.kind == "grounding" and self.options:
            raise ValueError("a grounding question has no options")
        return self

    def answered(self, answer: str | list[Interval], label_source: LabelSource,
                 meta: dict[str, Any] | None = None) -> Task:
        """The task this question becomes with ``answer`` (validated as any task's answer is)."""
        return Task(id=self.id, video_id=self.video_id, video=self.video, kind=self.kind, question=self.question,
                    options=self.options, answer=answer, duration=self.duration, evidence=self.evidence,
                    source=self.source, label_source=label_source, meta={**self.meta, **(meta or {})})


@dataclass(frozen=True)
class QuestionTable:
    """A questions file read: the rows a person answered (gold tasks) and the rows still without an answer."""

    path: Path
    tasks: list[Task]
    unanswered: list[Question]
    late: list[str] = field(default_factory=list)
    """Rows with an answer or evidence interval that ends after their video does, each as ``line N (id): times``."""


def _answer_cell(row: dict[str, Any]) -> Any:
    """The row's answer, or None when it has none (no column, or an empty cell: ``none`` means absent)."""
    value = row.get("answer")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return value


def read_questions(path: str | Path, videos_dir: str | Path, source: str = "custom") -> QuestionTable:
    """A CSV or JSONL file of questions; every bad row is reported with the file and its line.

    A row without an answer (no ``answer`` column, or an empty cell) is a :class:`Question`, for a teacher to answer;
    a grounding question that never happens is answered ``none``.
    """
    path, videos = Path(path), Path(videos_dir)
    if not path.is_file():
        raise InputNotFoundError(f"questions file not found: {path}")
    tasks: list[Task] = []
    unanswered: list[Question] = []
    rows, problems = _rows(path)
    if problems:  # the file's form first: nothing is probed in a file that is not a table
        raise TaskFormatError(path, [msg for _, msg in problems])
    durations: dict[str, float] = {}
    late: list[str] = []
    counters: dict[str, int] = {}
    first_line: dict[str, int] = {}
    for line, row in rows:
        try:
            video = videos / str(_cell(row, "video")).strip()
            if str(video) not in durations:
                durations[str(video)] = probe(video).duration
            stem = video.stem
            counters[stem] = counters.get(stem, 0) + 1
            options = row.get("options")
            options = [o.strip() for o in options.split("|")] if isinstance(options, str) and options.strip() \
                else options if isinstance(options, list) else None
            kind = str(row.get("kind") or "").strip() or ("mcq" if options else "grounding")
            evidence = row.get("evidence")
            question = Question(
                line=line, id=str(row.get("id") or f"{stem}-{counters[stem]:03d}"), video_id=stem,
                video=str(video.resolve()), kind=kind, question=str(_cell(row, "question")).strip(), options=options,
                duration=durations[str(video)], source=source,
                evidence=parse_intervals_cell(evidence) if isinstance(evidence, str) else evidence or [],
                meta={k: v for k, v in row.items() if k not in ("video", "question", "answer", "options", "kind",
                                                               "evidence", "id") and v not in (None, "")})
            if question.id in first_line:
                problems.append((line, f"{path}:{line}: duplicate id {question.id!r} (first on line "
                                       f"{first_line[question.id]}): give each question its own id"))
                continue
            first_line[question.id] = line
            cell = _answer_cell(row)
            if cell is None:
                unanswered.append(question)
                late += _ends_late(question, [])
                continue
            answer: Any = str(cell).strip() if kind == "mcq" else (
                cell if isinstance(cell, list) else parse_intervals_cell(str(cell)))
            if kind == "mcq" and options and answer not in LETTERS[: len(options)] and answer in options:
                answer = LETTERS[options.index(answer)]  # the option's text is accepted too
            tasks.append(question.answered(answer, "gold"))
            late += _ends_late(question, tasks[-1].intervals)
        except KeyError as exc:
            problems.append((line, f"{path}:{line}: missing column {exc}"))
        except ValidationError as exc:
            problems.append((line, f"{path}:{line}: {describe(exc)}"))
        except (MediaError, ValueError) as exc:
            problems.append((line, f"{path}:{line}: {str(exc).splitlines()[0]}"))
    if problems:
        raise TaskFormatError(path, [msg for _, msg in sorted(problems)])
    return QuestionTable(path, tasks, unanswered, late)


def _ends_late(question: Question, answer: list[Interval]) -> list[str]:
    """``line N (id): 812.5-815 s`` when an interval of the row's answer or evidence ends after its video does."""
    past = [i for i in [*answer, *question.evidence]
            if question.duration is not None and i.end > question.duration + END_SLACK]
    times = ", ".join(f"{i.start:g}-{i.end:g} s" for i in past)
    return [f"line {question.line} ({question.id}): {times}, on a video of {question.duration:.1f} s"] if past else []


def unanswered_error(table: QuestionTable) -> UsageError:
    """What to do about questions without answers when no teacher was asked for."""
    lines = ", ".join(str(q.line) for q in table.unanswered[:8]) + (", ..." if len(table.unanswered) > 8 else "")
    return UsageError(f"{table.path}: {len(table.unanswered)} question(s) have no answer (line(s) {lines}): add "
                      "`--teacher scan_refine` to have a harness answer them (their label_source is then 'teacher'), "
                      "or fill in their answers (a grounding question whose event never happens: `none`)")


def tasks_from_table(path: str | Path, videos_dir: str | Path, source: str = "custom") -> list[Task]:
    """Tasks from a CSV or JSONL file where every row has its answer (see :func:`read_questions`)."""
    table = read_questions(path, videos_dir, source)
    if table.unanswered:
        raise unanswered_error(table)
    return table.tasks
