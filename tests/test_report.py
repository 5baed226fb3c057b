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
def test_report_shows_the_heldout_comparison_and_the_demo_says_what_it_showed(make_context, tmp_path: Path, capsys):
    run = tmp_path / "run"
    ctx = make_context(run_id="r", iterations=2)
    final = evolve(ctx)
    cmp = compare_on_test(run, SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2))
    html = build_report(run).read_text()
    assert "Held-out test split" in html and f"{cmp.score_p:.4f}" in html
    assert f"{cmp.best['frames_per_question']:.1f}" in html
    assert (run / "report" / "progress.png").stat().st_size > 10_000
    sentences = summary_sentences(cmp.to_dict(), entries(final["history"]))
    assert "target" in sentences[3]
    assert len(sentences) == (4 if sentences[3].endswith("is reached.") else 5)
    assert "revision" in sentences[0] and "visual tokens" in sentences[1] and "frames" in sentences[1]
    assert "p = " in sentences[2]
    assert f"of {cmp.videos} test video(s) gain, sign-flip p = {cmp.video_p:.4f}" in sentences[2]
    _compare_from_the_command_line(run, ctx.tasks, tmp_path, cmp.score_p, capsys)


def _compare_from_the_command_line(run: Path, tasks_path: str, tmp_path: Path, score_p: float, capsys) -> None:
    """``videvolve compare``: the same comparison (stored results reused), gold questions of one's own, and a
    refusal of questions about a video the run evolved or selected on."""
    import json

    from videvolve.cli import main
    from videvolve.tasks import read_tasks

    assert main(["compare", "--run", str(run)]) == 0
    stored = json.loads((run / "test" / "comparison.json").read_text())
    assert stored["score_p"] == pytest.approx(score_p) and stored["questions"].startswith("the test split")
    tasks = read_tasks(tasks_path)
    own = tmp_path / "own.jsonl"
    own.write_text("".join(t.model_copy(update={"split": None}).model_dump_json() + "\n"
                           for t in tasks if t.split == "test"))
    assert main(["compare", "--run", str(run), "--tasks", str(own)]) == 0
    stored = json.loads((run / "test" / "comparison.json").read_text())
    assert stored["questions"] == str(own) and stored["seed"]["n"] == sum(t.split == "test" for t in tasks)
    assert (run / "test" / "own").is_dir() and "compare --run" not in build_report(run).read_text()
    assert "not all of these labels are gold" not in capsys.readouterr().err
    own.write_text("".join(t.model_copy(update={"split": None, "label_source": "needles"}).model_dump_json() + "\n"
                           for t in tasks if t.split == "test"))
    assert main(["compare", "--run", str(run), "--tasks", str(own)]) == 0
    assert "not all of these labels are gold (compared:" in " ".join(capsys.readouterr().err.split())
    seen = tmp_path / "seen.jsonl"
    seen.write_text("".join(t.model_dump_json() + "\n" for t in tasks if t.split == "selection"))
    assert main(["compare", "--run", str(run), "--tasks", str(seen)]) == 2  # not held out: refused, named


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
    assert s[4] == "Why: no revision reached the selection set (see the iteration lines above)."


def test_the_demo_says_why_its_target_was_not_reached():
    from videvolve.search.history import GateEntry

    seed = {"frames_per_question": 256.0, "image_tokens_per_question": 5120.0, "video_tokens_per_question": 0.0}
    gated = dict(parent="a", decision="rejected", reason="r", score=0.482, cost=5120.0, cand_cost=5311.0, n=190)
    history = [GateEntry(iteration=0, candidate="b", operator="raise_resolution", cand_score=0.539, p_gain=0.0608,
                         level=0.025, **gated),
               GateEntry(iteration=1, candidate="c", operator="sparser_sampling", cand_score=0.405, **gated),
               GateEntry(iteration=2, candidate="d", operator="lucky_on_a_rung", cand_score=0.9,
                         **{**gated, "n": 19})]  # stopped on a first rung: never the closest
    nothing = {"seed": seed, "best": seed, "score_diff": 0.0, "score_p": 1.0, "mcq_p": None}
    why = summary_sentences(nothing, history, detectable=0.071)[4]
    assert why.startswith("Why: the closest revision, raise_resolution (iteration 1), scored +0.057 on 190 ")
    assert "p = 0.0608 against the gate's level 0.025" in why and "detects gains of about +0.071" in why
    history[0] = history[0].model_copy(update={"decision": "accepted"})
    best = {**seed, "image_tokens_per_question": 5311.0}
    unconfirmed = summary_sentences({**nothing, "best": best, "score_diff": 0.01, "score_p": 0.4}, history)
    assert unconfirmed[4].startswith("Why: what the selection set showed did not hold on the test split (+0.010")
    costly = summary_sentences({**nothing, "best": {**seed, "image_tokens_per_question": 6000.0},
                                "score_diff": 0.1, "score_p": 0.001}, history)
    assert "1.17x the seed's visual tokens" in costly[4]


def test_the_demo_names_only_the_revisions_the_evolved_harness_descends_from():
    from videvolve.search.history import GateEntry

    seed = {"frames_per_question": 256.0, "image_tokens_per_question": 5120.0, "video_tokens_per_question": 0.0,
            "version": "a"}
    best = {"frames_per_question": 113.0, "image_tokens_per_question": 5311.0, "video_tokens_per_question": 0.0,
            "version": "d"}
    history = [GateEntry(iteration=0, parent="a", candidate="b", operator="raise_resolution", decision="accepted",
                         reason="r"),
               GateEntry(iteration=0, parent="a", candidate="c", operator="add_refinement", decision="accepted",
                         reason="r"),  # passed too, but b scored higher: c never became the incumbent
               GateEntry(iteration=1, parent="b", candidate="d", operator="bisect_boundaries", decision="accepted",
                         reason="r")]
    s = summary_sentences({"seed": seed, "best": best, "score_diff": 0.14, "score_p": 0.0, "mcq_p": 0.0}, history)
    assert "tried 3 revision(s) of the uniform seed and kept 2 (raise_resolution, bisect_boundaries); the gate " \
           "accepted 3" in s[0]  # main: "kept 3 (raise_resolution, add_refinement, bisect_boundaries)."
