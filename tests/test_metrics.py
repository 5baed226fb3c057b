from __future__ import annotations

from typing import Any

import pytest

from videvolve.metrics import (
    mcnemar,
    mcq_accuracy,
    mlvu_m_avg,
    normalize,
    paired_bootstrap,
    parse_extremewhen,
    render_extremewhen,
    score_charades,
    score_comet,
    score_extremewhen,
    set_iou,
    summarize_scores,
    task_score,
    wilson,
)
from videvolve.metrics.intervals import hull_iou, merge
from videvolve.metrics.mcq import (
    parse_longvideobench,
    parse_lsdbench,
    parse_lvbench,
    parse_mlvu,
    parse_video_holmes,
    parse_videomme,
    parse_videvolve,
)
from videvolve.tasks import Prediction, Task


def test_interval_helpers():
    assert merge([[5, 6], [1, 3], [3, 4], [2, 2.5]]) == [(1, 4), (5, 6)]
    assert merge([[4, 1]]) == [(1, 4)]
    assert normalize([[9, 2], [-3, 1], [50, 70], [5, 5]], duration=60) == [(0.0, 1.0), (2.0, 9.0), (50.0, 60.0)]
    assert hull_iou([0, 10], [5, 15]) == pytest.approx(5 / 15)
    assert hull_iou([0, 1], [2, 3]) == 0.0
    assert set_iou([[0, 5], [5, 10]], [[0, 10]]) == 1.0
    assert set_iou([[0, 2], [8, 10]], [[0, 10]]) == pytest.approx(0.4)
    assert set_iou([], []) == 1.0 and set_iou([], [[1, 2]]) == 0.0 and set_iou([[1, 2]], []) == 0.0


def test_extremewhen_parsers():
    text = "First I saw 10 - 12. The event happens in 1805 - 1822."
    assert parse_extremewhen(text, "lmms") == (1805, 1822)  # last match
    assert parse_extremewhen("It happens from 30 to 20 seconds", "lmms") == (20, 30)  # 'to', swapped
    assert parse_extremewhen("[1805, 1822]", "lmms") is None  # comma separator: not official
    assert parse_extremewhen("It starts 5 - 9.\nAlso 1-2", "vllm") == (5, 9)  # first in keyed sentences
    assert parse_extremewhen("Between 3 to 4", "vllm") is None  # the vLLM script has no 'to'
    for interval in [(1805, 1822), (12.5, 40.25), (0, 3)]:
        rendered = render_extremewhen(interval)
        assert parse_extremewhen(rendered, "lmms") == interval
        assert parse_extremewhen(rendered, "vllm") == interval


def test_extremewhen_hhmmss_is_misread_by_the_official_parser():
    assert parse_extremewhen("00:30:05 to 00:30:22", "lmms") == (0.0, 5.0)


def test_extremewhen_scores():
    rows: list[dict[str, Any]] = [{"correct_interval": [10, 20], "response": "10 - 20"},
            {"correct_interval": [10, 20], "response": "15 - 20"},
            {"correct_interval": [10, 20], "response": "no idea"},
            {"correct_interval": [0, 10], "interval": [0, 3]}]
    out = score_extremewhen(rows)
    assert out["miou"] == pytest.approx((1 + 0.5 + 0 + 0.3) / 4)
    assert out["R@0.5"] == pytest.approx(0.5)  # 0.5 counts: '>='
    assert out["R@0.3"] == pytest.approx(0.75)
    assert out["parse_fail"] == pytest.approx(0.25)


def test_charades():
    out = score_charades([(0, 7), None, (20, 30)], [[0, 10], [0, 10], [25, 35]])
    assert out["R@0.7"] == pytest.approx(1 / 3) and out["R@0.3"] == pytest.approx(2 / 3)
    assert out["miou"] == pytest.approx((0.7 + 0 + 5 / 15) / 3)


def test_comet_unverified_formulas():
    preds = [[[0, 10], [20, 30]], [[0, 10]], [], [[5, 6]]]
    gts = [[[0, 10], [21, 30]], [[50, 60]], [], []]
    out = score_comet(preds, gts)
    assert out["verified"] is False
    assert out["miou"] == pytest.approx(((1 + 0.9) / 2 + 0) / 2)
    assert out["f1@0.5"] == pytest.approx((1.0 + 0.0) / 2)
    assert out["negative_rejection_rate"] == 0.5 and out["positive_coverage"] == 1.0
    assert out["rejection_f1"] == pytest.approx(100 * 2 * 0.5 * 1.0 / 1.5)
    assert out["count_mae"] == pytest.approx((0 + 0 + 0 + 1) / 4) and out["count_obo"] == 1.0


def test_mcq_parsers_follow_each_benchmark():
    assert parse_videomme("Based on the video, the answer is C") == "B"  # first A-D anywhere: 'Based'
    assert parse_videomme("The best answer is D.") == "D"
    assert parse_videomme("the eleven words here contain no capital letter at all right now ok") == ""
    assert parse_lsdbench("A is tempting but D") == "D"
    assert parse_lsdbench("ABCD") == ""
    assert parse_video_holmes("<think>C?</think><answer>B: A man</answer>") == "A"  # alphabetical precedence
    assert parse_video_holmes("nothing") == "WRONG"
    assert parse_lvbench(" (C) 1363") == "C" and parse_lvbench("") == ""
    assert parse_mlvu("B) Red") == "B" and parse_mlvu(" B ") == "B"
    assert parse_longvideobench("D. A book") == ("D", False)
    letter, guessed = parse_longvideobench("no letter here")
    assert guessed and letter in "ABCDE"
    assert parse_videvolve("<think>maybe A</think>\nB") == "B"
    assert parse_videvolve("C") == "C"


