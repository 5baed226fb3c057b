"""Scores of our own predictions against our own tasks: one number per task (what the gate sums) and summaries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from videvolve.metrics.intervals import hull_iou, set_iou
from videvolve.metrics.stats import wilson
from videvolve.metrics.vue_tr import auc
from videvolve.tasks import Prediction, Task


def task_score(task: Task, pred: Prediction | None) -> float:
    """mcq: 1 if the letter is right else 0; grounding: interval-set IoU, [] vs [] = 1 (a correct rejection).

    A missing prediction or one without a parsable answer scores 0.
    """
    if pred is None or pred.answer is None:
        return 0.0
    if task.kind == "mcq":
        return 1.0 if pred.answer == task.answer else 0.0
    if isinstance(pred.answer, str):
        return 0.0
    return set_iou([i.pair() for i in pred.answer], [i.pair() for i in task.intervals])


def summarize_scores(tasks: Sequence[Task], preds: Sequence[Prediction | None]) -> dict[str, Any]:
    """Per kind: mcq accuracy with its Wilson interval; grounding mIoU, R@{0.3,0.5,0.7}, IoU AUC, rejection."""
    out: dict[str, Any] = {"n": len(tasks)}
    scores = [task_score(t, p) for t, p in zip(tasks, preds, strict=True)]
    out["score"] = float(np.mean(scores)) if scores else 0.0
    mcq = [s for t, s in zip(tasks, scores, strict=True) if t.kind == "mcq"]
    if mcq:
        k = int(sum(mcq))
        out["mcq"] = {"n": len(mcq), "accuracy": k / len(mcq), "wilson95": wilson(k, len(mcq))}
    g = [(t, p, s) for t, p, s in zip(tasks, preds, scores, strict=True) if t.kind == "grounding"]
    if g:
        ious = [s for _, _, s in g]
        absent = [(t, p) for t, p, _ in g if not t.intervals]
        out["grounding"] = {
            "n": len(g), "miou": float(np.mean(ious)), "iou_auc": auc(ious, strict=True),
            **{f"R@{x}": float(np.mean([i >= x for i in ious])) for x in (0.3, 0.5, 0.7)},
            "absent": len(absent),
            "rejection_accuracy": float(np.mean([p is not None and p.answer == [] for _, p in absent]))
            if absent else None,
            "first_interval_miou": float(np.mean([
                hull_iou(p.answer[0].pair(), t.intervals[0].pair())
                if t.intervals and p is not None and isinstance(p.answer, list) and p.answer else 0.0
                for t, p, _ in g if t.intervals
            ])) if any(t.intervals for t, _, _ in g) else None,
        }
    out["unanswered"] = sum(1 for p in preds if p is None or p.answer is None)
    return out
