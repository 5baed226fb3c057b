"""The paired gate: gains it can tell from noise, non-inferior cost cuts, per-kind guards, a budget of decisions."""

from __future__ import annotations

import random

import pytest
from scipy import stats

from videvolve.evaluation.results import TaskResult
from videvolve.loop.context import Context, GateSettings
from videvolve.search.gate import gate_rule, paired_rule
from videvolve.search.history import GateEntry
from videvolve.search.screening import screen
from videvolve.search.significance import (
    FEW_VIDEOS,
    agreement_floor,
    changed_share_for_margin,
    min_detectable_gain,
    power_note,
    questions_for_gain,
    sign_flip_p,
    video_t,
)
from videvolve.search.spending import next_level, wealth
from videvolve.tasks import Interval, Task
from videvolve.testing import FakeRun
from videvolve.usage import VISUAL_TOKENS


def _tasks(n: int, grounding: int = 0) -> list[Task]:
    out = []
    for i in range(n):
        if i < grounding:
            out.append(Task(id=f"t{i}", video_id=f"v{i}", video="v.mp4", kind="grounding", question="When?",
                            answer=[Interval(start=0, end=1)], duration=10))
        else:
            out.append(Task(id=f"t{i}", video_id=f"v{i}", video="v.mp4", kind="mcq", question="q",
                            options=["a", "b"], answer="A", duration=10))
    return out


def _results(tasks: list[Task], scores: list[float], cost: float = 100.0) -> list[TaskResult]:
    return [TaskResult(task_id=t.id, harness_id="h", kind=t.kind, outcome="ok", score=s,
                       usage={"frames": 1, "image_tokens": cost}) for t, s in zip(tasks, scores, strict=True)]


def test_sign_flip_is_exact_on_few_discordant_questions():
    assert sign_flip_p([1, 1, 1] + [0] * 200) == pytest.approx(1 / 8)  # a t-test says 0.04 here
    assert sign_flip_p([0.0] * 50) == 1.0
    assert sign_flip_p([1] * 10 + [-1] * 10) > 0.5
    assert sign_flip_p([1] * 30 + [-1] * 5) < 1e-4  # Monte Carlo beyond 16 discordant questions


@pytest.mark.slow
def test_useless_candidates_are_accepted_at_most_at_the_level():
    """Candidates that reshuffle guesses (each changed question as likely won as lost) rarely pass."""
    rng = random.Random(7)
    tasks = _tasks(200)
    parent = [float(rng.random() < 0.45) for _ in tasks]
    accepted = 0
    for _ in range(300):
        cand = [float(rng.random() < 0.45) if rng.random() < 0.5 else p for p in parent]  # reshuffled guesses
        d = paired_rule(tasks, _results(tasks, parent), _results(tasks, cand), level=0.05)
        accepted += d.accept
        if sum(cand) > sum(parent):  # the paper's rule takes about half of them
            assert gate_rule(sum(parent) / 200, 100, sum(cand) / 200, 100).accept
    assert accepted / 300 <= 0.07


def test_a_real_gain_passes_and_one_lucky_question_does_not():
    tasks = _tasks(200)
    parent = [float(i % 2) for i in range(200)]
    better = [1.0 if i % 2 or i % 6 == 0 else 0.0 for i in range(200)]  # +0.17, never worse
    assert paired_rule(tasks, _results(tasks, parent), _results(tasks, better), level=0.025).accept
    one = list(parent)
    one[0] = 1.0  # the bucket attack's best case: one question the parent missed, now right
    assert not paired_rule(tasks, _results(tasks, parent), _results(tasks, one), level=0.05).accept
    assert gate_rule(0.5, 100, 0.505, 100).accept  # the paper's rule reads it as a gain


def test_cost_cuts_must_be_non_inferior_and_no_kind_may_lose():
    tasks = _tasks(200, grounding=80)
    parent = [float(i % 2) for i in range(200)]
    same = _results(tasks, parent, cost=70.0)
    assert paired_rule(tasks, _results(tasks, parent), same, level=0.025).accept  # 30 % cheaper, nothing lost
    worse = [0.0 if i % 4 == 1 else s for i, s in enumerate(parent)]  # loses a quarter of the questions
    cut = paired_rule(tasks, _results(tasks, parent), _results(tasks, worse, cost=70.0), level=0.025)
    assert not cut.accept and "lose" in cut.reason
    # a gain on mcq paid for by a significant loss on grounding
    mixed = [0.0 if i < 80 and i % 2 else (1.0 if i >= 80 else s) for i, s in enumerate(parent)]
    d = paired_rule(tasks, _results(tasks, parent), _results(tasks, mixed), level=0.025)
    assert not d.accept and "grounding questions lose significantly" in d.reason