def test_videvolve_parser_prefers_a_bare_letter_within_the_options():
    assert parse_videvolve("D", n_options=4) == "D"
    assert parse_videvolve("The answer is B.", n_options=4) == "B"
    assert parse_videvolve("E", n_options=4) == ""


def test_mcq_denominators():
    golds = ["A", "B", "C", "D"]
    responses = ["A", "B", "", "I cannot tell which one of these eleven words really applies"]
    assert mcq_accuracy("videomme", golds, responses)["accuracy"] == pytest.approx(1.0)  # answered only
    assert mcq_accuracy("videomme", golds, responses)["counted"] == 2
    assert mcq_accuracy("lsdbench", golds, responses)["accuracy"] == pytest.approx(0.5)  # unparsed = wrong
    lvb = mcq_accuracy("longvideobench", golds, responses, seed=3)
    assert lvb["random_guesses"] >= 1 and lvb == mcq_accuracy("longvideobench", golds, responses, seed=3)
    grouped = mcq_accuracy("lsdbench", golds, responses, groups=["x", "x", "y", "y"])
    assert grouped["by_group"] == {"x": 1.0, "y": 0.0}


def test_mlvu_m_avg_is_unweighted():
    assert mlvu_m_avg({"plotQA": 1.0, "needle": 0.0, "count": 0.5, "summary": 0.1}) == pytest.approx(0.5)


def test_wilson_mcnemar_bootstrap():
    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-3) and hi == pytest.approx(0.9433, abs=1e-3)
    assert wilson(0, 0) == (0.0, 1.0)
    m = mcnemar([True] * 10 + [False] * 10, [True] * 10 + [True] * 9 + [False])
    assert (m.a_only, m.b_only) == (0, 9) and m.p_value == pytest.approx(2 / 2**9)
    assert mcnemar([True, False], [True, False]).p_value == 1.0
    same = paired_bootstrap([0.2, 0.4], [0.2, 0.4])
    assert same.diff == 0 and same.p_value == 1.0
    better = paired_bootstrap([0.0] * 30, [1.0] * 25 + [0.0] * 5, seed=1)
    assert better.diff == pytest.approx(25 / 30) and better.p_value < 0.01
    assert better.ci_low <= better.diff <= better.ci_high


def test_a_gain_one_video_carries_is_not_significant_with_videos_as_the_units():
    """Per question, 40 gains on one video of four look certain; with videos as the units they are one in four."""
    from videvolve.metrics import cluster_sign_flip

    videos = [v for v in "abcd" for _ in range(40)]
    seed = [0.0] * 160
    carried = [1.0] * 40 + [0.0] * 120  # every question of video a gains, nothing elsewhere
    assert paired_bootstrap(seed, carried).p_value < 0.001
    one = cluster_sign_flip(seed, carried, videos)
    assert (one.clusters, one.gaining) == (4, 1) and one.p_value == 1.0  # its sign is a coin flip, the rest are 0
    everywhere = [1.0 if i % 4 == 0 else 0.0 for i in range(160)]  # the same number of gains, on every video
    eight = cluster_sign_flip([0.0] * 320, everywhere * 2, [v for v in "abcdefgh" for _ in range(40)])
    assert (eight.clusters, eight.gaining) == (8, 8) and eight.p_value == pytest.approx(2 / 2**8)
    assert cluster_sign_flip(seed, seed, videos).p_value == 1.0


def _task(kind, answer, tid="t"):
    if kind == "mcq":
        return Task(id=tid, video_id="v", video="v.mp4", kind="mcq", question="q", options=["a", "b"],
                    answer=answer, duration=10)
    return Task(id=tid, video_id="v", video="v.mp4", kind="grounding", question="q", answer=answer, duration=10)


def test_task_score_for_the_gate():
    assert task_score(_task("mcq", "B"), Prediction(task_id="t", kind="mcq", answer="B")) == 1.0
    assert task_score(_task("mcq", "B"), Prediction(task_id="t", kind="mcq", answer="A")) == 0.0
    assert task_score(_task("mcq", "B"), None) == 0.0
    absent = _task("grounding", [])
    assert task_score(absent, Prediction(task_id="t", kind="grounding", answer=[])) == 1.0  # correct rejection
    assert task_score(absent, Prediction(task_id="t", kind="grounding", answer=[[1, 2]])) == 0.0
    g = _task("grounding", [[0, 4]])
    assert task_score(g, Prediction(task_id="t", kind="grounding", answer=[[2, 6]])) == pytest.approx(2 / 6)
    assert task_score(g, Prediction(task_id="t", kind="grounding", answer=None)) == 0.0


def test_summarize_scores():
    tasks = [_task("mcq", "A", "m1"), _task("mcq", "B", "m2"), _task("grounding", [[0, 4]], "g1"),
             _task("grounding", [], "g2")]
    preds = [Prediction(task_id="m1", kind="mcq", answer="A"), None,
             Prediction(task_id="g1", kind="grounding", answer=[[0, 2]]),
             Prediction(task_id="g2", kind="grounding", answer=[])]
    out = summarize_scores(tasks, preds)
    assert out["mcq"]["accuracy"] == 0.5 and out["unanswered"] == 1
    assert out["grounding"]["miou"] == pytest.approx(0.75) and out["grounding"]["rejection_accuracy"] == 1.0
    assert out["score"] == pytest.approx((1 + 0 + 0.5 + 1) / 4)
