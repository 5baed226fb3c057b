"""No dead ends for a new user (issue 20): `--run` means the run's id, a refused start leaves nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

from videvolve.cli import main
from videvolve.memory import ChromaStore, Diagnosis, HashingEmbedder


def diagnosis(id_: str, run_id: str) -> Diagnosis:
    return Diagnosis(id=id_, run_id=run_id, iteration=0, harness_id="h", task_id="t", video_id="v", kind="mcq",
                     category="missed_event", hypothesis="a short event fell between frames", applies_when="-",
                     preserve="-")


def test_diagnoses_list_run_filters_by_the_runs_id_not_its_folder_name(tmp_path: Path, capsys):
    memory, run = tmp_path / "memory", tmp_path / "demo" / "run"  # the demo's layout: folder "run", id "demo"
    run.mkdir(parents=True)
    (run / "settings.json").write_text(json.dumps({"run_id": "demo", "memory": str(memory)}))
    ChromaStore(memory, HashingEmbedder()).put([diagnosis("d1", "demo"), diagnosis("d2", "demo"),
                                                diagnosis("d3", "other")])

    def listed(*extra: str) -> list[str]:
        assert main(["diagnoses", "list", "--json", *extra]) == 0
        return sorted(d["id"] for d in json.loads(capsys.readouterr().out))

    assert listed("--run", str(run)) == ["d1", "d2"]  # main: [] (the folder name "run" is not the id "demo")
    assert listed("--run", "other", "--memory", str(memory)) == ["d3"]  # a run id works too
    assert main(["diagnoses", "list", "--run", str(tmp_path), "--memory", str(memory)]) == 2  # not a run directory
    assert "not a run directory" in capsys.readouterr().err
