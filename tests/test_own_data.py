"""docs/guides/own-data.md end to end: renamed SynthWorld videos, a CSV, serve-sim on 127.0.0.1 in place of vLLM."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from videvolve.skill_library.harness import seed_path
from videvolve.tasks import read_tasks
from videvolve.testing import serve_sim

pytestmark = pytest.mark.slow  # full runs of the loop or the CLI: `make test-fast` leaves them out


def cli(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "videvolve", *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (args, r.stdout[-1500:], r.stderr[-1500:])
    return r


def test_own_data_walkthrough(small_world, tmp_path: Path):
    videos = tmp_path / "videos"
    videos.mkdir()
    names = {}
    for i, script in enumerate(small_world.scripts, start=1):  # our own footage: new names, no tasks file
        names[script.video_id] = f"match_{i:02d}.mp4"
        shutil.copy(small_world.root / "videos" / f"{script.video_id}.mp4", videos / names[script.video_id])
    with (tmp_path / "questions.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["video", "question", "options", "answer", "evidence"])
        for t in small_world.tasks:
            answer = t.answer if t.kind == "mcq" else "; ".join(f"{i.start}-{i.end}" for i in t.intervals) or "none"
            w.writerow([names[t.video_id], t.question, "|".join(t.options or []), answer,
                        "; ".join(f"{i.start}-{i.end}" for i in t.evidence)])
    harness = tmp_path / "uniform16"
    shutil.copytree(seed_path("uniform"), harness)
    (harness / "config.toml").write_text("n_frames = 16\nmax_side = 160\n")

    check = cli("videos", "check", str(videos), "--json")
    assert {row["status"] for row in json.loads(check.stdout)} == {"ok"}
    cli("tasks", "from-csv", str(tmp_path / "questions.csv"), "--videos", str(videos), "--out",
        str(tmp_path / "tasks.jsonl"))
    split = cli("tasks", "split", str(tmp_path / "tasks.jsonl"), "--fractions", "train=0.5,selection=0.25,test=0.25",
                "--out", str(tmp_path / "tasks.split.jsonl"))
    assert "eps = " in split.stderr  # a tiny selection set is flagged
    cli("tasks", "validate", str(tmp_path / "tasks.split.jsonl"))
    tasks = read_tasks(tmp_path / "tasks.split.jsonl")
    assert len(tasks) == len(small_world.tasks) and {t.video_id for t in tasks} == {n[:-4] for n in names.values()}

    with serve_sim() as base:
        model = ["--backend", "openai", "--base-url", base, "--model", "simvlm", "--image-format", "png"]
        cli("doctor", *model)
        before = json.loads(cli("eval", "--tasks", str(tmp_path / "tasks.split.jsonl"), "--split", "test",
                                "--harness", str(harness), *model, "--out", str(tmp_path / "evals" / "seed"),
                                "--json", "--no-cache").stdout)
        plan = cli("evolve", "--tasks", str(tmp_path / "tasks.split.jsonl"), "--run", str(tmp_path / "runs" / "m"),
                   "--seed-harness", str(harness), *model, "--iterations", "1", "--batch", "4", "--dry-run")
        assert "dry run" in plan.stdout
        cli("evolve", "--tasks", str(tmp_path / "tasks.split.jsonl"), "--run", str(tmp_path / "runs" / "m"),
            "--seed-harness", str(harness), *model, "--iterations", "1", "--batch", "4", "--memory",
            str(tmp_path / "memory"), "--embedder", "hashing", "--no-cache")
        cli("report", "--run", str(tmp_path / "runs" / "m"))
        listing = cli("harness", "list", "--run", str(tmp_path / "runs" / "m"))
        assert "seed" in listing.stdout
        cli("diagnoses", "list", "--run", str(tmp_path / "runs" / "m"), "--memory", str(tmp_path / "memory"))
        after = json.loads(cli("eval", "--tasks", str(tmp_path / "tasks.split.jsonl"), "--split", "test",
                               "--harness", str(tmp_path / "runs" / "m" / "best"), *model, "--out",
                               str(tmp_path / "evals" / "best"), "--json", "--no-cache").stdout)
        video = next(videos.glob("match_*.mp4"))
        answer = cli("ask", str(video), "When does the red circle appear?", "--harness",
                     str(tmp_path / "runs" / "m" / "best"), *model, "--json", "--no-cache")
    assert json.loads(answer.stdout)["outcome"] == "ok"
    assert before["n"] == after["n"] > 0 and before["errors"] == 0 and after["errors"] == 0
    assert (tmp_path / "runs" / "m" / "report" / "index.html").exists()