def test_a_cut_that_changes_nothing_on_few_questions_is_not_certain():
    small = _tasks(20)
    parent = [float(i % 2) for i in range(20)]
    cut = paired_rule(small, _results(small, parent), _results(small, parent, cost=70.0), level=0.025)
    assert not cut.accept and "loss may reach" in cut.reason  # 20 agreeing questions cannot show a loss <= 0.02
    assert agreement_floor(20, 0.025) == pytest.approx(1 - 0.025 ** (1 / 20))
    assert agreement_floor(224, 0.025) < 0.02 < agreement_floor(120, 0.05)


def test_alpha_investing_spends_on_rejections_and_earns_on_acceptances():
    iterations = iter(range(1000))

    def entry(decision: str, level: float) -> GateEntry:  # each its own decision
        return GateEntry(iteration=next(iterations), parent="p", decision=decision, reason="", level=level)

    assert next_level([], 0.05) == pytest.approx(0.025)
    rejected = [entry("rejected", 0.025)]
    assert wealth(rejected, 0.05) == pytest.approx(0.05 - 0.025 / 0.975)
    assert next_level(rejected, 0.05) < 0.0125
    many = [entry("rejected", next_level([entry("rejected", 0.01) for _ in range(k)], 0.05)) for k in range(8)]
    assert next_level(many, 0.05) < 0.002  # probing the selection set runs out of budget
    assert next_level([entry("accepted", 0.025)], 0.05) == pytest.approx(0.05)  # capped at the level
    assert next_level([entry("rejected", 0.025)] * 9, 0.05, spending="none") == 0.05
    assert next_level([entry("pending", 0.025)], 0.05) == pytest.approx(0.025)  # not decided: not charged


def test_a_decision_among_several_candidates_is_one_test_of_the_budget():
    """Three candidates at a third of the decision's level each: one that accepts any earns the level back once,
    one that accepts none costs a / (1 - a) of the decision's level a; so the wealth does not depend on whether the
    candidates the best one beat were accepted too (full validation) or stopped as not the best (multi-fidelity)."""
    def decision(*outcomes: str, iteration: int = 0, level: float = 0.025) -> list[GateEntry]:
        return [GateEntry(iteration=iteration, parent="p", candidate=f"c{k}", decision=d, reason="",
                          level=level / len(outcomes)) for k, d in enumerate(outcomes)]

    best_only = decision("accepted", "rejected", "rejected")
    all_pass = decision("accepted", "accepted", "accepted")
    assert wealth(best_only, 0.05) == wealth(all_pass, 0.05) == pytest.approx(0.1)
    none = decision("rejected", "rejected", "rejected")
    assert wealth(none, 0.05) == pytest.approx(0.05 - 0.025 / 0.975)
    two = decision("rejected", level=0.01) + decision("rejected", iteration=1, level=0.01)  # two: charged twice
    assert wealth(two, 0.05) == pytest.approx(0.05 - 2 * 0.01 / 0.99)


