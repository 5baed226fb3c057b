"""The idealized yardstick of multi-fidelity's savings (``bench/mf_ideal.py``): its share and how it is paid."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from mf_agreement import Margin, Stop
from mf_ideal import candidate_share, ideal_evaluations, needed_share


def stop(candidate: str, parent: str, full: str, *margins: tuple[float, float], guard: float = math.inf) -> Stop:
    return Stop(run="r", candidate=candidate, full=full, read=100, population=100, distance=None, parent=parent,
                margins=tuple(Margin(score=s, cost=c) for s, c in margins), guard=guard)


def test_a_verdict_on_its_threshold_needs_the_whole_set_and_one_far_from_it_the_first_rung():
    assert needed_share(0.0, 0.01) == pytest.approx(1.0)
    assert needed_share(2.326348, 0.01) == pytest.approx(0.5, abs=1e-6)  # margin = u: half the set
    assert needed_share(40.0, 0.01, floor=0.1) == 0.1
    assert needed_share(math.inf, 0.01, floor=0.1) == 0.1


def test_a_rule_reading_the_needed_share_errs_at_about_the_stated_rate():
    """Finite population: 60 gains, 40 losses and 200 ties (2.0 SE above 0); a rule that reads the needed share in
    random orders and calls the sign of what it read is wrong about the whole set's sign about delta of the time
    (a read mean of exactly 0 counted half wrong: a coin decides a tie)."""
    population = np.array([1.0] * 60 + [-1.0] * 40 + [0.0] * 200)
    margin = population.mean() / (population.std(ddof=1) / math.sqrt(len(population)))
    rng = np.random.default_rng(7)
    for delta in (0.05, 0.2):
        n = round(needed_share(margin, delta) * len(population))
        read = rng.permuted(np.tile(population, (4000, 1)), axis=1)[:, :n].mean(axis=1)
        wrong = np.mean(read < 0) + np.mean(read == 0) / 2
        assert 0.7 * delta <= wrong <= 1.3 * delta, (delta, n, wrong)


def test_an_accepted_candidate_needs_its_figures_and_the_guard_sure_and_a_rejected_one_every_path_ruled_out():
    u = 2.326348  # margin reading half the set at delta 0.01
    assert candidate_share(stop("c", "p", "accepted", (10.0, u)), 0.01) == pytest.approx(0.5, abs=1e-6)
    assert candidate_share(stop("c", "p", "accepted", (10.0, u), (u * 3, 50.0)), 0.01) == pytest.approx(0.1, abs=1e-6)
    assert candidate_share(stop("c", "p", "accepted", (10.0, 10.0), guard=u), 0.01) == pytest.approx(0.5, abs=1e-6)
    assert candidate_share(stop("c", "p", "accepted", (-1.0, 5.0), (5.0, -1.0)), 0.01) == 1.0  # the exact tests
    # the gain path fails on its score (half the set), the cut on its cost (sure at once): the later decides
    assert candidate_share(stop("c", "p", "rejected", (-u, 5.0), (1.0, -100.0)), 0.01, floor=0.1) == \
        pytest.approx(0.5, abs=1e-6)
    assert candidate_share(stop("c", "p", "rejected", (3.0, 3.0)), 0.01) == 1.0  # nothing fails: unknown
    assert candidate_share(stop("c", "p", "rejected", (3.0, 3.0), guard=-u), 0.01) == pytest.approx(0.5, abs=1e-6)


def test_parents_and_the_seed_are_read_as_far_as_their_farthest_candidate_in_any_order():
    stops = [stop("a", "seed", "accepted", (math.inf, math.inf)), stop("b", "a", "rejected", (0.0, 5.0))]
    # b: the whole set, and a with it; the seed as far as a (the first rung)
    for order in (stops, stops[::-1]):
        assert ideal_evaluations(order, "seed", 0.01, 0.1) == pytest.approx(10 + 100 + 100)
    assert ideal_evaluations([], "seed", 0.01, 0.1) == 0.0
