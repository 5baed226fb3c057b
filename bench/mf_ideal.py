"""What any sequential rule sure of full validation's verdicts would read: the idealized evaluations of stored runs.

A multi-fidelity rule reads part of the selection set and stops when it is sure enough of what full validation
would decide on all of it. How soon it can be sure depends on how far that verdict lies from its threshold: after
n of N questions (the rest alike to those read), the whole set's statistic is known to within sqrt((N - n) / n) of
its standard error, so a verdict ``m`` standard errors from its threshold is sure to 1 - delta only once
m >= u sqrt((N - n) / n), u the normal (1 - delta) quantile: n / N >= u^2 / (u^2 + m^2)
(:func:`needed_share`). The idealized rule knows every candidate's margins on the whole set (the statistics of the
gate's tests: :class:`mf_agreement.Margin`, :attr:`mf_agreement.Stop.guard`) and reads each just far enough that
every figure its verdict rests on is sure to 1 - delta (a verdict resting on two or three figures errs up to about
twice delta), its parent (and the seed) as far as their farthest candidate, the first rung at least. It is a
yardstick, not a bound: a real rule does not know the margins (it must estimate them, which costs), the normal
model stands in for the gate's exact tests (the test over eight videos has heavier tails), and a rule may stop
earlier by luck where it then errs more often.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mf_agreement import Stop
from scipy import stats


def needed_share(margin: float, delta: float, floor: float = 0.0) -> float:
    """The share of the set read before a verdict ``margin`` standard errors from its threshold is sure to 1 - delta."""
    if math.isinf(margin):
        return floor
    u = float(stats.norm.ppf(1 - delta))
    return max(floor, u * u / (u * u + margin * margin))


def candidate_share(stop: Stop, delta: float, floor: float = 0.0) -> float:
    """The share an idealized rule reads of one candidate, each figure it rests on sure to 1 - delta.

    Accepted: the cheapest path on which its score and its cost pass, with the guard on each kind (the whole set
    where none does: the normal model stands in for the gate's exact tests). Rejected: the guard's failing
    (every path at once), or every path ruled out by whichever of its failing figures is sure first.
    """
    guard = needed_share(stop.guard, delta, floor)
    if stop.full == "accepted":
        passing = [max(needed_share(m.score, delta, floor), needed_share(m.cost, delta, floor), guard)
                   for m in stop.margins if m.score > 0 and m.cost > 0 and stop.guard > 0]
        return min(passing, default=1.0)
    ruled_out = [min((needed_share(x, delta, floor) for x in (m.score, m.cost) if x <= 0), default=1.0)
                 for m in stop.margins]
    by_paths = max(ruled_out, default=floor)
    return min(guard, by_paths) if stop.guard <= 0 else by_paths


def ideal_evaluations(stops: Sequence[Stop], seed: str, delta: float, floor: float) -> float:
    """Selection evaluations an idealized rule pays for one run's decisions (``stops``: its candidates, any order)."""
    if not stops:
        return 0.0
    population = stops[0].population
    own = {s.candidate: candidate_share(s, delta, floor) * population for s in stops}
    reads = {seed: floor * population, **own}
    for s in stops:  # a parent as far as its farthest candidate: the comparison is paired
        reads[s.parent] = max(reads.get(s.parent, 0.0), own[s.candidate])
    return sum(reads.values())
