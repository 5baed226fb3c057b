"""QVHighlights moment retrieval (jayleicn/moment_detr ``standalone_eval``): R1@θ and mAP, with length subsets.

- R1@θ: the first predicted window (list order) against the GT window it overlaps most (ties: the first); hull
  IoU; hit if ``>= θ``.
- mAP: the first 10 predicted windows, sorted by score (stable); each tries GT windows in descending IoU and takes
  the first one not yet matched with IoU >= θ; VOC-2011 interpolated AP per query, averaged over queries that
  have predictions, for θ in 0.50:0.05:0.95.
- subsets by GT window length: short (0, 10], middle (10, 30], long (30, 150] s; GT windows outside a range are
  dropped, queries without any are left out.
- highlight detection (when the predictions carry ``pred_saliency_scores``, one per 2-s clip): a clip is positive
  at ``Fair``/``Good``/``VeryGood`` when an annotator scored it >= 2/3/4; HL-mAP is the mean over queries and the
  three annotators of ``get_ap`` (precision made non-decreasing from the lowest threshold, averaged where recall
  changes); HL-Hit1 is whether the top-scored clip is positive for at least one annotator.
Values are fractions here; ``videvolve.metrics.scales`` puts them on the official 0-100 scale (2 decimals).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from videvolve.errors import PredictionFormatError
from videvolve.metrics.intervals import hull_iou

IOU_THRESHOLDS = [round(x, 2) for x in np.linspace(0.5, 0.95, 10)]
LENGTH_RANGES = {"short": (0, 10), "middle": (10, 30), "long": (30, 150), "full": (0, 150)}
MAX_PRED_WINDOWS = 10


def _interpolated_ap(precision: np.ndarray, recall: np.ndarray) -> float:
    mprec = np.hstack([[0.0], precision, [0.0]])
    mrec = np.hstack([[0.0], recall, [1.0]])
    for i in range(len(mprec) - 2, -1, -1):
        mprec[i] = max(mprec[i], mprec[i + 1])
    idx = np.where(mrec[1:] != mrec[:-1])[0] + 1
    return float(np.sum((mrec[idx] - mrec[idx - 1]) * mprec[idx]))


def query_ap(gt: Sequence[Sequence[float]], pred: Sequence[Sequence[float]]) -> np.ndarray:
    """AP at each IoU threshold for one query (``pred`` rows are ``[start, end, score]``)."""
    ap = np.zeros(len(IOU_THRESHOLDS))
    if not pred:
        return ap
    preds = sorted(pred, key=lambda w: -w[2])
    lock = -np.ones((len(IOU_THRESHOLDS), len(gt)))
    tp = np.zeros((len(IOU_THRESHOLDS), len(preds)))
    fp = np.zeros_like(tp)
    for k, p in enumerate(preds):
        ious = np.array([hull_iou(p, g) for g in gt])
        order = ious.argsort()[::-1]
        for t, thr in enumerate(IOU_THRESHOLDS):
            for j in order:
                if ious[j] < thr:
                    fp[t, k] = 1
                    break
                if lock[t, j] >= 0:
                    continue
                tp[t, k] = 1
                lock[t, j] = k
                break
            if fp[t, k] == 0 and tp[t, k] == 0:
                fp[t, k] = 1
    tp_c, fp_c = np.cumsum(tp, axis=1), np.cumsum(fp, axis=1)
    recall = tp_c / len(gt) if len(gt) else np.zeros_like(tp_c)
    precision = tp_c / (tp_c + fp_c)
    return np.array([_interpolated_ap(precision[t], recall[t]) for t in range(len(IOU_THRESHOLDS))])


def _subset(gt: list[dict[str, Any]], preds: dict[Any, dict[str, Any]], lo: float, hi: float,
            full: bool) -> tuple[list[dict[str, Any]], dict[Any, dict[str, Any]]]:
    if full:
        return gt, preds
    kept = []
    for d in gt:
        windows = [w for w in d["relevant_windows"] if lo < w[1] - w[0] <= hi]
        if windows:
            kept.append({**d, "relevant_windows": windows})
    qids = {d["qid"] for d in kept}
    return kept, {q: p for q, p in preds.items() if q in qids}


def _metrics(gt: list[dict[str, Any]], preds: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    gt_by_q = {d["qid"]: d["relevant_windows"] for d in gt}
    aps = []
    for qid, p in preds.items():
        windows = p["pred_relevant_windows"][:MAX_PRED_WINDOWS]
        aps.append(query_ap(gt_by_q.get(qid, []), windows))
    ap_mean = np.mean(aps, axis=0) if aps else np.zeros(len(IOU_THRESHOLDS))
    r1_ious = []
    for qid, p in preds.items():
        first = p["pred_relevant_windows"][0][:2]
        windows = gt_by_q[qid]
        best = int(np.argmax([hull_iou(first, w) for w in windows])) if windows else 0
        r1_ious.append(hull_iou(first, windows[best]))
    r1 = {str(t): float(np.mean([i >= t for i in r1_ious])) if r1_ious else 0.0 for t in IOU_THRESHOLDS}
    mAP = {str(t): float(v) for t, v in zip(IOU_THRESHOLDS, ap_mean, strict=True)}
    mAP["average"] = float(np.mean(ap_mean))
    return {"MR-mAP": mAP, "MR-R1": r1, "n": len(preds)}


HL_LEVELS = {"Fair": 2, "Good": 3, "VeryGood": 4}
CLIP_SECONDS = 2


def saliency_ap(y_true: np.ndarray, y_score: np.ndarray) -> float:
    """moment_detr's ``get_ap`` (interpolated, not 11-point) on sklearn's precision-recall curve, in numpy."""
    if len(set(y_true.tolist())) == 1:
        return float(y_true[0] != 0)
    order = np.argsort(y_score, kind="mergesort")[::-1]
    scores, truth = y_score[order], y_true[order]
    last = np.r_[np.where(np.diff(scores))[0], truth.size - 1]  # the last index of each distinct score
    tps = np.cumsum(truth)[last]
    fps = 1 + last - tps
    precision = np.r_[(tps / (tps + fps))[::-1], 1.0]
    recall = np.r_[(tps / tps[-1])[::-1], 0.0].astype(np.float32)
    precision = np.maximum.accumulate(precision)
    return float(np.mean(precision[np.where(np.diff(recall))]))


def _gt_saliency(d: dict[str, Any]) -> np.ndarray:
    scores = np.zeros((int(d["duration"] / CLIP_SECONDS), 3))
    scores[np.array(d["relevant_clip_ids"], dtype=int)] = np.array(d["saliency_scores"])
    return scores


def highlight_metrics(gt: list[dict[str, Any]], preds: dict[Any, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """HL-mAP and HL-Hit1 at each saliency level (fractions), over the queries with predictions."""
    full = {d["qid"]: _gt_saliency(d) for d in gt}
    out = {}
    for level, minimum in HL_LEVELS.items():
        aps, hits = [], []
        for qid, p in preds.items():
            binary = (full[qid] >= minimum).astype(float)
            pred = np.asarray(p["pred_saliency_scores"], dtype=float)
            top = int(np.argmax(pred))
            hits.append(float(binary[top].max()) if top < len(binary) else 0.0)
            fitted = pred[: len(binary)] if len(pred) >= len(binary) else np.r_[pred, np.zeros(len(binary) - len(pred))]
            aps += [saliency_ap(binary[:, w], fitted) for w in range(3)]
        out[f"HL-min-{level}"] = {"HL-mAP": float(np.mean(aps)), "HL-Hit1": float(np.mean(hits))}
    return out


def _highlights_or_why(gt: list[dict[str, Any]], preds: dict[Any, dict[str, Any]]) -> tuple[dict[str, Any], str]:
    if not all(p.get("pred_saliency_scores") for p in preds.values()):
        return {}, "the predictions have no pred_saliency_scores (videvolve's harnesses predict windows only)"
    if not all("saliency_scores" in d and "relevant_clip_ids" in d for d in gt):
        return {}, "the ground truth has no saliency_scores / relevant_clip_ids (e.g. the unannotated test split)"
    return highlight_metrics(gt, preds), ""


def score_qvhighlights(gt: list[dict[str, Any]], predictions: list[dict[str, Any]],
                       match_number: bool = True) -> dict[str, Any]:
    """Moment-retrieval metrics of QVHighlights; with ``match_number`` the qids must match exactly (official)."""
    preds = {}
    for p in predictions:
        if "qid" not in p or not p.get("pred_relevant_windows"):
            raise PredictionFormatError(
                f"each prediction needs 'qid' and non-empty 'pred_relevant_windows': {p!r:.120}"
            )
        preds[p["qid"]] = p
    gt_qids = {d["qid"] for d in gt}
    if match_number and set(preds) != gt_qids:
        raise PredictionFormatError(
            f"qids of predictions ({len(preds)}) and ground truth ({len(gt_qids)}) differ; "
            "QVHighlights' scorer requires a prediction for every query"
        )
    gt = [d for d in gt if d["qid"] in preds]
    out: dict[str, Any] = {"benchmark": "qvhighlights"}
    for name, (lo, hi) in LENGTH_RANGES.items():
        g, p = _subset(gt, preds, lo, hi, full=name == "full")
        out[name] = _metrics(g, p)
    highlights, why_not = _highlights_or_why(gt, preds)
    out.update(highlights)
    if why_not:
        out["not_computed"] = [f"HL-min-{{Fair,Good,VeryGood}}-{{mAP,Hit1}} (highlight detection): {why_not}"]
    full = out["full"]
    out.update({
        "MR-full-R1@0.5": full["MR-R1"]["0.5"], "MR-full-R1@0.7": full["MR-R1"]["0.7"],
        "MR-full-mAP": full["MR-mAP"]["average"], "MR-full-mAP@0.5": full["MR-mAP"]["0.5"],
        "MR-full-mAP@0.75": full["MR-mAP"]["0.75"],
        **{f"MR-{n}-mAP": out[n]["MR-mAP"]["average"] for n in ("short", "middle", "long")},
        **{f"{level}-{k.split('-')[1]}": v for level, m in highlights.items() for k, v in m.items()},
    })
    return out
