"""One record per benchmark: loading its annotations, writing its submission format, scoring with its rules."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from videvolve.errors import PredictionFormatError
from videvolve.metrics.intervals import to_seconds
from videvolve.tasks import Interval, Prediction, Task

Pair = tuple[Task, Prediction | None]


@dataclass(frozen=True)
class Benchmark:
    """A benchmark's three adapters."""

    name: str
    kind: str
    load: Callable[[Path, Path, Path | None], list[Task]]
    """(annotations, videos folder, optional extra file such as durations) -> tasks."""
    write: Callable[[Sequence[Pair], Path], Path]
    """(tasks with predictions, output folder) -> the submission file."""
    score: Callable[[Path, Path, dict[str, Any]], dict[str, Any]]
    """(ground truth in the benchmark's format, submission, options) -> metrics."""
    note: str = ""


REGISTRY: dict[str, Benchmark] = {}


def register(b: Benchmark) -> Benchmark:
    """Add a benchmark to the registry."""
    REGISTRY[b.name] = b
    return b


def letter(pred: Prediction | None) -> str:
    """The predicted option letter, or '' (unanswered)."""
    return pred.answer if pred is not None and isinstance(pred.answer, str) else ""


def intervals(pred: Prediction | None) -> list[list[float]]:
    """Predicted intervals as [[s, e], ...] ([] when none or unanswered)."""
    return [[i.start, i.end] for i in pred.answer] if pred is not None and isinstance(pred.answer, list) else []


def span(text: str) -> Interval:
    """'00:15-00:19' or 'hh:mm:ss' pairs to an interval."""
    a, b = text.split("-", 1)
    lo, hi = sorted((to_seconds(a.strip()), to_seconds(b.strip())))
    return Interval(start=lo, end=hi)


def write_json(path: Path, data: Any) -> Path:
    """Pretty JSON (a list or an object)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """JSON lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def by_key(records: Sequence[dict[str, Any]], key: str, path: Path) -> dict[str, dict[str, Any]]:
    """Index submission records by a key; a record without it is a format error naming the file."""
    out = {}
    for i, r in enumerate(records, start=1):
        if key not in r:
            raise PredictionFormatError(f"{path}: record {i} has no {key!r}")
        out[str(r[key])] = r
    return out
