"""Stochastic curtailment: what part of the selection set says about full validation's verdict on all of it.

Full validation judges a candidate on all N selection questions; multi-fidelity validation has the paired differences
of n of them (a rung). The final test reads the mean difference over all N, so the unknown part is the sum over the
other N - n questions. Two probabilities of the final test passing, by the normal approximation of that sum:

- **under the null** (:attr:`Outlook.null`): the remaining questions hold no gain (for a cost cut: a loss of exactly
  the margin). When even then full validation would pass with probability >= ``curtail``, the candidate is accepted
  early; stopping this way exceeds the test's level by at most a factor 1 / ``curtail`` (Lan, Simon & Halperin 1982,
  "Stochastically curtailed tests in long-term clinical trials").
- **predictive** (:attr:`Outlook.predictive`): the remaining questions' mean unknown around the observed one (a flat
  prior: its spread grows with (N - n) / n). Below ``futility`` the candidate stops as a clear loser; futility stops
  only lower the level.

The spread of a per-question difference is the observed one, floored at what n all-agreeing questions can show
(:func:`videvolve.search.significance.agreement_floor`): a cut that changed nothing on 20 questions is not certain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

from videvolve.search.significance import agreement_floor


@dataclass(frozen=True)
class Outlook:
    """The chances that full validation passes a candidate, from the questions answered so far."""

    null: float
    """Probability of passing if the remaining questions hold nothing (the null at its boundary)."""
    predictive: float
    """Probability of passing with the remaining questions' mean unknown, around the observed mean."""


def spread(d: Sequence[float], level: float) -> float:
    """Per-question standard deviation of the differences, at least what n agreeing questions can hide."""
    n = len(d)
    floor = math.sqrt(agreement_floor(n, level)) if n else 1.0
    if n < 2:
        return max(floor, 1e-9)
    mean = sum(d) / n
    return max(math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)), floor, 1e-9)


def outlook(d: Sequence[float], population: int, level: float, bound: float = 0.0) -> Outlook:
    """Chances that the one-sided test at ``level`` on all ``population`` questions finds the mean above ``bound``.

    ``d``: the paired differences (candidate - parent) seen so far; ``bound``: 0 for a gain, ``-margin`` for a cost
    cut's non-inferiority. The final test passes when the mean over all questions is at least
    ``bound + z_(1-level) x sd / sqrt(population)``.
    """
    n = len(d)
    rest = population - n
    if n == 0 or rest <= 0:
        raise ValueError(f"an outlook needs some answered and some remaining questions ({n} of {population})")
    sd = spread(d, level)
    need = population * (bound + float(stats.norm.ppf(1 - level)) * sd / math.sqrt(population)) - sum(d)
    null = 1 - float(stats.norm.cdf((need - rest * bound) / (sd * math.sqrt(rest))))
    trend = sum(d) / n
    predictive = 1 - float(stats.norm.cdf((need - rest * trend) / (sd * math.sqrt(rest * (1 + rest / n)))))
    return Outlook(null=null, predictive=predictive)
