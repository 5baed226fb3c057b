"""A candidate's cost against the gate's bounds, over the selection videos (``videvolve.search.cost_bounds``)."""

from __future__ import annotations

import random

import pytest

from videvolve.loop.context import Context, GateSettings
from videvolve.search.cost_bounds import budget, fit, fit_all, fit_chance, gain_limits, scaled
from videvolve.search.screening import screen
from videvolve.testing import FakeRun


def test_a_cost_that_fits_on_the_mean_but_varies_by_video_misses_its_bound_over_them():
    """1.06x the parent on the mean, 0.9x to 1.25x by video: within 1.1x on the mean, not over 8 videos."""
    ratios = [0.9, 1.25, 0.95, 1.2, 0.92, 1.0, 1.18, 1.08]
    videos = [f"v{i % 8}" for i in range(320)]
    parent = [100.0] * 320
    mine = [100 * ratios[i % 8] for i in range(320)]
    bound = scaled(parent, 1.1, "(1+0.1) x 100.0")
    on_mean = fit(mine, bound, None, 0.05)
    assert on_mean.fits and on_mean.videos is None and on_mean.upper == pytest.approx(106.0)
    over = fit(mine, bound, videos, 0.05)
    assert not over.fits and over.videos == 8 and 110.0 < over.upper < 120.0
    even = fit([106.0] * 320, bound, videos, 0.05)  # the same mean on every video: nothing to pay
    assert even.fits and even.upper == pytest.approx(106.0)


def test_the_tightest_of_a_gains_bounds_decides_and_a_budget_replaces_them():
    parent, seed = [100.0] * 10, [90.0] * 10
    limits = gain_limits(parent, 0.1, seed)
    assert [round(b.mean, 6) for b in limits] == [110.0, 99.0]
    result, which = fit_all([100.0] * 10, limits, None, 0.05)
    assert not result.fits and "seed's" in which.text  # within its parent's bound, not the seed's
    result, which = fit_all([95.0] * 10, limits, None, 0.05)
    assert result.fits and "seed's" in which.text  # both fit: the one with the least room is named
    (only,) = gain_limits(parent, 0.1, seed, ceiling=250.0)
    assert only.mean == 250.0 and only.text == budget(250.0, 10).text


def test_the_chance_that_the_whole_set_fits_follows_what_the_videos_show():
    """Read on a few questions of every video: a cost far under the bound on every one all but surely fits; one
    over it on half the videos all but surely does not; each a chance, not a verdict."""
    rng = random.Random(3)
    sizes = {f"v{g}": 40 for g in range(8)}
    videos = [f"v{i % 8}" for i in range(64)]
    parent = [100.0] * 64
    bound = scaled(parent, 1.1, "")
    cheap = [95 + rng.gauss(0, 3) for _ in range(64)]
    assert fit_chance(cheap, bound, 320, videos, sizes, 0.05) > 0.99
    dear = [(100 if i % 2 else 125) + rng.gauss(0, 3) for i in range(64)]
    assert fit_chance(dear, bound, 320, videos, sizes, 0.05) < 0.05
    assert fit_chance(dear, bound, 320, None, None, 0.05) < 0.5  # the mean alone: 1.125x, over too


def _entry(operator: str, decision: str = "rejected", cand_cost: float = 5500.0, upper: float | None = 5800.0,
           cand_score: float = 0.8, parent: str = "p"):
    from videvolve.search.history import GateEntry

    return GateEntry(iteration=0, parent=parent, candidate=f"c-{operator}", operator=operator, decision=decision,
                     reason="r", score=0.6, cost=5120.0, cand_score=cand_score, cand_cost=cand_cost,
                     cost_bound=5632.0, cost_upper=upper)


