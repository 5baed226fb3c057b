"""Loaders from benchmark annotation files to tasks: VUE-TR, VUE-TR-V2, QVHighlights.

Each returns tasks whose ``video`` is the file for the video id in ``videos_dir`` (any common extension; ``.mp4``
is assumed when no file is there yet) and whose ``meta`` keeps the benchmark's own ids and attributes, so
predictions can be written back in the benchmark's submission format.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from videvolve.errors import TaskFormatError
from videvolve.tasks import Interval, Task

VIDEO_EXTENSIONS = (".mp4", ".mkv", ".webm", ".mov", ".avi", ".m4v")


def read_json_records(path: str | Path) -> list[dict[str, Any]]:
    """A JSON list, or JSON Lines; errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"annotation file not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:  # a JSON array, a single object, or one line of JSON Lines
        whole = json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip().startswith("["):
            raise TaskFormatError(path, [f"{path}:{exc.lineno}: not JSON ({exc.msg})"]) from exc
    else:
        data = whole if isinstance(whole, list) else [whole]
        if not all(isinstance(x, dict) for x in data):
            raise TaskFormatError(path, [f"{path}: expected JSON objects (a list, or one per line)"])
        return data
    records, problems = [], []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{lineno}: not JSON ({exc.msg})")
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


def _build(path: Path, records: list[dict[str, Any]], make: Callable[[dict[str, Any]], dict[str, Any]]) -> list[Task]:
    tasks, problems = [], []
    for i, rec in enumerate(records, start=1):
        try:
            tasks.append(Task.model_validate(make(rec)))
        except (KeyError, TypeError, ValueError, ValidationError) as exc:
            what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
            problems.append(f"{path}: record {i}: {what}")
    if problems:
        raise TaskFormatError(path, problems)
    return tasks


def load_vue_tr(path: str | Path, videos_dir: str | Path, version: int = 1) -> list[Task]:
    """VUE-TR (``version=1``) or VUE-TR-V2 ground truth.

    The file is a JSON list of ``query_id, video_id, duration, query, gt, ...`` records.
    """
    path, videos = Path(path), Path(videos_dir)
    source = "vue-tr" if version == 1 else "vue-tr-v2"

    def make(r: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"{source}-{r['query_id']}", "video_id": str(r["video_id"]),
            "video": str(find_video(videos, str(r["video_id"]))), "kind": "grounding", "question": r["query"],
            "answer": [Interval(start=s, end=e) for s, e in r["gt"]], "duration": r["duration"], "source": source,
            "meta": {"query_id": r["query_id"],
                     **{k: r[k] for k in ("duration_category", "query_format", "query_modality") if k in r}},
        }

    return _build(path, read_json_records(path), make)


def load_qvhighlights(path: str | Path, videos_dir: str | Path) -> list[Task]:
    """QVHighlights ``highlight_*_release.jsonl`` (``qid, query, duration, vid, relevant_windows, ...``)."""
    path, videos = Path(path), Path(videos_dir)

    def make(r: dict[str, Any]) -> dict[str, Any]:
        if "relevant_windows" not in r:
            raise ValueError("no relevant_windows (a test file without ground truth cannot become tasks)")
        return {
            "id": f"qvhighlights-{r['qid']}", "video_id": str(r["vid"]), "video": str(find_video(videos, r["vid"])),
            "kind": "grounding", "question": r["query"],
            "answer": [Interval(start=s, end=e) for s, e in r["relevant_windows"]],
            "duration": r["duration"], "source": "qvhighlights",
            "meta": {"qid": r["qid"], "vid": r["vid"],
                     **{k: r[k] for k in ("relevant_clip_ids", "saliency_scores") if k in r}},
        }

    return _build(path, read_json_records(path), make)


LOADERS: dict[str, Callable[[Path, Path], list[Task]]] = {
    "vue-tr": lambda p, v: load_vue_tr(p, v, 1),
    "vue-tr-v2": lambda p, v: load_vue_tr(p, v, 2),
    "qvhighlights": load_qvhighlights,
}


def import_benchmark(benchmark: str, annotations: str | Path, videos_dir: str | Path) -> list[Task]:
    """Tasks from a benchmark's annotation file (see ``LOADERS`` for the names)."""
    if benchmark not in LOADERS:
        raise ValueError(f"no loader for {benchmark!r}; available: {', '.join(LOADERS)}")
    return LOADERS[benchmark](Path(annotations), Path(videos_dir))