def test_power_of_a_selection_set():
    assert min_detectable_gain(60, 0.025) > 0.1  # what the old demo's 60 questions could see
    n = questions_for_gain(0.05, 0.025)
    assert min_detectable_gain(n, 0.025) <= 0.05 < min_detectable_gain(n - 20, 0.025)
    # a cost cut with no mean loss is kept at margin 0.02 only if it changes next to none of 224 answers (224
    # agreeing questions still allow a loss of 0.016), about 5 % of 1000, and 4.6 % of 224 at margin 0.04
    share = changed_share_for_margin(224, 0.025, 0.02)
    assert share < 0.002 and 0.045 < changed_share_for_margin(1000, 0.025, 0.02) < 0.055
    assert 0.04 < changed_share_for_margin(224, 0.025, 0.04) < 0.05
    text, warn = power_note(224, 0.025, 0.02)
    assert "at most about 0.1% of the answers" in text and warn  # +0.066 is coarser than +0.05
    assert "degrees of freedom" not in text  # how many videos the questions come from is said only when known
    few, _ = power_note(224, 0.025, 0.02, videos=4)
    many, _ = power_note(224, 0.025, 0.02, videos=12)
    assert "only 4 selection video(s)" in few and "one or two videos" in few and "degrees of freedom" not in few
    assert "hold over the 12 selection videos" in many and "11 degrees of freedom" in many
    strict, _ = power_note(224, 0.025, 0.02, videos=4, min_videos=2)
    assert "3 degrees of freedom" in strict
    # the gain must hold over the videos too: its t test has G - 1 degrees of freedom, so few videos detect less
    assert min_detectable_gain(224, 0.025, videos=4) > min_detectable_gain(224, 0.025, videos=16) > \
        min_detectable_gain(224, 0.025) == min_detectable_gain(224, 0.025, videos=1)


def _by_video(videos: int, per: int) -> list[Task]:
    return [Task(id=f"t{v}-{i}", video_id=f"v{v}", video=f"v{v}.mp4", kind="mcq", question="q", options=["a", "b"],
                 answer="A", duration=10) for v in range(videos) for i in range(per)]


def test_the_gate_tests_over_videos_from_the_threshold_the_gate_itself_uses_by_default():
    """``--gate-min-videos`` defaults to a literal (settings load without scipy): it must stay ``FEW_VIDEOS``."""
    assert GateSettings().min_videos == FEW_VIDEOS


def test_the_test_over_videos_is_a_t_test_on_their_means_when_they_hold_alike():
    rng = random.Random(5)
    d = [rng.choice([-1.0, 0.0, 0.0, 1.0, 1.0]) for _ in range(8 * 30)]
    videos = [f"v{i // 30}" for i in range(len(d))]
    over = video_t(d, videos, 0.025)
    means = [sum(d[v * 30:(v + 1) * 30]) / 30 for v in range(8)]
    assert over is not None and over.videos == 8
    assert over.p_gain == pytest.approx(stats.ttest_1samp(means, 0.0, alternative="greater").pvalue)
    assert video_t(d, ["v0"] * len(d), 0.025) is None  # one video: nothing to generalize over
    with pytest.raises(ValueError, match="video ids"):
        video_t(d, videos[:-1], 0.025)


def test_a_gain_that_one_video_carries_is_not_kept_and_one_on_every_video_is():
    tasks = _by_video(8, 25)
    parent = [float(i % 2) for i in range(200)]
    one = [1.0 if i < 50 else s for i, s in enumerate(parent)]  # videos 0 and 1: +0.5, the others unchanged
    d = paired_rule(tasks, _results(tasks, parent), _results(tasks, one), level=0.025)
    assert d.stats is not None and d.stats.p_gain < 1e-4  # question by question it looks certain
    assert not d.accept and "does not hold over the 8 selection videos" in d.reason
    every = [1.0 if i % 4 == 0 else s for i, s in enumerate(parent)]  # +0.25 on each video alike
    kept = paired_rule(tasks, _results(tasks, parent), _results(tasks, every), level=0.025)
    assert kept.accept and "over 8 videos p" in kept.reason
    # from fewer than 8 videos the gate judges the questions alone, unless told otherwise (--gate-min-videos)
    few = _by_video(4, 50)
    assert paired_rule(few, _results(few, parent), _results(few, one), level=0.025).accept
    assert not paired_rule(few, _results(few, parent), _results(few, one), level=0.025, over_videos=True).accept


def test_a_cut_is_bounded_over_videos_too():
    tasks = _by_video(8, 30)
    parent = [float(i % 2) for i in range(240)]
    # one video loses a tenth of its answers, another gains as many: no loss question by question, but over four
    # videos the loss bound is wide
    swung = [0.0 if i < 60 and i % 10 == 1 else (1.0 if 60 <= i < 120 and i % 10 == 0 else s)
             for i, s in enumerate(parent)]
    cut = paired_rule(tasks, _results(tasks, parent), _results(tasks, swung, cost=70.0), level=0.025, margin=0.05)
    assert cut.stats is not None and cut.stats.lower > -0.05  # question by question it would pass
    assert not cut.accept and "loss may reach" in cut.reason


