"""Predictions in each benchmark's own submission format, so its official script (and `videvolve score`) reads them.

Our own ``predictions.jsonl`` is always written too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from videvolve.tasks import Prediction, Task, write_predictions


def write_submissions(tasks: Sequence[Task], preds: Sequence[Prediction | None], out_dir: Path) -> list[Path]:
    """Write ``predictions.jsonl`` and, per benchmark present, its submission file; returns the paths."""
    from videvolve.datasets.benchmarks import REGISTRY

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [write_predictions([p for p in preds if p is not None], out_dir / "predictions.jsonl")]
    by_source: dict[str, list[tuple[Task, Prediction | None]]] = defaultdict(list)
    for t, p in zip(tasks, preds, strict=True):
        by_source[t.source].append((t, p))
    for source, pairs in by_source.items():
        if source in REGISTRY:
            paths.append(REGISTRY[source].write(pairs, out_dir))
    return paths
