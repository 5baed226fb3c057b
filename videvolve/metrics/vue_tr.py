"""VUE-TR and VUE-TR-V2 (bytedance/vidi ``VUE_TR*/qa_eval.py``), reproduced with its quirks.

- predictions: starts floored, ends ceiled; ``[]`` or ``[[]]`` is an empty answer; the denominator is the number of
  submitted predictions;
- IoU: predictions sorted and merged when overlapping or touching, reversed leftovers dropped, GT as given;
  IoU AUC counts ``IoU > t`` (strict) over 101 thresholds, trapezoid rule;
- precision / recall: on the unmerged predictions, each interval normalised to [min, max], intersection by a
  two-pointer sweep over the lists as given; a query with an empty prediction is dropped from precision (V2: an
  empty prediction for an empty GT scores precision 1); AUCs count ``>= t``. A zero-filled precision variant
  (empty prediction scores 0) is reported beside the official one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from videvolve.errors import PredictionFormatError

THRESHOLDS = np.linspace(0, 1, 101)
ATTRIBUTES = ("duration_category", "query_format", "query_modality")


def _merge_official(spans: list[list[float]]) -> list[list[float]]:
    spans = sorted(spans, key=lambda x: x[0])
    merged = [list(spans[0])]
    for s, e in spans[1:]:
        if s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [m for m in merged if m[0] <= m[1]]


def query_iou(pred: list[list[float]], gt: list[list[float]]) -> float:
    """Per-query IoU exactly as ``overlap_ratio``."""
    if not gt:
        return 1.0 if not pred else 0.0
    if not pred:
        return 0.0
    merged = _merge_official(pred)
    inter = sum(max(0.0, min(pe, ge) - max(ps, gs)) for ps, pe in merged for gs, ge in gt)
    union = sum(e - s for s, e in merged) + sum(e - s for s, e in gt) - inter
    return float(min(max(inter / (union + 1e-16), 0.0), 1.0))


def _sweep_intersection(a: list[list[float]], b: list[list[float]]) -> float:
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def query_precision_recall(pred: list[list[float]], gt: list[list[float]], version: int) -> tuple[float | None,
                                                                                                  float | None]:
    """Per-query (precision, recall); None where the official code leaves the query out."""
    g = [[min(s, e), max(s, e)] for s, e in gt]
    p = [[min(s, e), max(s, e)] for s, e in pred]
    inter = _sweep_intersection(g, p)
    g_len, p_len = sum(e - s for s, e in g), sum(e - s for s, e in p)
    recall = inter / g_len if g_len != 0 else None
    if p_len != 0:
        precision: float | None = inter / p_len
    elif version == 2 and not g and not p:
        precision = 1.0
    else:
        precision = None
    return precision, recall


def auc(values: Sequence[float], strict: bool) -> float:
    """Trapezoid area under the success curve over 101 thresholds."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return 0.0
    curve = [(v > t).mean() if strict else (v >= t).mean() for t in THRESHOLDS]
    return float(np.trapezoid(curve, THRESHOLDS))


def _prediction_intervals(answer: Any, qid: Any) -> list[list[float]]:
    if answer in ([], [[]], None):
        return []
    if not isinstance(answer, list) or not all(isinstance(x, list | tuple) and len(x) == 2 for x in answer):
        raise PredictionFormatError(f"query {qid}: answer must be a list of [start, end] pairs, got {answer!r}")
    return [[math.floor(float(s)), math.ceil(float(e))] for s, e in answer]


def _summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    precisions = [r["precision"] for r in rows if r["precision"] is not None]
    recalls = [r["recall"] for r in rows if r["recall"] is not None]
    zero_filled = [r["precision"] if r["precision"] is not None else 0.0 for r in rows]
    ious = [r["iou"] for r in rows]
    return {
        "precision_auc": auc(precisions, strict=False),
        "recall_auc": auc(recalls, strict=False),
        "iou_auc": auc(ious, strict=True),
        "precision_auc_zero_filled": auc(zero_filled, strict=False),
        "miou": float(np.mean(ious)) if ious else 0.0,
        **{f"iou@{x}": float(np.mean([i >= x for i in ious])) if ious else 0.0 for x in (0.3, 0.5, 0.7)},
        "n": len(rows),
        "empty_predictions": sum(1 for r in rows if not r["pred"]),
    }


def score_vue_tr(gt: list[dict[str, Any]], predictions: list[dict[str, Any]], version: int = 1) -> dict[str, Any]:
    """Score VUE-TR (``version=1``) or VUE-TR-V2 (``version=2``) prediction records against ground-truth records."""
    by_id = {r["query_id"]: r for r in gt}
    rows: list[dict[str, Any]] = []
    for rec in predictions:
        qid = rec.get("query_id", rec.get("id") if version == 2 else None)
        if qid not in by_id:
            raise PredictionFormatError(f"prediction for unknown query_id {qid!r}")
        truth = by_id[qid]
        pred = _prediction_intervals(rec.get("answer"), qid)
        gt_spans = [list(map(float, x)) for x in truth["gt"]]
        precision, recall = query_precision_recall(pred, gt_spans, version)
        rows.append({"query_id": qid, "pred": pred, "iou": query_iou(pred, gt_spans), "precision": precision,
                     "recall": recall, **{a: truth.get(a) for a in ATTRIBUTES}})
    result: dict[str, Any] = {"benchmark": f"vue-tr{'-v2' if version == 2 else ''}", **_summary(rows)}
    by_attr: dict[str, dict[str, Any]] = defaultdict(dict)
    for attr in ATTRIBUTES:
        for value in sorted({r[attr] for r in rows if r[attr] is not None}):
            sub = [r for r in rows if r[attr] == value]
            s = _summary(sub)
            by_attr[attr][value] = {k: s[k] for k in ("precision_auc", "recall_auc", "iou_auc", "n")}
    result["by_attribute"] = dict(by_attr)
    return result
