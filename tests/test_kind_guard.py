"""The guard on each kind is held at the gate's stated level, and multi-fidelity stops a sure loss early."""

from __future__ import annotations

from videvolve.evaluation.results import TaskResult
from videvolve.search.gate import guard_groups, paired_rule
from videvolve.search.kind_guard import FEW_CHANGES, may_yet_lose, sure_loss
from videvolve.tasks import Interval, Task


def _tasks(mcq: int, grounding: int) -> list[Task]:
    out = [Task(id=f"m{i}", video_id=f"v{i % 12}", video="v.mp4", kind="mcq", question="q", options=["a", "b"],
                answer="A", duration=10) for i in range(mcq)]
    out += [Task(id=f"g{i}", video_id=f"v{i % 12}", video="v.mp4", kind="grounding", question="When?",
                 answer=[Interval(start=0, end=1)], duration=10) for i in range(grounding)]
    return out


def _results(tasks: list[Task], scores: list[float]) -> list[TaskResult]:
    return [TaskResult(task_id=t.id, harness_id="h", kind=t.kind, outcome="ok", score=s,
                       usage={"frames": 1, "image_tokens": 100.0}) for t, s in zip(tasks, scores, strict=True)]


def _gain_with_a_grounding_loss() -> tuple[list[Task], list[float], list[float]]:
    """A large mcq gain (60 of 150 answers won, none lost) and a grounding loss of one-sided p 9 / 256 = 0.035."""
    tasks = _tasks(150, 150)
    parent = [0.0] * 150 + [1.0] * 150
    candidate = [1.0 if i < 60 else 0.0 for i in range(150)] + [1.0] * 150
    for i in range(7):
        candidate[150 + i] = 0.0
    parent[160] = 0.0  # one grounding question won, seven lost
    return tasks, parent, candidate


def test_a_kind_losing_at_the_stated_level_is_turned_down_whatever_level_the_gain_was_given():
    """Alpha-investing gives later decisions smaller levels; the guard tested at those let a kind lose more as the
    run went on (world 533973's second revision: grounding:both -0.166 on 33 selection questions, p 0.039 > 0.024;
    -0.223 on the test split, p 0.007)."""
    tasks, parent, candidate = _gain_with_a_grounding_loss()
    p, c = _results(tasks, parent), _results(tasks, candidate)
    kept = paired_rule(tasks, p, c, level=0.005, stated_level=0.05)
    assert not kept.accept and "grounding questions lose significantly" in kept.reason
    assert "p 0.0352 <= 0.05" in kept.reason
    loose = paired_rule(tasks, p, c, level=0.005, stated_level=0.005)  # the guard at the decision's level: kept
    assert loose.accept and loose.reason.startswith("gain")


def test_a_sure_loss_stops_a_candidate_only_on_enough_changed_answers():
    tasks = _tasks(0, 200)
    parent = [1.0] * 200
    lost = [0.0 if i % 4 == 0 else 1.0 for i in range(200)]  # a quarter of the answers lost
    read = 40  # a fifth of the set: ten answers lost, none won
    p, c = _results(tasks[:read], parent[:read]), _results(tasks[:read], lost[:read])
    why = sure_loss(p, c, tasks, 0.05, 0.01)
    assert why is not None and why.startswith("grounding questions lose 0.250 on 40 of 200")
    assert may_yet_lose(p, c, tasks, 0.05, 0.99)
    few = FEW_CHANGES - 1  # the same rate, on fewer changed answers than the normal model is trusted with
    p, c = _results(tasks[: 4 * few], parent[: 4 * few]), _results(tasks[: 4 * few], lost[: 4 * few])
    assert sure_loss(p, c, tasks, 0.05, 0.01) is None
    tiny = _tasks(0, 8)  # two of four read, both lost: the exact test on eight can still pass, it is not yet sure
    p, c = _results(tiny[:4], [1.0] * 4), _results(tiny[:4], [0.0, 0.0, 1.0, 1.0])
    assert sure_loss(p, c, tiny, 0.05, 0.01) is None
    whole = _tasks(0, 10)  # read in full: the exact test decides (eight of ten lost: p 1 / 256)
    p, c = _results(whole, [1.0] * 10), _results(whole, [0.0] * 8 + [1.0] * 2)
    assert sure_loss(p, c, whole, 0.05, 0.01) is not None
    p, c = _results(whole, [1.0] * 10), _results(whole, [0.0] * 4 + [1.0] * 6)  # p 1 / 16: not significant
    assert sure_loss(p, c, whole, 0.05, 0.01) is None


