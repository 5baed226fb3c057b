"""Single- and multi-interval grounding metrics: ExtremeWhenBench, Charades-STA, CoMET-Bench.

ExtremeWhenBench and Charades-STA score one interval per query with the hull IoU and ``>=`` thresholds; their
official text parsers are reproduced so a text answer can be scored the way the benchmark does. CoMET-Bench's
formulas come from the CoEvoWhen appendix only (no official code was found): **unverified**.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from videvolve.errors import UsageError
from videvolve.metrics.intervals import Pair, hull_iou

_NUM = r"(\d+(?:\.\d+)?)"
_EWB_LMMS = re.compile(_NUM + r"\s*(?:-|to|~|–|—)\s*" + _NUM)
_EWB_VLLM = re.compile(_NUM + r"\s*[-~–]\s*" + _NUM)


def _ordered(a: float, b: float) -> Pair:
    return (a, b) if a <= b else (b, a)


def parse_extremewhen(text: str, parser: str = "lmms") -> Pair | None:
    """ExtremeWhenBench's text parser; None if unparsable.

    ``lmms`` (lmms-eval): the last ``a - b``, ``a to b`` or ``a ~ b``. ``vllm`` (``eval_qwen35_vllm.py``): the
    first ``a - b`` in the sentences that mention happen / start / end.
    """
    if parser == "lmms":
        matches = _EWB_LMMS.findall(text)
        return _ordered(float(matches[-1][0]), float(matches[-1][1])) if matches else None
    if parser == "vllm":
        sentences = [s for s in re.split(r"[!?\n]", text.lower()) if s.strip()]
        keyed = [s for s in sentences if any(k in s for k in ("happen", "start", "end"))]
        for s in keyed or [text.lower()]:
            m = _EWB_VLLM.search(s)
            if m:
                return _ordered(float(m.group(1)), float(m.group(2)))
        return None
    raise UsageError(f"unknown ExtremeWhenBench parser {parser!r} (lmms or vllm)")


def render_extremewhen(interval: Sequence[float]) -> str:
    """Text that both official parsers read back as ``interval``: plain seconds, ``start - end``."""
    return f"The event happens in {_fmt(interval[0])} - {_fmt(interval[1])}."


def _fmt(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def single_interval_scores(preds: Sequence[Pair | None], gts: Sequence[Sequence[float]],
                           thresholds: Sequence[float] = (0.3, 0.5, 0.7)) -> dict[str, float]:
    """MIoU and R@t (``>=``) of one predicted interval per query; an unparsed prediction (None) scores 0."""
    ious = [hull_iou(p, g) if p is not None else 0.0 for p, g in zip(preds, gts, strict=True)]
    out = {"miou": float(np.mean(ious)) if ious else 0.0}
    out.update({f"R@{t}": float(np.mean([i >= t for i in ious])) if ious else 0.0 for t in thresholds})
    out["parse_fail"] = float(np.mean([p is None for p in preds])) if preds else 0.0
    out["n"] = len(ious)
    return out


def score_extremewhen(records: Sequence[dict[str, Any]], parser: str = "lmms") -> dict[str, Any]:
    """Score records ``{"correct_interval": [s, e], "response": text}`` (or ``"interval": [s, e]``)."""
    preds: list[Pair | None] = []
    for r in records:
        if r.get("interval") is not None:
            preds.append(_ordered(*map(float, r["interval"])))
        else:
            preds.append(parse_extremewhen(str(r.get("response", "")), parser))
    return {"benchmark": "extremewhenbench", "parser": parser,
            **single_interval_scores(preds, [r["correct_interval"] for r in records])}


def score_charades(preds: Sequence[Pair | None], gts: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Charades-STA R@1 at IoU 0.3 / 0.5 / 0.7 (``>=``) and mIoU of the top-1 interval."""
    return {"benchmark": "charades-sta", **single_interval_scores(preds, gts)}


def comet_query(pred: Sequence[Sequence[float]], gt: Sequence[Sequence[float]]) -> dict[str, float]:
    """Per-query CoMET-Bench values (unverified): per-GT best IoU, mIoU, R@0.5, greedy F1@0.5, counts."""
    best = [max((hull_iou(p, g) for p in pred), default=0.0) for g in gt]
    matched: set[int] = set()
    tp = 0
    for p in pred:  # predictions in output order, each to the first unmatched GT with IoU >= 0.5
        for j, g in enumerate(gt):
            if j not in matched and hull_iou(p, g) >= 0.5:
                matched.add(j)
                tp += 1
                break
    denom = len(pred) + len(gt)
    return {
        "miou": float(np.mean(best)) if gt else 0.0,
        "recall@0.5": float(np.mean([b >= 0.5 for b in best])) if gt else 0.0,
        "f1@0.5": 2 * tp / denom if denom else 0.0,
        "n_pred": float(len(pred)),
        "n_gt": float(len(gt)),
    }


def score_comet(preds: Sequence[Sequence[Sequence[float]]], gts: Sequence[Sequence[Sequence[float]]]) -> dict[str, Any]:
    """CoMET-Bench, UNVERIFIED (formulas from the CoEvoWhen appendix).

    Grounding over positive queries, rejection over negative ones, counting over all.
    """
    rows = [comet_query(p, g) for p, g in zip(preds, gts, strict=True)]
    pos = [r for r in rows if r["n_gt"] > 0]
    neg = [r for r in rows if r["n_gt"] == 0]
    r_neg = round(float(np.mean([r["n_pred"] == 0 for r in neg])), 4) if neg else 0.0
    coverage = float(np.mean([r["n_pred"] > 0 for r in pos])) if pos else 0.0
    rej_f1 = 100 * 2 * r_neg * coverage / (r_neg + coverage) if (r_neg + coverage) > 0 else 0.0
    n_hat = np.array([r["n_pred"] for r in rows])
    n = np.array([r["n_gt"] for r in rows])
    pearson = float(np.corrcoef(n_hat, n)[0, 1]) if len(rows) > 1 and n_hat.std() > 0 and n.std() > 0 else 0.0
    return {
        "benchmark": "comet-bench", "verified": False,
        "miou": float(np.mean([r["miou"] for r in pos])) if pos else 0.0,
        "recall@0.5": float(np.mean([r["recall@0.5"] for r in pos])) if pos else 0.0,
        "f1@0.5": float(np.mean([r["f1@0.5"] for r in pos])) if pos else 0.0,
        "rejection_f1": rej_f1, "negative_rejection_rate": r_neg, "positive_coverage": coverage,
        "count_mae": float(np.mean(np.abs(n_hat - n))) if rows else 0.0,
        "count_obo": float(np.mean(np.abs(n_hat - n) <= 1)) if rows else 0.0,
        "count_pearson": pearson, "n": len(rows), "n_positive": len(pos), "n_negative": len(neg),
    }
