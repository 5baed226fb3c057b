"""A revision's cost against the gate's bounds, over the selection videos as its gain is judged over them.

A bound on a candidate's mean cost per question is a per-question limit: a factor of a reference's cost on the same
question ((1 + alpha) x the parent's or the seed's for a gain, (1 - beta) x the parent's for a cut) or a budget
(``--cost-ceiling``). The candidate's mean cost fits it when the mean of ``cost - limit`` over the questions is at
most 0.

Where the gain must hold over the selection videos (``--gate-min-videos`` of them or more), so must the cost: the
one-sided upper bound of that mean at the gate's level, its spread taken over videos (the cluster-robust t of
:func:`videvolve.search.significance.video_t`), must be at most 0. A look whose cost follows how much happens in a
video (a detector's hits, then a close look at each) can fit its bound on the selection set's mean and miss it on
other videos: on world 599633 (set V) a gain kept at 1.063x the seed's visual tokens on the selection set cost
1.144x on the test split; over its 8 selection videos (0.95-1.22x each) the upper bound is 1.13x. Under fewer
videos, the mean alone decides, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from videvolve.evaluation.results import TaskResult
from videvolve.search.curtailment import video_chance, within_chance
from videvolve.search.services import GateRules
from videvolve.search.significance import video_t
from videvolve.usage import CostMeasure

TOL = 1e-9


@dataclass(frozen=True)
class CostLimit:
    """A bound on the mean cost per question, as a per-question limit, and how it reads in a verdict."""

    limit: list[float]
    """Each question's share of the bound (a factor of a reference's cost on it, or the budget)."""
    text: str
    """How the bound was reached, e.g. ``(1+0.1) x 5120.0``."""

    @property
    def mean(self) -> float:
        """The bound on the mean cost."""
        return sum(self.limit) / len(self.limit) if self.limit else 0.0


@dataclass(frozen=True)
class CostFit:
    """A candidate's mean cost against one bound."""

    fits: bool
    upper: float
    """The most its mean cost may be on other videos (the one-sided upper bound over videos; the mean itself where
    there are too few videos to judge over)."""
    videos: int | None
    """The videos the upper bound is taken over; None where the mean alone decides."""

    def said(self, mean: float) -> str:
        """The candidate's cost in words: its mean and, over videos, its upper bound."""
        if self.videos is None:
            return f"{mean:.1f}"
        return f"{mean:.1f} (at most {self.upper:.1f} over {self.videos} videos)"


def costs(results: Sequence[TaskResult], measure: CostMeasure) -> list[float]:
    """Per-question costs as the gate counts them."""
    return [measure.of(r) for r in results]


def scaled(reference: Sequence[float], factor: float, text: str) -> CostLimit:
    """``factor`` x a reference's cost, question by question."""
    return CostLimit([factor * x for x in reference], text)


def budget(ceiling: float, n: int) -> CostLimit:
    """A budget per question (``--cost-ceiling``)."""
    return CostLimit([ceiling] * n, f"the ceiling {ceiling:.1f}")


def gain_limits(parent: Sequence[float], alpha: float, seed: Sequence[float] | None = None,
                ceiling: float | None = None) -> list[CostLimit]:
    """The bounds a gain's cost must fit: the budget, else (1 + alpha) x the parent's and (1 + alpha) x the seed's."""
    if ceiling is not None:
        return [budget(ceiling, len(parent))]
    out = [scaled(parent, 1 + alpha, f"(1+{alpha}) x {sum(parent) / max(1, len(parent)):.1f}")]
    if seed is not None:
        out.append(scaled(seed, 1 + alpha, f"(1+{alpha}) x the seed's {sum(seed) / max(1, len(seed)):.1f}"))
    return out


def fit(mine: Sequence[float], bound: CostLimit, videos: Sequence[str] | None, level: float) -> CostFit:
    """Whether ``mine`` (the candidate's per-question costs) fits ``bound``; over ``videos`` where they are given."""
    excess = [m - x for m, x in zip(mine, bound.limit, strict=True)]
    mean = sum(excess) / len(excess) if excess else 0.0
    over = video_t(excess, videos, level) if videos is not None and excess else None
    if over is None:
        return CostFit(mean <= TOL * max(1.0, bound.mean), bound.mean + mean, None)
    return CostFit(over.upper <= TOL * max(1.0, bound.mean), bound.mean + over.upper, over.videos)


def fit_all(mine: Sequence[float], bounds: Sequence[CostLimit], videos: Sequence[str] | None,
            level: float) -> tuple[CostFit, CostLimit]:
    """The first bound ``mine`` misses (with its fit), else the tightest one (the least room left)."""
    fits = [(fit(mine, b, videos, level), b) for b in bounds]
    missed = [f for f in fits if not f[0].fits]
    return missed[0] if missed else min(fits, key=lambda f: f[1].mean - f[0].upper)


def fit_chance(mine: Sequence[float], bound: CostLimit, population: int, videos: Sequence[str] | None,
               sizes: Mapping[str, int] | None, level: float) -> float:
    """The predictive chance that on the whole set of ``population`` questions the candidate's cost fits ``bound``.

    ``mine`` and the bound cover the questions read so far; with ``videos`` (theirs) and ``sizes`` (every selection
    video's number of questions), the chance that the upper bound over videos fits
    (:func:`~videvolve.search.curtailment.video_chance` on the negated excess, scaled by the bound's mean);
    otherwise that the mean does (:func:`~videvolve.search.curtailment.within_chance`). A cost at its bound on every
    question read, as :func:`fit` counts it (a frame budget spent in full, the parent's frames at ``--gate-alpha 0``),
    fits: there is no spread for the rest to differ by (the models above gave it a chance of a half, or the level).
    """
    scale = max(bound.mean, TOL)
    excess = [(m - x) / scale for m, x in zip(mine, bound.limit, strict=True)]
    within = TOL * max(1.0, bound.mean) / scale  # what fit() lets through, in the same units
    if excess and max(excess) <= within and max(excess) - min(excess) <= within:
        return 1.0
    if videos is None or sizes is None:
        return within_chance(excess, population)
    return video_chance([-x for x in excess], videos, sizes, level)


def path_chances(parent: Sequence[TaskResult], candidate: Sequence[TaskResult], gate: GateRules, population: int,
                 seed: Sequence[TaskResult] | None = None, videos: Sequence[str] | None = None,
                 sizes: Mapping[str, int] | None = None) -> list[tuple[str, float, float]]:
    """Each path (a gain, a cut) with its score bound and the predictive chance that the whole set's cost fits it.

    On a partial rung the cost is an estimate: a look whose cost depends on the question (how much of a video its
    scan flags) can exceed its bound on 64 questions and fit it on 317 (:func:`fit_chance`; ``videos``, the
    questions' videos, and ``sizes``, the selection videos' sizes, where the cost is judged over videos).
    """
    measure = gate.cost_measure
    mine, theirs = costs(candidate, measure), costs(parent, measure)
    limits = gain_limits(theirs, gate.alpha, None if seed is None else costs(seed, measure), gate.cost_ceiling)
    gain = min(fit_chance(mine, b, population, videos, sizes, gate.level) for b in limits)
    out = [("no gain", 0.0, gain)]
    if sum(theirs) > 0:
        cut = scaled(theirs, 1 - gate.beta, "")
        out.append((f"a loss of the margin {gate.margin:g}", -gate.margin,
                    fit_chance(mine, cut, population, videos, sizes, gate.level)))
    return out
