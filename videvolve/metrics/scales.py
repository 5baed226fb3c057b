"""Each benchmark's official scale: what ``videvolve score`` prints, so numbers compare with published ones.

The metric functions return fractions (0-1) everywhere, which is what the loop compares. Where a benchmark's
official script reports percentages, :func:`on_official_scale` multiplies its rates by 100 (and rounds as that
script does); counts stay as they are. The source of each scale is named (see ``shared/BENCHMARKS.md``).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Scale(NamedTuple):
    """How one benchmark reports its rates."""

    factor: float
    """100 for percentages, 1 for fractions."""
    source: str
    """Where the official scale comes from."""
    leaves: tuple[str, ...] = ()
    """Rate metrics, at any depth of the result."""
    containers: tuple[str, ...] = ()
    """Dicts whose every float is a rate (e.g. per-threshold values)."""
    digits: int | None = None
    """Decimals the official script rounds to (None: no rounding)."""


_VUE = ("precision_auc", "recall_auc", "iou_auc", "precision_auc_zero_filled", "miou", "iou@0.3", "iou@0.5",
        "iou@0.7")
_QVH_BRIEF = ("MR-full-R1@0.5", "MR-full-R1@0.7", "MR-full-mAP", "MR-full-mAP@0.5", "MR-full-mAP@0.75",
              "MR-short-mAP", "MR-middle-mAP", "MR-long-mAP", *(f"HL-min-{level}-{m}" for level in
                                                              ("Fair", "Good", "VeryGood") for m in ("mAP", "Hit1")))
_FRACTIONS = "fractions (0-1)"

SCALES: dict[str, Scale] = {
    "qvhighlights": Scale(100, "0-100 with 2 decimals, as moment_detr standalone_eval/eval.py writes them",
                          _QVH_BRIEF, ("MR-mAP", "MR-R1", "HL-min-Fair", "HL-min-Good", "HL-min-VeryGood"), 2),
    "vue-tr": Scale(100, "0-100, as VUE_TR/results_table.csv (the three AUCs x 100)", _VUE),
    "vue-tr-v2": Scale(100, "0-100, as VUE_TR_V2/results/results_table.csv", _VUE),
    "charades-sta": Scale(100, "0-100, as lmms-eval charades_sta (R@1 in %, mIoU x 100)",
                          ("miou", "R@0.3", "R@0.5", "R@0.7", "parse_fail")),
    "videomme": Scale(100, "0-100 with 1 decimal, as parse_answer eval_your_results.py prints it", ("accuracy",),
                      ("by_group",), 1),
    "lsdbench": Scale(100, "0-100, as LSDBench evaluation/eval.py (final_accuracy)", ("accuracy",), ("by_group",)),
    "extremewhenbench": Scale(1, f"{_FRACTIONS}, as lmms-eval extremewhenbench and the README (mIoU 0.0485)"),
    "lvbench": Scale(1, f"{_FRACTIONS}, as lvbench/metrics/compute_accuracy.py"),
    "longvideobench": Scale(1, f"{_FRACTIONS}, as lmms-eval longvideobench (acc)"),
    "video-holmes": Scale(1, f"{_FRACTIONS}, as Video-Holmes evaluate.py writes them"),
    "mlvu": Scale(1, f"{_FRACTIONS}; MLVU's choice_bench.py was not found to check its scale"),
    "comet-bench": Scale(1, f"{_FRACTIONS}, Rejection-F1 on 0-100; no official scorer found (CoEvoWhen appendix)"),
    "videvolve": Scale(1, f"{_FRACTIONS}: videvolve's own per-task score"),
}


def _scaled(value: Any, scale: Scale) -> Any:
    if isinstance(value, bool) or not isinstance(value, float):
        return value
    v = value * scale.factor
    return float(f"{v:.{scale.digits}f}") if scale.digits is not None else v


def _walk(node: Any, scale: Scale, in_container: bool) -> Any:
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if isinstance(value, dict):
            out[key] = _walk(value, scale, in_container or key in scale.containers)
        elif key in scale.leaves or (in_container and key not in ("n", "num")):
            out[key] = _scaled(value, scale)
        else:
            out[key] = value
    return out


def on_official_scale(benchmark: str, result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with its rates on ``benchmark``'s official scale, and a ``scale`` entry saying which."""
    scale = SCALES.get(benchmark, Scale(1, _FRACTIONS))
    out = _walk(result, scale, False) if scale.factor != 1 else dict(result)
    out["scale"] = scale.source
    return out
