"""The diagnosis memory is shared by runs: each run's diagnoses stay its own, whatever its folder is called."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from videvolve.graph import Context
from videvolve.graph.driver import evolve
from videvolve.report import build_report


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
