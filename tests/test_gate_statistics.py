"""The gate's statistics against independent computations: the size of its non-inferiority test, p-values' floors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from videvolve.evaluation.results import TaskResult
from videvolve.metrics import paired_bootstrap
from videvolve.search.gate import gate_rule, paired_rule
from videvolve.search.significance import changed_share_for_margin, null_spread, power_note, t_bounds
from videvolve.tasks import Task


def _mcq(n: int) -> list[Task]:
    return [Task(id=f"t{i}", video_id=f"v{i}", video="v.mp4", kind="mcq", question="q", options=["a", "b"],
                 answer="A", duration=10) for i in range(n)]


def _results(tasks: list[Task], scores: list[float], cost: float) -> list[TaskResult]:
    return [TaskResult(task_id=t.id, harness_id="h", kind=t.kind, outcome="ok", score=s,
                       usage={"frames": 1, "image_tokens": cost}) for t, s in zip(tasks, scores, strict=True)]


def test_a_cut_that_loses_a_few_answers_and_gains_none_is_not_shown_within_the_margin():
    """5 answers lost of 500, none gained: the exact 97.5 % bound of the loss is 0.023 > 0.02 (Clopper-Pearson).

    The t bound with the observed spread put it at 0.019, and the cut was kept.
    """
    tasks = _mcq(500)
    parent = [1.0] * 250 + [0.0] * 250
    cut = [0.0 if i < 5 else s for i, s in enumerate(parent)]
    exact = stats.binomtest(5, 500, alternative="less").proportion_ci(0.975).high
    assert exact > 0.02
    # the guard on each kind at 0.025 too (5 of 5 changes lost: p 1 / 32), so that the margin's test is what decides
    d = paired_rule(tasks, _results(tasks, parent, 100.0), _results(tasks, cut, 70.0), level=0.025, margin=0.02,
                    stated_level=0.025)
    assert not d.accept and "loss may reach" in d.reason, d.reason
    at_stated = paired_rule(tasks, _results(tasks, parent, 100.0), _results(tasks, cut, 70.0), level=0.025)
    assert not at_stated.accept and "mcq questions lose significantly" in at_stated.reason  # the guard at 0.05


def test_the_null_spread_is_tangos_restricted_estimate_on_mcq():
    """Tango's score test for paired proportions: the restricted MLE of (p_gain, p_loss) with p_loss - p_gain = m."""
    gains, losses, n, m = 3, 5, 500, 0.02
    d = [1.0] * gains + [-1.0] * losses + [0.0] * (n - gains - losses)
    # the trinomial likelihood under the constraint, maximised on a fine grid of p_loss (p_gain = p_loss - m)
    grid = np.linspace(m + 1e-9, (1 + m) / 2 - 1e-9, 2_000_001)
    loglik = losses * np.log(grid) + gains * np.log(grid - m) + (n - gains - losses) * np.log(1 - 2 * grid + m)
    p_loss = grid[int(np.argmax(loglik))]
    assert null_spread(d, -m) == pytest.approx(np.sqrt(2 * p_loss - m - m * m), rel=1e-4)
    assert null_spread([1.0, 0.0, 0.5], -0.02) == 0.0  # nothing as bad as the null: no weights reach it


@pytest.mark.slow
@pytest.mark.parametrize(("n", "gain_rate"), [(500, 0.0), (224, 0.005), (1000, 0.0)])
def test_a_cut_losing_exactly_the_margin_is_kept_at_most_at_the_level(n: int, gain_rate: float):
    """Monte Carlo size of the non-inferiority test at its boundary (true loss = margin) on mcq, level 0.025.

    With the observed spread alone these were 0.062, 0.039 and 0.038.
    """
    rng = np.random.default_rng(11)
    level, margin, reps = 0.025, 0.02, 4000
    u = rng.random((reps, n))
    d = np.where(u < gain_rate + margin, -1.0, np.where(u < 2 * gain_rate + margin, 1.0, 0.0))
    kept = np.mean([t_bounds(list(x), level, margin)[0] >= -margin for x in d])
    assert kept <= level + 2 * np.sqrt(level * (1 - level) / reps), kept


def test_a_bootstrap_p_value_is_never_zero():
    """B resamples cannot show p < 1/(B+1); every resample on one side used to read as p = 0."""
    res = paired_bootstrap([0.0] * 30, [1.0] * 30, resamples=999)
    assert res.p_value == pytest.approx(2 / 1000)
    assert paired_bootstrap([0.0] * 30, [0.0] * 30).p_value == 1.0


def test_the_power_note_knows_when_no_cut_can_be_shown_within_the_margin():
    """120 agreeing questions still allow a loss of 0.030 at level 0.025 (the bound's floor): no cut passes a margin
    of 0.02, which the note put at "about 0.6 % of the answers"."""
    assert changed_share_for_margin(120, 0.025, 0.02) == 0.0
    text, _ = power_note(120, 0.025, 0.02)
    assert "out of reach of any cut" in text


@pytest.mark.slow
@pytest.mark.parametrize(("n", "level", "margin"), [(500, 0.025, 0.02), (1000, 0.025, 0.02), (224, 0.025, 0.04)])
def test_a_cut_changing_the_share_the_note_names_passes_about_four_times_in_five(n: int, level: float,
                                                                                  margin: float):
    """Monte Carlo power of the gate's own bound for a cut with no mean loss that changes the share the note names
    (half of them each way); the note is a normal approximation, the bound is on discrete answers."""
    share = changed_share_for_margin(n, level, margin)
    rng = np.random.default_rng(12)
    u = rng.random((2000, n))
    d = np.where(u < share / 2, 1.0, np.where(u < share, -1.0, 0.0))
    power = np.mean([t_bounds(list(x), level, margin)[0] >= -margin for x in d])
    assert 0.65 <= power <= 0.95, (share, power)


def test_a_cut_that_also_gains_is_kept_under_a_ceiling_below_its_cost():
    """``--cost-ceiling`` bounds gains; cuts are judged as without it. A cut to 0.7x that also gains was turned down
    under a ceiling of 0.5x ("gain but cost > the ceiling") while the same cut gaining nothing was kept."""
    tasks = _mcq(200)
    parent = [float(i % 2) for i in range(200)]
    for scores in (parent, [1.0] * 200):
        d = paired_rule(tasks, _results(tasks, parent, 100.0), _results(tasks, scores, 70.0), level=0.025,
                        ceiling=50.0)
        assert d.accept, d.reason
    assert gate_rule(0.5, 100, 0.6, 70, ceiling=50).accept and gate_rule(0.5, 100, 0.5, 70, ceiling=50).accept
    assert not gate_rule(0.5, 100, 0.6, 90, ceiling=50).accept  # neither within the ceiling nor a cut