def test_a_look_turned_down_on_its_cost_over_the_videos_is_tried_once_more_with_room_under_the_bound():
    """World 464444 (set W): the detect-then-identify look, 1.075x on the mean of 92 questions, was screened out on
    its cost over the videos and could never be proposed again on that parent. Now it may be, once, and its trial
    must fit the bound divided by how far its upper bound lay above its mean."""
    from videvolve.editing.base import GateTerms
    from videvolve.editing.heuristic import passes_on_trial
    from videvolve.nodes.edit import headroom_by_operator, tried_on

    first = _entry("identify_flagged+fewer_frames")
    assert tried_on([first], "p") == []  # once: it may come again
    assert tried_on([first, _entry("identify_flagged")], "p") == ["identify_flagged+fewer_frames", "identify_flagged"]
    assert tried_on([_entry("denser_sampling", cand_cost=5800.0)], "p") == ["denser_sampling"]  # over on the mean
    assert tried_on([_entry("sparser", cand_score=0.5)], "p") == ["sparser"]  # it lost: no reason to come again
    assert tried_on([_entry("plain", upper=None)], "p") == ["plain"]  # judged on the mean alone
    assert tried_on([first], "other") == []
    room = headroom_by_operator([first, _entry("read_transcript", "accepted", 5150.0, 5160.0)])
    assert room["identify_flagged"] == pytest.approx(5800 / 5500)
    assert room["read_transcript"] == pytest.approx(5160 / 5150)
    gate = GateTerms(alpha=0.1, beta=0.2, tolerance=0.02, headroom=room)
    report = {"parent_mean_cost": 5120.0, "mean_cost": 5500.0, "mean_difference_vs_parent": 0.2}
    assert passes_on_trial(report, gate, "denser_sampling")  # no headroom measured: the mean's bound
    assert not passes_on_trial(report, gate, "identify_flagged")  # 5500 x 1.055 > 5632
    assert not passes_on_trial(report, gate, "identify_flagged+fewer_frames")  # the same move
    assert passes_on_trial({**report, "mean_cost": 5300.0}, gate, "identify_flagged")


def test_a_cost_at_its_bound_on_every_question_read_fits_it_on_the_whole_set():
    """Sixteen frames a question under a ceiling of sixteen: full validation's fit passes (no excess); the predictive
    chance was a half on the mean and about the level over videos, so multi-fidelity could not accept such a gain
    early, and turned it down on its cost where --gate-level is below --futility."""
    at_bound = budget(16.0, 30)
    videos = [f"v{i % 10}" for i in range(30)]
    assert fit([16.0] * 30, at_bound, videos, 0.05).fits
    assert fit_chance([16.0] * 30, at_bound, 300, None, None, 0.05) == 1.0
    assert fit_chance([16.0] * 30, at_bound, 300, videos, {f"v{i}": 30 for i in range(10)}, 0.05) == 1.0
    over = [16.0] * 29 + [17.0]  # one question over its bound: no longer certain
    assert fit_chance(over, at_bound, 300, None, None, 0.05) < 1.0
    ctx = Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=3,
                  gate=GateSettings(validation="multi-fidelity", cost_ceiling=16, level=0.005))
    parent = [float((i // 10) % 2) for i in range(300)]
    decided = {}
    for mode in ("full", "multi-fidelity"):
        run = FakeRun(ctx.model_copy(update={"gate": ctx.gate.model_copy(update={"validation": mode})}),
                      {"p": parent, "c": [1.0] * 300}, videos=10)
        (entry,), _ = screen(run, "p", ["c"], {}, 0)
        decided[mode] = entry.decision
    assert decided == {"full": "accepted", "multi-fidelity": "accepted"}


def test_a_candidate_turned_down_on_its_cost_over_the_videos_spends_no_level_either_way():
    """Answers as its parent's, a cost whose mean fits the gain's bound (17.5 <= 17.6) but not over the videos: full
    validation charged the decision's level (its mean fitted), multi-fidelity nothing (on cost alone), so the run's
    later levels differed."""
    ctx = Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=3, gate=GateSettings(validation="multi-fidelity"))
    parent = [float((i // 10) % 2) for i in range(300)]
    frames: dict[str, int | list[int]] = {"p": 16, "c": [12 if i % 10 < 5 else 23 for i in range(300)]}
    for mode in ("full", "multi-fidelity"):
        run = FakeRun(ctx.model_copy(update={"gate": ctx.gate.model_copy(update={"validation": mode})}),
                      {"p": parent, "c": list(parent)}, frames=frames, videos=10)
        (entry,), _ = screen(run, "p", ["c"], {}, 0)
        assert entry.decision == "rejected" and entry.level is None, (mode, entry.level, entry.reason)
