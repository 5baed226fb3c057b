"""Helpers of the benchmark loaders (``videvolve.datasets.benchmarks``): reading records, finding videos.

Loaders return tasks whose ``video`` is the file for the video id in ``videos_dir`` (any common extension; ``.mp4``
is assumed when no file is there yet) and whose ``meta`` keeps the benchmark's own ids and attributes, so
predictions can be written back in the benchmark's submission format.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from videvolve.errors import InputNotFoundError, TaskFormatError, describe
from videvolve.tasks import Task, parse_json, read_text

VIDEO_EXTENSIONS = (".mp4", ".mkv", ".webm", ".mov", ".avi", ".m4v")


def read_json_records(path: str | Path) -> list[dict[str, Any]]:
    """A JSON list, or JSON Lines; errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise InputNotFoundError(f"annotation file not found: {path}")
    text = read_text(path)
    try:  # a JSON array, a single object, or one line of JSON Lines
        whole = parse_json(text, path)
    except TaskFormatError:
        if text.lstrip().startswith("["):
            raise
    else:
        data = whole if isinstance(whole, list) else [whole]
        if not all(isinstance(x, dict) for x in data):
            raise TaskFormatError(path, [f"{path}: expected JSON objects (a list, or one per line)"])
        return data
    records, problems = [], []
    for lineno, line in enumerate(text.split("\n"), start=1):  # not splitlines(): a string may hold U+2028
        if not line.strip():
            continue
        try:
            obj = parse_json(line, path, lineno)
        except TaskFormatError as exc:
            problems += exc.problems
            continue
        if not isinstance(obj, dict):
            problems.append(f"{path}:{lineno}: expected a JSON object")
            continue
        records.append(obj)
    if problems:
        raise TaskFormatError(path, problems)
    return records


def find_video(videos_dir: Path, video_id: str) -> Path:
    """The file of a video id in a folder, whatever its extension; ``<id>.mp4`` if none exists yet."""
    for ext in VIDEO_EXTENSIONS:
        candidate = videos_dir / f"{video_id}{ext}"
        if candidate.is_file():
            return candidate.resolve()
    return (videos_dir / f"{video_id}.mp4").resolve()


def build_tasks(path: Path, records: list[dict[str, Any]],
                make: Callable[[dict[str, Any]], dict[str, Any]]) -> list[Task]:
    """Tasks from annotation records; every bad record is reported with the file and its number."""
    tasks, problems = [], []
    for i, rec in enumerate(records, start=1):
        try:
            tasks.append(Task.model_validate(make(rec)))
        except (KeyError, TypeError, ValueError, ValidationError) as exc:
            what = f"missing field {exc}" if isinstance(exc, KeyError) else \
                describe(exc) if isinstance(exc, ValidationError) else str(exc).splitlines()[0]
            problems.append(f"{path}: record {i}: {what}")
    if problems:
        raise TaskFormatError(path, problems)
    return tasks



def find_subtitles(annotations: Path, videos_dir: Path, names: list[str]) -> str | None:
    """A benchmark's own subtitle file, by name, in its usual folders (None when absent).

    ``subtitle/`` or ``subtitles/`` beside the videos folder, inside it, or beside the annotation file (Video-MME
    unpacks ``subtitle.zip`` into ``subtitle/``, LongVideoBench ships ``subtitles/``), then the videos folder.
    """
    folders = [d / sub for d in (videos_dir.parent, videos_dir, annotations.parent)
               for sub in ("subtitle", "subtitles")]
    for name in names:
        for folder in [*folders, videos_dir]:
            candidate = folder / name
            if name and candidate.is_file():
                return str(candidate.resolve())
    return None
