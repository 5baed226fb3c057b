"""Iterations are numbered from 1 wherever a person reads them (the seed is 0): harness list, diagnoses, folders."""

from __future__ import annotations

import json
from pathlib import Path

from videvolve.cli import main
from videvolve.memory.embedders import HashingEmbedder
from videvolve.memory.records import Diagnosis, RevisionOutcome
from videvolve.memory.store import ChromaStore


def test_harness_list_counts_the_first_revision_as_iteration_1(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    rows = [{"version": "seedversion", "parent": None, "iteration": 0, "decision": "seed", "score": 0.5, "cost": 1.0},
            {"version": "firstrevision", "parent": "seedversion", "iteration": 0, "operator": "op_one",
             "decision": "rejected", "score": 0.4, "cost": 1.0},
            {"version": "secondrevision", "parent": "seedversion", "iteration": 1, "operator": "op_two",
             "decision": "accepted", "score": 0.6, "cost": 1.0}]
    (tmp_path / "lineage.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["harness", "list", "--run", str(tmp_path)]) == 0
    lines = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:]]
             for line in capsys.readouterr().out.splitlines() if line.count("│") > 4}
    assert lines["seedversion"][2] == "0" and lines["firstrevision"][2] == "1" and lines["secondrevision"][2] == "2"


def test_diagnoses_show_counts_from_1(tmp_path: Path, capsys) -> None:
    ChromaStore(tmp_path / "memory", HashingEmbedder()).put([Diagnosis(
        id="d1", run_id="r", iteration=0, harness_id="h", task_id="t", video_id="v", kind="mcq",
        category="missed_event", hypothesis="a short event fell between frames", applies_when="-", preserve="-")])
    assert main(["diagnoses", "show", "d1", "--memory", str(tmp_path / "memory")]) == 0
    assert "iteration 1," in capsys.readouterr().out


def test_diagnoses_show_rounds_what_the_revision_became(tmp_path: Path, capsys, monkeypatch) -> None:
    """``led to`` printed float noise (``d_score 0.19999999999999996``) and ``None`` for deltas never measured."""
    monkeypatch.setenv("COLUMNS", "200")
    outcome = RevisionOutcome(operator="op", decision="rejected", reason="r", d_score=0.19999999999999996,
                              d_cost=105.60000000000036)
    ChromaStore(tmp_path / "memory", HashingEmbedder()).put([
        Diagnosis(id="d1", run_id="r", iteration=0, harness_id="h", task_id="t", video_id="v", kind="mcq",
                  category="missed_event", hypothesis="-", applies_when="-", preserve="-", outcome=outcome),
        Diagnosis(id="d2", run_id="r", iteration=0, harness_id="h", task_id="t2", video_id="v", kind="mcq",
                  category="missed_event", hypothesis="-", applies_when="-", preserve="-",
                  outcome=RevisionOutcome(operator="op", decision="dropped", reason="static"))])
    assert main(["diagnoses", "show", "d1", "--memory", str(tmp_path / "memory")]) == 0
    assert "led to: op -> rejected (r); d_score +0.2000; d_cost +105.6" in capsys.readouterr().out
    assert main(["diagnoses", "show", "d2", "--memory", str(tmp_path / "memory")]) == 0
    assert "led to: op -> dropped (static)\n" in capsys.readouterr().out
