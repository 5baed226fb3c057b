"""Listings a person can copy from: piped tables never fold ids; every listing has --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from videvolve.memory import ChromaStore, Diagnosis, HashingEmbedder

LONG_ID = "diag-" + "0123456789abcdef" * 6  # far wider than an 80-column terminal


def run(*args: str) -> subprocess.CompletedProcess:
    # COLUMNS=60: a narrow terminal's width must not matter when stdout is a pipe
    return subprocess.run([sys.executable, "-m", "videvolve", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "60"})


def lineage_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run-with-a-long-name"
    run_dir.mkdir()
    rows = [{"version": "v000-" + "a" * 70, "parent": None, "iteration": 0, "decision": "seed", "score": 0.5,
             "cost": 1000.0},
            {"version": "v001-" + "b" * 70, "parent": "v000-" + "a" * 70, "iteration": 1, "operator": "denser_sampling",
             "decision": "accepted", "score": 0.625, "cost": 2000.0, "reason": "better on selection"}]
    (run_dir / "lineage.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir


@pytest.mark.slow
def test_piped_tables_keep_long_ids_on_one_line(tmp_path: Path):
    run_dir = lineage_run(tmp_path)
    r = run("harness", "list", "--run", str(run_dir))
    assert r.returncode == 0, r.stderr
    assert "v001-" + "b" * 70 in r.stdout and "denser_sampling" in r.stdout
    ChromaStore(tmp_path / "memory", HashingEmbedder()).put([Diagnosis(
        id=LONG_ID, run_id="r", iteration=0, harness_id="h", task_id="t", video_id="v", kind="mcq",
        category="missed_event", hypothesis="a short event fell between frames", applies_when="-", preserve="-")])
    listing = run("diagnoses", "list", "--memory", str(tmp_path / "memory"))
    assert listing.returncode == 0, listing.stderr
    assert LONG_ID in listing.stdout


@pytest.mark.slow
def test_harness_list_and_doctor_speak_json(tmp_path: Path):
    run_dir = lineage_run(tmp_path)
    r = run("harness", "list", "--run", str(run_dir), "--json")
    assert r.returncode == 0, r.stderr
    versions = json.loads(r.stdout)
    assert [v["decision"] for v in versions] == ["seed", "accepted"] and versions[1]["score"] == 0.625
    (run_dir / "mixture.json").write_text(json.dumps({"selection_questions": 8, "tiers": {
        "16": {"version": versions[0]["version"], "score": 0.5, "frames": 16.0, "why": "cheapest"}}}))
    mix = run("harness", "mixture", "--run", str(run_dir), "--json")
    assert json.loads(mix.stdout)["tiers"]["16"]["frames"] == 16.0
    doctor = run("doctor", "--json")
    checks = json.loads(doctor.stdout)
    assert checks and {"check", "status", "detail"} <= set(checks[0])
    assert doctor.returncode == (1 if any(c["status"] == "fail" for c in checks) else 0)