def test_a_kind_that_only_gains_is_never_a_sure_loss():
    tasks = _tasks(100, 0)
    p, c = _results(tasks[:50], [0.0] * 50), _results(tasks[:50], [1.0] * 20 + [0.0] * 30)
    assert sure_loss(p, c, tasks, 0.05, 0.01) is None
    assert not may_yet_lose(p, c, tasks, 0.05, 0.99)


NEAR_THE_LEVEL = [0.141, 0.176, 0.42, -0.464, 0.147, 0.222, 0.385, 0.219, -0.23, -0.074, -0.357, 0.158, 0.158, 0.254,
                  -0.191, -0.242, 0.558, 0.155, 0.624, 0.232]
"""Twenty grounding losses whose sign-flip p (resampled: more than 16 changed) lies at 0.049 under seed 0 and at 0.050
under seed 7: where the seed decides the guard at 0.05."""


def test_a_kind_read_in_full_is_judged_by_the_gate_s_own_test_under_the_run_s_seed():
    """Multi-fidelity's verdict on a kind read in full is full validation's, whatever the run's seed and the order
    in which the questions were read (it used seed 0, and the rung's shuffled order)."""
    tasks = _tasks(40, 20)
    parent = [1.0] * 40 + [0.5 + x for x in NEAR_THE_LEVEL]
    candidate = [1.0] * 40 + [0.5] * 20
    reading = list(reversed(range(60)))  # the rung's order, not the selection set's
    verdicts = set()
    for seed in (0, 7):
        full = paired_rule(tasks, _results(tasks, parent), _results(tasks, candidate), 0.05, seed=seed)
        gate_says = "grounding questions lose significantly" in full.reason
        read = [tasks[i] for i in reading]
        p = _results(read, [parent[i] for i in reading])
        c = _results(read, [candidate[i] for i in reading])
        early = sure_loss(p[:30], c[:30], tasks, 0.05, 0.01, seed)  # the grounding kind read in full, mcq not yet
        assert (early is not None) == gate_says, (seed, full.reason, early)
        verdicts.add(gate_says)
    assert verdicts == {True, False}  # the seed decides here: the test tells the two apart


def test_a_kind_no_question_of_which_was_read_yet_may_still_lose():
    """A rung of a tenth missed all ten questions of a kind a third of the time; multi-fidelity accepted early a gain
    that full validation turns down on that kind."""
    tasks = _tasks(150, 10)
    read = tasks[:150]  # every mcq question, no grounding one
    p, c = _results(read, [0.0] * 150), _results(read, [1.0] * 150)
    assert may_yet_lose(p, c, tasks, 0.05, 0.99)
    assert sure_loss(p, c, tasks, 0.05, 0.01) is None  # nothing seen of it: not a sure loss either
    few = _tasks(150, 4)  # four questions, all lost: p 1/16 > 0.05, it cannot lose significantly
    assert not may_yet_lose(p, c, few, 0.05, 0.99)


def test_on_a_speaking_world_a_kind_is_guarded_whole_as_well_as_by_evidence():
    """Every mcq answer lost, four of each kind of evidence (p 1/16 in each cell, above 0.05), for a grounding gain:
    the cells alone let it through; mcq as a whole loses at p 1/4096."""
    evidence = ["pictures", "words", "both"]
    tasks = [Task(id=f"m{i}", video_id=f"v{i % 4}", video="v.mp4", kind="mcq", question="q", options=["a", "b"],
                  answer="A", duration=10, meta={"evidence": evidence[i % 3]}) for i in range(12)]
    tasks += [Task(id=f"g{i}", video_id=f"v{i % 4}", video="v.mp4", kind="grounding", question="When?",
                   answer=[Interval(start=0, end=1)], duration=10, meta={"evidence": evidence[i % 3]})
              for i in range(90)]
    assert guard_groups(tasks[0]) == ("mcq", "mcq:pictures", "evidence:pictures")
    parent, candidate = [1.0] * 12 + [0.2] * 90, [0.0] * 12 + [0.6] * 90
    verdict = paired_rule(tasks, _results(tasks, parent), _results(tasks, candidate), level=0.025)
    assert not verdict.accept and verdict.reason.startswith("mcq questions lose significantly: -1.0000 on 12")
    read = tasks[:12] + tasks[12:40]  # multi-fidelity, all the mcq questions read: a sure loss of the kind
    why = sure_loss(_results(read, parent[:40]), _results(read, candidate[:40]), tasks, 0.05, 0.01)
    assert why is not None and why.startswith("mcq questions lose")