def test_sequential_rungs_stop_losers_early_and_decide_as_full_validation():
    rng = random.Random(3)
    n = 240
    parent = [float(rng.random() < 0.5) for _ in range(n)]
    scores = {"p": parent,
              "loser": [0.0 if p and rng.random() < 0.5 else p for p in parent],
              "winner": [1.0 if not p and rng.random() < 0.5 else p for p in parent],
              "noise": [float(rng.random() < 0.5) if rng.random() < 0.3 else p for p in parent]}
    ctx = Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=1, gate=GateSettings(validation="multi-fidelity"))
    decisions = {}
    costs = {}
    for mode in ("multi-fidelity", "full"):
        for cand in ("loser", "winner", "noise"):
            run = FakeRun(ctx.model_copy(update={"gate": ctx.gate.model_copy(update={"validation": mode})}), scores)
            (e,), _ = screen(run, "p", [cand], {}, 0)
            decisions[mode, cand] = e.decision
            costs[mode, cand] = len(run.evaluated[cand])
    assert {c: decisions["full", c] for c in ("loser", "winner", "noise")} == {
        "loser": "rejected", "winner": "accepted", "noise": "rejected"}
    assert all(decisions["multi-fidelity", c] == decisions["full", c] for c in ("loser", "winner", "noise"))
    assert costs["multi-fidelity", "loser"] == 24  # stopped at the first rung (10 %)
    assert costs["multi-fidelity", "winner"] < n  # an overwhelming winner is accepted before the full rung


def test_a_rejection_on_cost_alone_spends_none_of_the_wealth():
    """A candidate whose cost fits neither bound is rejected whatever its answers: no test, nothing spent."""
    n = 240
    parent = [float(i % 2) for i in range(n)]
    scores = {"p": parent, "dear": [1.0] * n, "noise": [float((i // 2) % 2) for i in range(n)]}
    frames: dict[str, int | list[int]] = {"p": 100, "dear": 250, "noise": 100}
    for mode in ("multi-fidelity", "full"):
        ctx = Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=1, gate=GateSettings(validation=mode))
        (dear,), _ = screen(FakeRun(ctx, scores, frames), "p", ["dear"], {}, 0)
        assert dear.decision == "rejected" and dear.level is None, (mode, dear.reason)
        assert wealth([dear], ctx.gate.level) == ctx.gate.level
        (noise,), _ = screen(FakeRun(ctx, scores, frames), "p", ["noise"], {}, 0, history=[dear])
        assert noise.decision == "rejected" and noise.level == next_level([], ctx.gate.level)
        assert wealth([dear, noise], ctx.gate.level) < ctx.gate.level  # a tested rejection spends


def test_gains_cannot_creep_past_the_seeds_cost():
    """Each gain within 1.1x its parent would let three of them reach 1.33x the seed; the seed's cost bounds it."""
    n = 240
    parent = [float(i % 2) for i in range(n)]
    better = [1.0] * n
    scores = {"seed": parent, "p": parent, "dearer": better, "within": better}
    frames: dict[str, int | list[int]] = {"seed": 100, "p": 108, "dearer": 118, "within": 109}
    for mode in ("multi-fidelity", "full"):
        ctx = Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=1, gate=GateSettings(validation=mode))
        (dearer,), _ = screen(FakeRun(ctx, scores, frames), "p", ["dearer"], {}, 0, seed_version="seed")
        assert dearer.decision == "rejected" and dearer.level is None, (mode, dearer.reason)  # 118 > 1.1 x 100
        assert "seed" in dearer.reason
        (alone,), _ = screen(FakeRun(ctx, scores, frames), "p", ["dearer"], {}, 0)
        assert alone.decision == "accepted"  # without the seed's bound, 118 <= 1.1 x 108 passes
        (within,), _ = screen(FakeRun(ctx, scores, frames), "p", ["within"], {}, 0, seed_version="seed")
        assert within.decision == "accepted", (mode, within.reason)


def test_a_cost_ceiling_lets_a_gain_spend_up_to_it_and_no_further():
    """``--cost-ceiling``: a gain may cost up to the user's budget (not 1.1x), and not beyond; cuts are as before."""
    n = 240
    parent = [float(i % 2) for i in range(n)]
    better = [1.0] * n
    scores = {"seed": parent, "p": parent, "within": better, "over": better, "cut": parent}
    frames: dict[str, int | list[int]] = {"seed": 100, "p": 100, "within": 240, "over": 260, "cut": 70}
    for mode in ("multi-fidelity", "full"):
        plain = Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=1, gate=GateSettings(validation=mode))
        (dearer,), _ = screen(FakeRun(plain, scores, frames), "p", ["within"], {}, 0, seed_version="seed")
        assert dearer.decision == "rejected", (mode, dearer.reason)  # 240 > 1.1 x 100
        ctx = Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=1,
                      gate=GateSettings(validation=mode, cost_ceiling=250))
        (within,), _ = screen(FakeRun(ctx, scores, frames), "p", ["within"], {}, 0, seed_version="seed")
        assert within.decision == "accepted" and "ceiling 250" in within.reason, (mode, within.reason)
        (over,), _ = screen(FakeRun(ctx, scores, frames), "p", ["over"], {}, 0, seed_version="seed")
        assert over.decision == "rejected" and over.level is None and "ceiling" in over.reason, (mode, over.reason)
        low = Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=1,
                      gate=GateSettings(validation=mode, cost_ceiling=50))
        (cut,), _ = screen(FakeRun(low, scores, frames), "p", ["cut"], {}, 0, seed_version="seed")
        assert cut.decision == "accepted", (mode, cut.reason)  # a cut above the ceiling is still a cut
    assert gate_rule(0.5, 100, 0.6, 240, ceiling=250).accept and not gate_rule(0.5, 100, 0.6, 240).accept
    assert not gate_rule(0.5, 100, 0.6, 260, ceiling=250).accept


