"""The diagnosis memory is shared by runs: each run's diagnoses stay its own, whatever its folder is called."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from videvolve.graph import Context
from videvolve.graph.driver import evolve
from videvolve.report import build_report


@pytest.mark.slow
def test_two_runs_of_the_same_name_keep_their_own_diagnoses(make_context: Callable[..., Context], tmp_path: Path):
    """``evolve --run exp1/run`` and ``evolve --run exp2/run`` (or a run started again where one was deleted) share
    the default memory and the run id ``run``. Diagnosis ids were made of the run id, iteration, harness and task:
    the second run's replaced the first's records in the memory (their outcomes too), and the first run's report
    listed the second run's diagnoses as its own."""
    memory = str(tmp_path / "memory")
    made = {}
    for parent in ("exp1", "exp2"):
        ctx = make_context(run_dir=str(tmp_path / parent / "run"), run_id="run", memory=memory, iterations=1)
        made[parent] = evolve(ctx)["diagnoses"]
    assert made["exp1"] and made["exp2"]
    lines = (Path(memory) / "diagnoses.jsonl").read_text(encoding="utf-8").splitlines()
    kept = {json.loads(line)["id"] for line in lines if line.strip()}
    assert not set(made["exp1"]) & set(made["exp2"])  # main: the same ids, so exp2's records replaced exp1's
    assert set(made["exp1"]) <= kept and set(made["exp2"]) <= kept
    html = build_report(tmp_path / "exp1" / "run").read_text()
    table = html.split("<h2>Diagnoses</h2>", 1)[1].split("</table>", 1)[0]
    assert table.count("<tr><td>") == len(made["exp1"])


@pytest.mark.slow
def test_a_heldout_comparison_of_a_former_best_is_not_shown_as_the_best(make_context: Callable[..., Context],
                                                                       tmp_path: Path, seed: Path):
    """``RUN/test/comparison.json`` names the best version it measured. After the run went on (``--resume`` with more
    iterations) and promoted another, the report still showed it as "the seed and the best harness"."""
    import shutil

    from videvolve.config import RuntimeSettings
    from videvolve.evaluation.experiment import compare_on_test
    from videvolve.models.cost import cost_model
    from videvolve.models.sim import SimVLM
    from videvolve.rundir import RunDir
    from videvolve.skill_library.harness import copy_harness

    run = tmp_path / "run"
    evolve(make_context(run_id="r", iterations=1))
    measured = compare_on_test(run, SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2)).best
    assert "The seed and the best harness on the test split" in build_report(run).read_text()
    later = tmp_path / "later"
    shutil.copytree(seed, later)
    (later / "config.toml").write_text("n_frames = 8\nmax_side = 160\n")
    RunDir(run).set_best(copy_harness(later, RunDir(run).harnesses))  # as record promotes a later revision
    html = build_report(run).read_text()
    assert "The seed and the best harness on the test split" not in html  # main: shown as the best's
    assert f"not the run's best harness any more (<code>{measured['version']}</code>)" in html


@pytest.mark.slow
def test_a_past_runs_outcome_is_shown_no_finer_than_its_own_selection_set_resolves(
        make_context: Callable[..., Context], tmp_path: Path):
    """Memory is shared by runs, and a later run's editor saw an earlier run's d_score rounded to the later run's
    selection set: a run with 400 selection questions read the difference a 16-question run measured to 0.025, finer
    than those 16 questions resolve (0.125). The outcome records the size of the selection set that measured it."""
    from videvolve.memory.records import Diagnosis, RevisionOutcome
    from videvolve.search.history import diagnosis_for_editor
    from videvolve.tasks import read_tasks

    ctx = make_context(memory=str(tmp_path / "memory"), iterations=1)
    made = evolve(ctx)["diagnoses"]
    assert made
    lines = (tmp_path / "memory" / "diagnoses.jsonl").read_text(encoding="utf-8").splitlines()
    mine = [Diagnosis.model_validate_json(line) for line in lines]
    outcomes = [d.outcome for d in mine if d.id in made and d.outcome is not None]
    n = sum(t.split == "selection" for t in read_tasks(ctx.tasks))
    assert outcomes and all(o.selection == n for o in outcomes)
    past = mine[0].model_copy(update={"outcome": RevisionOutcome(decision="rejected", d_score=0.2206, selection=16)})
    seen = diagnosis_for_editor(past, 400).outcome
    assert seen is not None and seen.d_score == 0.25  # main: 0.225, at the later run's 0.025
    coarse = diagnosis_for_editor(past, 4).outcome
    assert coarse is not None and coarse.d_score == 0.25  # a coarser own set: its own step (0.25)
