"""Predictions in each benchmark's own submission format, so its official script (and `videvolve score`) reads them.

Our own ``predictions.jsonl`` is always written too.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from videvolve.tasks import Prediction, Task, write_predictions


def _intervals(pred: Prediction | None) -> list[list[float]]:
    if pred is None or not isinstance(pred.answer, list):
        return []
    return [[i.start, i.end] for i in pred.answer]


def write_submissions(tasks: Sequence[Task], preds: Sequence[Prediction | None], out_dir: Path) -> list[Path]:
    """Write ``predictions.jsonl`` and, per benchmark present, its submission file; returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [write_predictions([p for p in preds if p is not None], out_dir / "predictions.jsonl")]
    by_source: dict[str, list[tuple[Task, Prediction | None]]] = defaultdict(list)
    for t, p in zip(tasks, preds, strict=True):
        by_source[t.source].append((t, p))
    for source, pairs in by_source.items():
        if source in ("vue-tr", "vue-tr-v2"):
            records = [{"query_id": t.meta.get("query_id"), "video_id": t.video_id, "duration": t.duration,
                        "query": t.question, "answer": _intervals(p), "task": "temporal_retrieval"}
                       for t, p in pairs]
            path = out_dir / f"submission_{source}.json"
            path.write_text(json.dumps(records, indent=1))
            paths.append(path)
        elif source == "qvhighlights":
            path = out_dir / "submission_qvhighlights.jsonl"
            with path.open("w") as fh:
                for t, p in pairs:
                    windows = [[s, e, 1.0] for s, e in _intervals(p)] or [[0.0, 0.0, 0.0]]
                    fh.write(json.dumps({"qid": t.meta.get("qid"), "query": t.question, "vid": t.meta.get("vid"),
                                         "pred_relevant_windows": windows, "pred_saliency_scores": []}) + "\n")
            paths.append(path)
    return paths
