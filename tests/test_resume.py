"""A run killed with SIGKILL mid-iteration and resumed ends exactly like an uninterrupted one, paying nothing twice."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from videvolve.skill_library.harness import seed_path

pytestmark = pytest.mark.slow  # full runs of the loop or the CLI: `make test-fast` leaves them out

KILLER = Path(__file__).with_name("evolve_killer.py")


def evolve(base: Path, world, seed: Path, kill_after: int, *extra: str) -> subprocess.CompletedProcess:
    args = ["evolve", "--tasks", str(world.tasks_path), "--run", str(base / "run"), "--seed-harness", str(seed),
            "--memory", str(base / "memory"), "--cache", str(base / "cache.sqlite"), "--iterations", "3",
            "--batch", "4", "--embedder", "hashing", "--concurrency", "1", *extra]
    return subprocess.run([sys.executable, str(KILLER), str(base / "calls.txt"), str(kill_after), "--", *args],
                          capture_output=True, text=True, timeout=600)


def outcome(base: Path) -> dict:
    lineage = [json.loads(x) for x in (base / "run" / "lineage.jsonl").read_text().splitlines()]
    final = {}
    for rec in lineage:
        final[rec["version"]] = {k: rec.get(k) for k in ("parent", "operator", "decision", "reason", "score", "cost")}
    diagnoses, ids = {}, set()
    for line in (base / "memory" / "diagnoses.jsonl").read_text().splitlines():
        d = json.loads(line)
        ids.add(d["id"])  # holds the run's own run_uid: two runs are compared by what each diagnosis is of
        diagnoses[(d["iteration"], d["harness_id"], d["task_id"])] = {
            k: d[k] for k in ("task_id", "iteration", "category", "hypothesis", "evidence", "outcome")}
    assert len(ids) == len(diagnoses)  # a resumed run writes a diagnosis again under the id it had
    best = json.loads((base / "run" / "best" / "manifest.json").read_text())["version_id"]
    calls = len((base / "calls.txt").read_text().splitlines())
    return {"lineage": final, "diagnoses": diagnoses, "best": best, "calls": calls}


def test_sigkill_and_resume_match_an_uninterrupted_run(small_world, tmp_path: Path):
    seed = tmp_path / "uniform16"
    shutil.copytree(seed_path("uniform"), seed)
    (seed / "config.toml").write_text("n_frames = 16\nmax_side = 160\n")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    straight = evolve(a, small_world, seed, 0)
    assert straight.returncode == 0, straight.stderr[-2000:]
    selection = sum(1 for t in small_world.tasks if t.split == "selection")
    killed = evolve(b, small_world, seed, selection + 12)  # past iteration 0, inside iteration 1
    assert killed.returncode == -9, (killed.returncode, killed.stderr[-2000:])
    events = [json.loads(x) for x in (b / "run" / "events.jsonl").read_text().splitlines()]
    assert not any(e["node"] == "record" and e.get("stop") for e in events)  # it really stopped mid-run
    resumed = evolve(b, small_world, seed, 0, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    ra, rb = outcome(a), outcome(b)
    assert ra["best"] == rb["best"]
    assert ra["lineage"] == rb["lineage"]
    assert ra["diagnoses"] == rb["diagnoses"] and ra["diagnoses"]
    assert rb["calls"] == ra["calls"] > 0  # no evaluation was paid for twice