def test_the_editor_prototypes_within_the_ceiling():
    """The heuristic editor's trial check and the rule it is told use the budget, not 1.1x the parent."""
    from videvolve.editing.base import GateTerms
    from videvolve.editing.heuristic import passes_on_trial
    from videvolve.search.gate import rule_text

    report = {"parent_mean_cost": 100.0, "mean_cost": 240.0, "mean_difference_vs_parent": 0.1}
    gate = GateTerms(alpha=0.1, beta=0.2, tolerance=0.02)
    assert not passes_on_trial(report, gate)
    budget = gate.model_copy(update={"ceiling": 250.0})
    assert passes_on_trial(report, budget)
    assert not passes_on_trial({**report, "mean_cost": 251.0}, budget)
    assert "budget of 250" in rule_text(0.1, 0.2, 0.02, VISUAL_TOKENS, ceiling=250.0)
    assert "within 10% of the seed" in rule_text(0.1, 0.2, 0.02, VISUAL_TOKENS)


def test_the_editor_applies_the_runs_own_rule_to_its_trials():
    """What an editor's trials are judged by comes from the gate's settings in one place (it was a dict of string
    keys, whose "eps" held the paired gate's margin and whose "rule" the heuristic compared to "paired")."""
    from videvolve.loop.context import GateSettings

    paired = GateSettings(margin=0.03, cost_ceiling=500.0).terms(50)
    assert (paired.tolerance, paired.spends_wealth, paired.ceiling) == (0.03, True, 500.0)
    rsi = GateSettings(rule="video-rsi").terms(50)
    assert (rsi.tolerance, rsi.spends_wealth, rsi.alpha, rsi.beta) == (0.02, False, 0.1, 0.2)
    assert GateSettings(rule="video-rsi", eps=0.1).terms(50).tolerance == 0.1


def test_results_out_of_line_with_the_questions_are_refused_not_compared():
    """A paired test of results out of line compares different questions: reordered, a noisy candidate (15 lost, 20
    won of 40) read as a significant gain."""
    tasks = _tasks(40)
    parent = _results(tasks, [float(i % 2) for i in range(40)])
    candidate = _results(tasks, [1.0] * 40)
    with pytest.raises(ValueError, match="same questions"):
        paired_rule(tasks, parent, list(reversed(candidate)), level=0.05)


def test_a_score_that_is_not_a_number_is_refused():
    with pytest.raises(ValueError, match="finite"):
        _results(_tasks(1), [float("nan")])
