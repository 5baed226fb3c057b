"""The report and the demo's closing words: the held-out comparison with its paired tests, three plain sentences."""

from __future__ import annotations

from pathlib import Path

import pytest

from videvolve.cli.demo import summary_sentences
from videvolve.config import RuntimeSettings
from videvolve.evaluation.experiment import compare_on_test
from videvolve.graph.driver import evolve
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.report import build_report
from videvolve.search.history import entries


@pytest.mark.slow
def test_report_shows_the_heldout_comparison_and_the_demo_says_what_it_showed(make_context, tmp_path: Path):
    run = tmp_path / "run"
    ctx = make_context(run_id="r", iterations=2)
    final = evolve(ctx)
    cmp = compare_on_test(run, SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2))
    html = build_report(run).read_text()
    assert "Held-out test split" in html and f"{cmp.score_p:.4f}" in html
    assert f"{cmp.best['frames_per_question']:.1f}" in html
    assert (run / "report" / "progress.png").stat().st_size > 10_000
    sentences = summary_sentences(cmp.to_dict(), entries(final["history"]))
    assert len(sentences) == 4 and "target" in sentences[3]
    assert "revision" in sentences[0] and "visual tokens" in sentences[1] and "frames" in sentences[1]
    assert "p = " in sentences[2]


def test_summary_sentences_name_the_operators_the_cost_ratio_and_the_verdict():
    from videvolve.search.history import GateEntry

    seed = {"frames_per_question": 256.0, "image_tokens_per_question": 5120.0, "video_tokens_per_question": 0.0}
    best = {"frames_per_question": 128.0, "image_tokens_per_question": 5376.0, "video_tokens_per_question": 0.0}
    history = [GateEntry(iteration=0, parent="a", candidate="b", operator="add_refinement", decision="accepted",
                         reason="r"),
               GateEntry(iteration=1, parent="b", candidate="c", operator="sparser_sampling", decision="rejected",
                         reason="r")]
    s = summary_sentences({"seed": seed, "best": best, "score_diff": 0.2, "score_p": 0.001, "mcq_p": 0.01}, history)
    assert "tried 2 revision(s)" in s[0] and "kept 1 (add_refinement)" in s[0]
    assert "1.05x the visual tokens" in s[1] and "128 frames" in s[1]
    assert "a gain we can trust" in s[2] and s[3].endswith("is reached.")
    s = summary_sentences({"seed": seed, "best": seed, "score_diff": 0.0, "score_p": 1.0, "mcq_p": None}, [])
    assert ("kept none" in s[0] and "cannot" in s[2]) or "not a difference" in s[2]
    assert "not reached: +0.000 (p = 1.0000) at 1.00x" in s[3]
