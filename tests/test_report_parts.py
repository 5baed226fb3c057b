"""The report's pieces without a run: the lineage tree's layout, rounded answers, the plot's axis and legend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from videvolve.report import plots
from videvolve.report.traces import _readable, rounded
from videvolve.search.events import read_events


def test_rejected_siblings_are_siblings_not_a_chain() -> None:
    versions = [{"version": "s", "parent": None, "decision": "seed", "iteration": 0}] + [
        {"version": f"c{i}", "parent": "s", "decision": "rejected", "iteration": i} for i in range(4)]
    rows = plots._tree_rows(versions)
    assert sorted(rows[f"c{i}"] for i in range(4)) == [0, 1, 2, 3]
    assert rows["s"] == 1.5  # the parent centred on its four children


def test_the_lineage_axis_runs_to_the_last_iteration_and_the_legend_names_what_occurs(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    seen = {}
    real_close = plt.close

    def keep(fig) -> None:
        ax = fig.axes[0]
        seen["ticks"] = [int(t) for t in ax.get_xticks()]
        seen["legend"] = [t.get_text() for t in ax.get_legend().get_texts()]
        real_close(fig)

    monkeypatch.setattr(plots.plt, "close", keep)
    versions: list[dict[str, Any]] = [
        {"version": "s", "parent": None, "decision": "seed", "iteration": 0},
        {"version": "a", "parent": "s", "decision": "accepted", "iteration": 0},
        {"version": "b", "parent": "a", "decision": "rejected", "iteration": 3}]
    plots.lineage(versions, tmp_path / "l.png", iterations=6)
    assert seen["ticks"] == [0, 1, 2, 3, 4, 5, 6] and sorted(seen["legend"]) == ["accepted", "rejected", "seed"]


@pytest.mark.parametrize("logged", [
    "{'answer': '[]', 'evidence_times': [5.8984375, 17.6953125]}",
    '{"answer": "[]", "evidence_times": [5.8984375, 17.6953125]}'])
def test_evidence_times_are_shown_to_two_decimals(logged: str) -> None:
    assert _readable(logged) == '{"answer": "[]", "evidence_times": [5.9, 17.7]}'
    assert rounded([[1.23456, 2.0]]) == [[1.23, 2.0]]


def test_the_incumbent_is_the_best_of_those_a_decision_accepted_not_the_last() -> None:
    from videvolve.search.history import GateEntry

    def entry(candidate: str, score: float, decision: str = "accepted", iteration: int = 0) -> GateEntry:
        return GateEntry(iteration=iteration, parent="s", candidate=candidate, decision=decision, reason="r",
                         cand_score=score, cand_cost=5300.0, cand_frames=113.0)

    history = [entry("high", 0.776), entry("low", 0.686), entry("worse", 0.70, "rejected", iteration=1)]
    seed = {"score": 0.603, "cost": 5120.0, "frames": 256.0}
    x, inc = plots.incumbent_steps(history, seed)
    assert x == [0, 1, 1, 2] and inc["score"] == [0.603, 0.776, 0.776, 0.776]  # main: 0.686 after iteration 1
    x, inc = plots.incumbent_steps(history, seed, kept={0: "low", 1: "low"})  # what the run's record says wins
    assert inc["score"][-1] == 0.686


def test_the_report_reads_the_incumbents_from_the_runs_record_events(tmp_path: Path) -> None:
    import json

    from videvolve.report.build import kept_versions
    from videvolve.rundir import RunDir

    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    events = [{"iteration": 0, "node": "gate", "event": "accepted", "candidate": "low"},
              {"iteration": 0, "node": "record", "event": "accepted", "candidate": "low", "incumbent": "high"},
              {"iteration": 1, "node": "record", "event": "rejected", "candidate": "x", "incumbent": "high"}]
    run.events.write_text("".join(json.dumps({"ts": 0.0, **e}) + "\n" for e in events))
    assert kept_versions(read_events(run.events)) == {0: "high", 1: "high"}


def test_a_trial_the_transcript_cut_is_shown_whole_from_the_workspace(tmp_path: Path) -> None:
    import json

    from videvolve.report.proposals import proposals
    from videvolve.rundir import RunDir

    trial = {"candidate": "abc123", "tasks": 40, "mean_score": 0.5,
             "per_task": [{"task": f"video{i:03d}-000", "score": 0.5, "trace": [{"event": "final"}] * 5}
                          for i in range(40)]}
    ws = tmp_path / "run" / "workspaces" / "1-0"
    (ws / "trials").mkdir(parents=True)
    (ws / "trials" / "01.json").write_text(json.dumps(trial, indent=1))
    cut = json.dumps(trial)[:4000]  # what the editor's transcript keeps
    (ws / "transcript.jsonl").write_text(json.dumps({"kind": "tool", "name": "trial", "args": {}, "ok": True,
                                                     "result": cut}) + "\n")
    [shown] = proposals(RunDir(tmp_path / "run"), tmp_path / "out")
    assert json.loads(shown["steps"][0]["result"]) == trial


def test_an_answer_the_trace_cut_still_reads_with_rounded_times() -> None:
    import re

    from videvolve.report.traces import _shortened

    times = ", ".join(str(0.5416666666666666 + k * 1.0833333333333333) for k in range(200))
    logged = ("{'answer': '[[22.24, 25.57]]', 'raw': '[[22.24, 25.57]]', 'evidence_times': [" + times)[:2000]
    shown = _shortened(_readable(logged))
    assert not re.search(r"\d\.\d{3,}", shown), shown
    assert "0.54, 1.62" in shown and shown.endswith("characters)")


def test_the_traces_are_the_best_harness_s_and_say_so(tmp_path: Path) -> None:
    import json
    import os

    from videvolve.report.traces import traces
    from videvolve.rundir import RunDir

    task = {"id": "v1-000", "video_id": "v1", "video": "v1.mp4", "kind": "mcq", "question": "Which?",
            "options": ["a", "b"], "answer": "A", "split": "train", "duration": 60.0}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    run = RunDir(tmp_path / "run")
    for age, version in enumerate(["best1", "trial2"]):  # an editor's trial evaluated after the best
        evals = run.evals(version, "train")
        (evals.path / "results").mkdir(parents=True)
        (evals.path / "traces").mkdir(parents=True)
        result = evals.path / "results" / "v1-000.json"
        result.write_text(json.dumps({"task_id": "v1-000", "score": float(age), "prediction": {"answer": "A"}}))
        os.utime(result, (1000 + age, 1000 + age))
        evals.trace("v1-000").write_text(json.dumps({"step": 1, "event": "final", "answer": "A"}) + "\n")
    settings = {"tasks": str(tmp_path / "tasks.jsonl")}
    assert [(t["version"], t["score"]) for t in traces(run, settings, tmp_path / "out", "best1")] == [("best1", 0.0)]
    assert [t["version"] for t in traces(run, settings, tmp_path / "out", "gone")] == ["trial2"]


def test_the_lineage_s_labels_cover_no_node_no_other_label_and_not_the_legend(tmp_path: Path, monkeypatch) -> None:
    boxes: dict[str, list] = {}
    real_close = plt.close

    def keep(fig) -> None:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        boxes["labels"] = [t.get_window_extent(renderer) for t in ax.texts]
        boxes["nodes"] = [ax.transData.transform(c.get_offsets()[0]) for c in ax.collections]
        boxes["legend"] = [ax.get_legend().get_window_extent(renderer)]
        real_close(fig)

    monkeypatch.setattr(plots.plt, "close", keep)
    op = "raise_resolution+fewer_frames"  # the longest names sit side by side: a chain and three siblings
    versions: list[dict[str, Any]] = [
        {"version": "seed0000", "parent": None, "decision": "seed", "iteration": 0, "score": 0.584},
        {"version": "acc10000", "parent": "seed0000", "decision": "accepted", "iteration": 0, "operator": op,
         "score": 0.837},
        *({"version": f"rej{i}0000", "parent": "acc10000", "decision": "rejected", "iteration": i, "operator": op,
           "score": 0.741} for i in (1, 2, 3)),
        {"version": "acc20000", "parent": "rej30000", "decision": "pending", "iteration": 4, "operator": op,
         "score": 1.0}]
    plots.lineage(versions, tmp_path / "l.png", iterations=5)
    labels = boxes["labels"]
    assert len(labels) == len(versions)
    for i, a in enumerate(labels):
        assert not any(a.overlaps(b) for b in labels[i + 1:] + boxes["legend"]), a
        assert not any(a.contains(x, y) for x, y in boxes["nodes"]), a


def test_a_run_stopped_before_its_first_decision_plots_the_seed_on_whole_iterations(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    seen: list = []
    real_close = plt.close

    def keep(fig) -> None:
        fig.canvas.draw()
        seen.append([([t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]],
                      [h.get_label() for h in ax.get_legend_handles_labels()[0]]) for ax in fig.axes])
        real_close(fig)

    monkeypatch.setattr(plots.plt, "close", keep)
    plots.progress([], {"score": 0.584, "cost": 5120.0, "frames": 256.0}, tmp_path / "p.png", {})
    plots.categories([{"iteration": 0, "category": "misperception"}], tmp_path / "c.png")
    (progress, categories) = seen
    assert all(float(t).is_integer() for ax in progress for t in ax[0])
    assert [labels.count("seed") for _, labels in progress] == [1, 1, 1]  # the seed drawn on each panel
    assert categories[0][0] == [1.0]


def test_the_progress_legend_covers_no_candidate(tmp_path: Path, monkeypatch) -> None:
    from videvolve.search.history import GateEntry

    seen = {}
    real_close = plt.close

    def keep(fig) -> None:
        fig.canvas.draw()
        ax = fig.axes[0]
        seen["legend"] = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
        seen["points"] = [ax.transData.transform(xy) for c in ax.collections for xy in c.get_offsets()]
        real_close(fig)

    monkeypatch.setattr(plots.plt, "close", keep)
    history = [GateEntry(iteration=1, parent="a", candidate="low", decision="rejected", reason="r",
                         cand_score=0.587, cand_cost=5250.0, cand_frames=58.9),  # bottom right: where it was
               GateEntry(iteration=0, parent="s", candidate="a", decision="accepted", reason="r",
                         cand_score=0.837, cand_cost=5311.0, cand_frames=113.0)]
    plots.progress(history, {"score": 0.584, "cost": 5120.0, "frames": 256.0}, tmp_path / "p.png")
    assert seen["points"] and not any(seen["legend"].contains(x, y) for x, y in seen["points"])


def test_a_damaged_diagnosis_line_in_the_middle_of_the_memory_is_skipped_by_the_report(tmp_path: Path,
                                                                                      caplog) -> None:
    """The report read diagnoses.jsonl with json.loads line by line: one damaged line in the middle (a torn write
    later appended to, an edit by hand) stopped the whole report, where the memory itself skips it with a warning."""
    import json

    from videvolve.memory import Diagnosis
    from videvolve.report.build import run_diagnoses
    from videvolve.rundir import RunDir

    def diagnosis(id_: str) -> str:
        return Diagnosis(id=id_, run_id="r", iteration=0, harness_id="h", task_id=f"t-{id_}", video_id="v",
                         kind="mcq", category="missed_event", hypothesis="between frames", applies_when="-",
                         preserve="-").model_dump_json()

    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "diagnoses.jsonl").write_text(diagnosis("d1") + "\n" + '{"id": "d2", "run_' + "\n" + diagnosis("d3")
                                            + "\n")
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    run.events.write_text(json.dumps({"ts": 0.0, "iteration": 0, "node": "investigate", "event": "diagnoses",
                                      "diagnosis_ids": ["d1", "d2", "d3"]}) + "\n")
    found = run_diagnoses(read_events(run.events), {"memory": str(memory), "run_id": "r"})
    assert [d["id"] for d in found] == ["d1", "d3"]
    assert "diagnoses.jsonl:2: skipping an unreadable diagnosis" in caplog.text


def test_the_report_names_the_gate_s_cost_as_the_run_counted_it() -> None:
    """A run under ``visual_tokens+text`` said "visual_tokens+text" without the weight it counted text at."""
    from videvolve.report.build import _cost_label
    assert _cost_label({"gate": {"cost_metric": "visual_tokens+text", "text_token_weight": 0.5}}) == \
        "visual tokens + 0.5 x text tokens"
    assert _cost_label({"gate": {"cost_metric": "frames"}}) == "frames"
    assert _cost_label({"cost_metric": "visual_tokens"}) == "visual tokens"  # a run from before the grouping
    assert _cost_label({}) == "visual tokens"
    assert _cost_label({"gate": {"cost_metric": "joules"}}) == "joules"  # another release's metric, as written
