"""The cost-aware acceptance rule (Video-RSI) and the aggregates it is applied to.

Accept a candidate if (dA > 0 and C' <= (1 + alpha) C) or (-eps <= dA <= 0 and C' <= (1 - beta) C and C > 0), where A
is the mean per-question score on the selection set (mcq 1/0, grounding interval-set IoU; an error scores 0) and C
the mean cost per question (frames, or visual tokens; an error's cost counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from videvolve.evaluation.results import TaskResult, cost_of

__all__ = ["aggregate", "cost_of", "gate_rule", "mean_frames", "rule_text"]

TOL = 1e-12


def mean_frames(results: Sequence[TaskResult]) -> float:
    """Mean distinct frames per question (reported beside any cost metric)."""
    return float(np.mean([r.frames for r in results])) if results else 0.0


def aggregate(results: Sequence[TaskResult], metric: str = "visual_tokens",
              text_weight: float = 1.0) -> tuple[float, float]:
    """(A, C): mean score and mean cost per question."""
    if not results:
        return 0.0, 0.0
    costs = [cost_of(r, metric, text_weight) for r in results]
    return float(np.mean([r.score for r in results])), float(np.mean(costs))


@dataclass(frozen=True)
class Decision:
    """The gate's verdict and why."""

    accept: bool
    reason: str


def gate_rule(a: float, c: float, a_new: float, c_new: float, alpha: float = 0.1, beta: float = 0.2,
              eps: float = 0.0) -> Decision:
    """Apply the rule; the reason states the numbers that decided."""
    da = a_new - a
    if da > TOL:
        if c_new <= (1 + alpha) * c + 1e-9:
            return Decision(True, f"score +{da:.4f} at cost {c_new:.1f} <= (1+{alpha}) x {c:.1f}")
        return Decision(False, f"score +{da:.4f} but cost {c_new:.1f} > (1+{alpha}) x {c:.1f} = {(1 + alpha) * c:.1f}")
    if da >= -eps - TOL:
        if c <= 0:
            return Decision(False, f"score {da:+.4f} is no gain and the incumbent costs nothing to cut")
        if c_new <= (1 - beta) * c + 1e-9:
            return Decision(True, f"cost {c_new:.1f} <= (1-{beta}) x {c:.1f} with score {da:+.4f} within eps {eps:.4f}")
        return Decision(False, f"score {da:+.4f} is no gain, and cost {c_new:.1f} is not <= (1-{beta}) x {c:.1f} = "
                               f"{(1 - beta) * c:.1f}")
    return Decision(False, f"score {da:+.4f} is below -eps = {-eps:.4f}")


def rule_text(alpha: float, beta: float, eps: float, metric: str) -> str:
    """The rule in words, with a run's own numbers (what an editor is told)."""
    what = {"frames": "distinct frames shown to the model", "visual_tokens": "visual tokens (image and video "
            "tokens) sent to the model", "visual_tokens+text": "visual tokens sent to the model plus the weighted "
            "text tokens of the transcript read"}.get(metric, metric)
    return (f"A revision is kept only if its mean score on a held-out selection set rises while its mean cost per "
            f"question (C = {what}) grows by at most {alpha:.0%}, or if its cost falls by at least {beta:.0%} while "
            f"its score drops by at most {eps:.3f}. Errors score 0 and their cost counts.")
