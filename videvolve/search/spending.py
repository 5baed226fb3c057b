"""How the gate spends its level over a run: alpha-investing over decisions.

One selection set answers every decision of a run, so each decision is a test the search could overfit or read
single answers from. Alpha-investing (Foster & Stine, 2008) makes the run's decisions one budget: the wealth starts at
the gate's level; each decision is judged at half of the wealth (never above the level), divided equally among its
candidates (``--children``: a Bonferroni split, so the decision is one test at its level ``a``); a decision that
accepts none of them costs ``a / (1 - a)`` of it and one that accepts any earns the level back, once. A candidate
whose cost fits neither a gain's bound nor a cut's is rejected on its cost alone, which no answer decides: it spends
nothing (its entry has no level). Counting a decision, not each candidate, is what lets multi-fidelity decide as
full validation does: full validation accepts every candidate that passes and keeps the best, multi-fidelity stops
the others once the best is sure (they may be recorded rejected or pending), and the wealth must not depend on
which. A search that keeps proposing changes that do not
help runs out of wealth (its later decisions need overwhelming evidence), so neither noise nor probing pays; a
search that finds real gains keeps its power. The wealth is a pure function of the run's history, so a resumed run
continues where it stopped.

Within one decision, multi-fidelity validation judges the full rung at the decision's whole level and stops early
only where the verdict on the whole set is all but certain (:mod:`videvolve.search.curtailment`).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from videvolve.search.history import GateEntry

SHARE = 0.5
"""The share of the current wealth one decision may spend."""


def wealth(history: Iterable[GateEntry], level: float) -> float:
    """The wealth left after the judged decisions of ``history`` (entries with a ``level``), in order.

    A decision is a run of consecutive entries of one iteration and parent (its candidates, judged together).
    """
    w = level
    for _, group in groupby(history, key=lambda e: (e.iteration, e.parent)):
        judged = [e for e in group if e.level is not None and e.decision in ("accepted", "rejected")]
        if any(e.decision == "accepted" for e in judged):
            w += level
        elif judged:
            a = min(sum(e.level or 0.0 for e in judged), 1 - 1e-12)
            w -= a / (1 - a)
    return max(0.0, w)


def next_level(history: Iterable[GateEntry], level: float, spending: str = "investing") -> float:
    """The level the next decision is judged at."""
    if spending == "none":
        return level
    return min(level, SHARE * wealth(history, level))
