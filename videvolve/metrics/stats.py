"""Statistics for comparing two harnesses on the same tasks: Wilson intervals, exact McNemar, paired bootstrap."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (``(0, 1)`` when ``n == 0``)."""
    if n == 0:
        return (0.0, 1.0)
    ci = stats.binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test on paired right/wrong outcomes."""

    a_only: int
    """Tasks A gets right and B gets wrong."""
    b_only: int
    p_value: float


def mcnemar(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> McNemar:
    """Two-sided exact (binomial) McNemar test; p = 1 when the two never disagree."""
    if len(a_correct) != len(b_correct):
        raise ValueError("paired outcomes must have the same length")
    a_only = sum(1 for a, b in zip(a_correct, b_correct, strict=True) if a and not b)
    b_only = sum(1 for a, b in zip(a_correct, b_correct, strict=True) if b and not a)
    n = a_only + b_only
    p = 1.0 if n == 0 else float(stats.binomtest(min(a_only, b_only), n, 0.5).pvalue)
    return McNemar(a_only, b_only, min(p, 1.0))


@dataclass(frozen=True)
class PairedComparison:
    """Mean difference B - A over paired scores, its bootstrap interval and two-sided p-value."""

    n: int
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    std_error: float

    def to_dict(self) -> dict[str, float]:
        """Plain-JSON form."""
        return asdict(self)


def paired_bootstrap(a: Sequence[float], b: Sequence[float], resamples: int = 10_000, seed: int = 0,
                     confidence: float = 0.95) -> PairedComparison:
    """Paired bootstrap of mean(b - a): resample tasks with replacement, keep pairs together."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError("paired scores must have the same length")
    n = len(x)
    if n == 0:
        return PairedComparison(0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0)
    d = y - x
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    alpha = (1 - confidence) / 2
    # (count + 1) / (B + 1): B resamples cannot show a p below that (all on one side read as 0)
    tail = min(np.count_nonzero(means <= 0), np.count_nonzero(means >= 0))
    p = 1.0 if np.all(d == 0) else float(min(1.0, 2 * (tail + 1) / (resamples + 1)))
    return PairedComparison(
        n=n, mean_a=float(x.mean()), mean_b=float(y.mean()), diff=float(d.mean()),
        ci_low=float(np.quantile(means, alpha)), ci_high=float(np.quantile(means, 1 - alpha)), p_value=p,
        std_error=float(d.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0,
    )


@dataclass(frozen=True)
class ClusterComparison:
    """Paired differences averaged per cluster (a video): how many clusters gain, and a test with them as units."""

    clusters: int
    gaining: int
    """Clusters whose mean difference is above zero."""
    p_value: float
    """Exact sign-flip p of the mean of the cluster means (two-sided unless asked; 1.0 when every one is zero)."""


def cluster_sign_flip(a: Sequence[float], b: Sequence[float], clusters: Sequence[str],
                      alternative: str = "two-sided") -> ClusterComparison:
    """Paired comparison of mean(b - a) with clusters (the videos questions are about) as the independent units.

    Questions about one video are not independent: a change that suits some videos more than others shows a gain
    on the videos it suits, which per-question tests count many times over. Here each video's mean difference is one
    observation, and the test flips their signs (exact for up to 16 videos; the smallest p is 2 x 2^-v, or 2^-v with
    ``alternative="greater"``, the one-sided test of a gain).
    """
    by: dict[str, list[float]] = {}
    for x, y, c in zip(a, b, clusters, strict=True):
        by.setdefault(c, []).append(y - x)
    means = np.array([np.mean(v) for v in by.values()], dtype=float)
    if len(means) == 0 or np.all(means == 0):
        return ClusterComparison(len(means), 0, 1.0)
    res = stats.permutation_test((means,), np.mean, permutation_type="samples", alternative=alternative,
                                 n_resamples=np.inf if len(means) <= 16 else 9_999, random_state=0)
    return ClusterComparison(len(means), int(np.sum(means > 0)), float(min(1.0, res.pvalue)))
