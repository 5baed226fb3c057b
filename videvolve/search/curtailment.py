"""Sequential stopping: what part of the selection set says about full validation's verdict on all of it.

Full validation judges a candidate on all N selection questions; multi-fidelity validation has the paired differences
``d`` of n of them (a rung). Its final tests read the whole set: a gain passes when the sign-flip test's statistic,
the sum of the differences over the root of the sum of their squares, reaches ``z_(1-level)`` (its normal
approximation); a cost cut when the lower t bound of the mean difference (its spread and floor as
:func:`videvolve.search.significance.t_bounds` takes them) is above ``-margin``. The unknown part is the N - n
questions not yet asked. Two chances that the final test passes:

- **predictive** (:attr:`Outlook.predictive`): the remaining questions alike to those answered, their mean unknown
  around the observed one (a flat prior: the spread of their sum grows with (N - n) / n, and Student's t with
  n - 1 degrees of freedom carries the uncertainty of the spread itself). Above ``curtail`` (and with the gate's
  rule already passing on the rung) a candidate is accepted early; below ``futility`` it stops as a clear loser.
- **under the null** (:attr:`Outlook.null`): the remaining questions hold no gain (for a cut: a loss of exactly
  the margin), as stochastic curtailment asks (Lan, Simon & Halperin 1982). Screening has not used it since
  2026-12-05, when early acceptance moved to the predictive chance (a winner had to pass even if every question
  left held nothing, and almost none did before the whole set); it stays as the reference the tests compare with.

The spread of a per-question difference is the observed one; where fewer than two questions differ it is no
estimate, and what n all-agreeing questions can hide is used instead
(:func:`videvolve.search.significance.agreement_floor`): a cut that changed nothing on 20 questions is not certain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from videvolve.search.significance import agreement_floor, cr2_variance, null_spread, sign_flip_p

TINY = 1e-12


@dataclass(frozen=True)
class Outlook:
    """The chances that full validation passes a candidate, from the questions answered so far."""

    null: float
    """Probability of passing if the remaining questions hold nothing (the null at its boundary)."""
    predictive: float
    """Probability of passing with the remaining questions alike to those answered (their mean unknown)."""


def spread(d: Sequence[float], level: float) -> float:
    """Per-question standard deviation of the differences; what n agreeing questions can hide where < 2 differ."""
    n = len(d)
    if sum(1 for x in d if abs(x) > TINY) < 2 or n < 2:
        return max(math.sqrt(agreement_floor(n, level)) if n else 1.0, 1e-9)
    mean = sum(d) / n
    return max(math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)), 1e-9)


def outlook(d: Sequence[float], population: int, level: float, bound: float = 0.0) -> Outlook:
    """Chances that full validation's test at ``level`` on all ``population`` questions passes.

    ``d``: the paired differences (candidate - parent) seen so far; ``bound``: 0 for a gain (the sign-flip test),
    ``-margin`` for a cost cut's non-inferiority (the lower t bound).
    """
    n = len(d)
    rest = population - n
    if n == 0 or rest <= 0:
        raise ValueError(f"an outlook needs some answered and some remaining questions ({n} of {population})")
    sd = spread(d, level)
    total, squares = sum(d), sum(x * x for x in d)
    if bound >= 0:  # a gain: sum(d) >= z sqrt(sum(d^2)) over all questions
        square = max(squares / n, sd * sd)  # per-question second moment of the remaining questions
        need = float(stats.norm.ppf(1 - level)) * math.sqrt(squares + rest * square) - total
    else:  # a cut: mean - half >= bound, with the final half-width t x sd / sqrt(N) (sd at least the null's), floored
        half = max(float(stats.t.ppf(1 - level, population - 1)) * max(sd, null_spread(d, bound)) /
                   math.sqrt(population), agreement_floor(population, level))
        need = population * (bound + half) - total
    null = 1 - float(stats.norm.cdf((need - rest * bound) / (sd * math.sqrt(rest))))
    scale = sd * math.sqrt(rest * (1 + rest / n))
    predictive = 1 - float(stats.t.cdf((need - rest * total / n) / scale, max(1, n - 1)))
    return Outlook(null=null, predictive=predictive)


def sign_chance(d: Sequence[float], population: int, level: float) -> float:
    """Predictive chance that the sign-flip test finds the mean of ``d`` above zero on all ``population`` questions.

    ``d`` holds the differences answered so far: parent - candidate for a kind's guard (a significant loss), candidate -
    parent for a gain. Where two or more questions differ, :func:`outlook` with the spread observed. Where fewer differ
    there is no spread to see, and the normal model with :func:`agreement_floor`'s spread overstates the chance many
    times (0.03 with 121 of 135 questions answered and none changed; 0.2 for a revision that changed none of 25 of 250):
    the remaining questions are counted instead. Each differs with a chance drawn from what was seen (the posterior
    under a Jeffreys prior: Beta(k + 1/2, n - k + 1/2) for k of n), and every one that differs is taken as a whole point
    in the test's direction, the most it can be; the chance is that of at least as many such points as the sign-flip
    test needs at ``level``.
    """
    n = len(d)
    rest = population - n
    if n == 0 or rest <= 0:
        raise ValueError(f"a sign chance needs some answered and some remaining questions ({n} of {population})")
    changed = [x for x in d if abs(x) > TINY]
    if len(changed) >= 2:
        return outlook(d, population, level).predictive
    need = next((m for m in range(rest + 1) if sign_flip_p([*changed, *([1.0] * m)]) <= level), None)
    if need is None:
        return 0.0
    k = len(changed)
    return float(stats.betabinom.sf(need - 1, rest, k + 0.5, n - k + 0.5))


VIDEO_DRAWS = 4000
"""Draws of the remaining questions in :func:`video_chance` (seeded: the same rung gives the same chance)."""


def video_chance(d: Sequence[float], videos: Sequence[str], sizes: Mapping[str, int], level: float,
                 bound: float = 0.0, seed: int = 0, spreads: Literal["posterior", "moments"] = "posterior") -> float:
    """Predictive chance that the test over videos (``significance.video_t``) passes on the whole selection set.

    ``d``: the differences answered so far, ``videos``: their videos, ``sizes``: every selection video's number of
    questions; ``bound``: 0 for a gain, ``-margin`` for a cut (its lower bound over videos must clear it). As
    :func:`outlook`, the remaining questions are alike to those answered: each video's own mean fills its remaining
    ones, drawn from a normal-normal model (an answered video's mean shrunk towards all of theirs, a video not yet
    reached drawn around it), the videos' mean itself uncertain. The spreads within videos and between them are
    drawn on each draw from their posteriors (scaled inverse chi-square on their degrees of freedom), not taken at
    their estimates: eight videos say little about how much they differ, and taken as known, 1.9 % of simulated early
    acceptances were turned down by full validation at a threshold of 0.99 (0.8 % so; ``bench/video_futility.py``;
    ``spreads="moments"``: taken at their estimates, as until 2026-12-06). The final cluster-robust t is computed on
    each draw.
    """
    x = np.asarray(d, dtype=np.float64)
    ids = sorted(sizes)
    if len(ids) < 2 or len(x) == 0:
        return 1.0
    index = {v: i for i, v in enumerate(ids)}
    where = np.asarray([index[v] for v in videos])
    seen = np.bincount(where, minlength=len(ids)).astype(np.float64)
    sums = np.bincount(where, weights=x, minlength=len(ids))
    total = np.asarray([sizes[v] for v in ids], dtype=np.float64)
    answered = seen > 0
    means = np.where(answered, sums / np.maximum(seen, 1), 0.0)
    dof = max(1.0, len(x) - float(answered.sum()))
    within = max(math.sqrt(float(np.sum((x - means[where]) ** 2)) / dof),
                 spread(d, level) if answered.sum() < 2 else 0.0, 1e-9)
    rng = np.random.default_rng(seed)
    k = VIDEO_DRAWS
    g = float(answered.sum())
    drawn = spreads == "posterior"
    within_k = within * (np.sqrt(dof / rng.chisquare(dof, (k, 1))) if drawn else np.ones((k, 1)))  # within videos
    noise = within_k ** 2 / np.maximum(seen, 1)  # the variance of each answered video's mean about its own
    noise_mean = noise[:, answered].mean(axis=1, keepdims=True)
    between = float(np.var(means[answered], ddof=1)) if g > 1 else 0.0
    if g > 1:  # what the answered videos' means vary by: drawn, or taken as it is
        spread_of_means = (g - 1) * max(between, 1e-12) / rng.chisquare(g - 1, (k, 1)) if drawn else \
            np.full((k, 1), between)
    else:
        spread_of_means = noise_mean
    tau2 = np.maximum(0.0, spread_of_means - noise_mean)  # how much the videos' own means differ, drawn
    shrink = np.where(answered, tau2 / np.maximum(tau2 + noise, 1e-24), 0.0)  # normal-normal
    centre = float(x.mean()) + rng.standard_normal((k, 1)) * np.sqrt((tau2 + noise_mean) / g)
    own = centre + shrink * (means - centre) + rng.standard_normal((k, len(ids))) * np.sqrt(shrink * noise)
    theta = np.where(answered, own, centre + rng.standard_normal((k, len(ids))) * np.sqrt(tau2))
    rest = total - seen
    filled = sums + rest * theta + rng.standard_normal((k, len(ids))) * within_k * np.sqrt(rest)
    n = float(total.sum())
    mean = filled.sum(axis=1) / n
    var = cr2_variance(filled - total * mean[:, None], total)
    t = (mean - bound) / np.sqrt(np.maximum(var, 1e-24))
    return float(np.mean(t >= stats.t.ppf(1 - level, len(ids) - 1)))


def within_chance(q: Sequence[float], population: int) -> float:
    """Predictive chance that the mean of a per-question quantity over all ``population`` questions is at most 0.

    ``q`` is known on the questions answered so far (for a cost bound: the candidate's cost minus the bound's share
    of the reference's, question by question); the remaining ones alike to them, as in :func:`outlook`.
    """
    n = len(q)
    rest = population - n
    if n == 0:
        raise ValueError("a chance needs some answered questions")
    total = sum(q)
    if rest <= 0:
        return 1.0 if total <= TINY else 0.0
    mean = total / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in q) / (n - 1)) if n > 1 else abs(mean)
    scale = max(sd, 1e-9) * math.sqrt(rest * (1 + rest / n))
    return float(stats.t.cdf((-total - rest * mean) / scale, max(1, n - 1)))
