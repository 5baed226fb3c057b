"""Your own data: a CSV (or JSONL) of questions about a folder of videos, turned into tasks.

Columns: ``video`` (a file in the videos folder), ``question``, ``answer``; optional ``options`` (separated by
``|``; present means multiple choice), ``kind`` (``mcq`` or ``grounding``), ``evidence``, ``id``. A grounding
answer is a list of intervals in seconds: ``12.5-20; 40-45``, ``[[12.5, 20], [40, 45]]`` or
``00:01:05-00:01:20``; ``none`` (or ``[]``) means the event never happens. Durations are probed from the videos.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from videvolve.errors import InputNotFoundError, MediaError, TaskFormatError, UsageError, describe, json_error
from videvolve.media import probe
from videvolve.metrics.intervals import to_seconds
from videvolve.tasks import LETTERS, Interval, Task

_ABSENT = {"", "none", "never", "[]", "absent", "no"}


def parse_intervals_cell(text: str) -> list[Interval]:
    """``12.5-20; 40-45`` / ``[[12.5, 20]]`` / ``00:01:05-00:01:20`` / ``none``."""
    s = text.strip()
    if s.lower() in _ABSENT:
        return []
    if s.startswith("["):
        return [Interval(start=a, end=b) for a, b in json.loads(s)]
    out = []
    for part in re.split(r"[;,]\s*", s):
        if not part.strip():
            continue
        m = re.fullmatch(r"\s*([\d:.]+)\s*(?:-|to|–)\s*([\d:.]+)\s*", part)
        if not m:
            raise UsageError(f"cannot read the interval {part!r} (write start-end in seconds or hh:mm:ss)")
        out.append(Interval(start=to_seconds(m.group(1)), end=to_seconds(m.group(2))))
    return out


def _rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    if path.suffix.lower() == ".jsonl":
        rows, problems = [], []
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((i, json.loads(line)))
            except json.JSONDecodeError as exc:
                problems.append(json_error(path, exc, i))
        if problems:
            raise TaskFormatError(path, problems)
        return rows
    with path.open(newline="", encoding="utf-8") as fh:
        return [(i, dict(row)) for i, row in enumerate(csv.DictReader(fh), start=2)]


def tasks_from_table(path: str | Path, videos_dir: str | Path, source: str = "custom") -> list[Task]:
    """Tasks from a CSV or JSONL file; every bad row is reported with the file and its line."""
    path, videos = Path(path), Path(videos_dir)
    if not path.is_file():
        raise InputNotFoundError(f"questions file not found: {path}")
    tasks, problems = [], []
    durations: dict[str, float] = {}
    counters: dict[str, int] = {}
    for line, row in _rows(path):
        try:
            video = videos / str(row["video"]).strip()
            if str(video) not in durations:
                durations[str(video)] = probe(video).duration
            stem = video.stem
            counters[stem] = counters.get(stem, 0) + 1
            options = row.get("options")
            options = [o.strip() for o in options.split("|")] if isinstance(options, str) and options.strip() \
                else options if isinstance(options, list) else None
            kind = (row.get("kind") or "").strip() or ("mcq" if options else "grounding")
            answer: Any = str(row["answer"]).strip() if kind == "mcq" else (
                row["answer"] if isinstance(row["answer"], list) else parse_intervals_cell(str(row["answer"])))
            if kind == "mcq" and options and answer not in LETTERS[: len(options)] and answer in options:
                answer = LETTERS[options.index(answer)]  # the option's text is accepted too
            evidence = row.get("evidence")
            tasks.append(Task(
                id=str(row.get("id") or f"{stem}-{counters[stem]:03d}"), video_id=stem, video=str(video.resolve()),
                kind=kind, question=str(row["question"]).strip(), options=options, answer=answer,
                duration=durations[str(video)], source=source,
                evidence=parse_intervals_cell(evidence) if isinstance(evidence, str) else evidence or [],
                meta={k: v for k, v in row.items() if k not in ("video", "question", "answer", "options", "kind",
                                                               "evidence", "id") and v not in (None, "")}))
        except KeyError as exc:
            problems.append(f"{path}:{line}: missing column {exc}")
        except ValidationError as exc:
            problems.append(f"{path}:{line}: {describe(exc)}")
        except (MediaError, ValueError, json.JSONDecodeError) as exc:
            problems.append(f"{path}:{line}: {str(exc).splitlines()[0]}")
    if problems:
        raise TaskFormatError(path, problems)
    return tasks
