"""No dead ends for a new user (issue 20): `--run` means the run's id, a refused start leaves nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def evolve_args(tasks: Path, run: Path, seed: Path, *extra: str) -> list[str]:
    return ["evolve", "--tasks", str(tasks), "--run", str(run), "--seed-harness", str(seed), "--memory",
            str(run.parent / "memory"), "--embedder", "hashing", "--iterations", "1", "--batch", "2", *extra]


def test_a_refused_start_leaves_no_run_behind(small_world, seed: Path, tmp_path: Path, capsys):
    tasks, run = tmp_path / "tasks.jsonl", tmp_path / "run"
    good = small_world.tasks_path.read_text().splitlines()
    tasks.write_text("\n".join([*good[:3], '{"id": "broken", "kind": "mcq"}', *good[3:]]) + "\n")
    assert main(evolve_args(tasks, run, seed)) == 2
    assert "tasks.jsonl" in capsys.readouterr().err  # the error names the file
    assert not (run / "settings.json").exists()  # main: a stub that made the corrected rerun refuse
    tasks.write_text("\n".join(good) + "\n")
    assert main(evolve_args(tasks, run, seed, "--dry-run")) == 0, capsys.readouterr().err


def test_resume_refuses_a_different_tasks_file_and_accepts_the_same(small_world, seed: Path, tmp_path: Path,
                                                                      capsys):
    from videvolve.cli import build_parser
    from videvolve.cli.evolve_cmd import build_context

    run = tmp_path / "run"
    run.mkdir()
    ctx = build_context(build_parser().parse_args(evolve_args(small_world.tasks_path, run, seed)))
    (run / "settings.json").write_text(ctx.model_dump_json())  # what `evolve` writes when it starts
    copy, other = tmp_path / "copy.jsonl", tmp_path / "other.jsonl"
    copy.write_text(small_world.tasks_path.read_text())
    other.write_text("".join(small_world.tasks_path.read_text().splitlines(keepends=True)[:-1]))
    for tasks, code in ((small_world.tasks_path, 0), (copy, 0), (other, 2)):
        assert main(evolve_args(tasks, run, seed, "--resume", "--dry-run")) == code
    err = capsys.readouterr().err
    assert "--tasks" in err and str(other) in err and "--resume" in err  # main: the new file was silently ignored
    assert main(evolve_args(small_world.tasks_path, run, seed, "--resume", "--dry-run", "--batch", "3")) == 2
    assert main(evolve_args(small_world.tasks_path, run, seed, "--resume", "--dry-run", "--iterations", "5")) == 0


@pytest.mark.slow
def test_a_closed_pipe_is_a_quiet_exit(tmp_path: Path):
    import os
    import subprocess
    import sys

    run = tmp_path / "run"
    run.mkdir()
    rows = [{"version": f"v{i:04d}-" + "a" * 60, "parent": None, "iteration": i, "decision": "rejected", "score": 0.5,
             "cost": 1.0} for i in range(3000)]  # far more than a pipe holds
    (run / "lineage.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for extra in (["--json"], []):
        listing = subprocess.Popen([sys.executable, "-m", "videvolve", "harness", "list", "--run", str(run), *extra],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert listing.stdout is not None and listing.stderr is not None
        head = subprocess.run(["head", "-c", "10"], stdin=listing.stdout, capture_output=True, timeout=120)
        listing.stdout.close()  # only head reads it: once head ends, the pipe is closed
        err = listing.stderr.read().decode()
        listing.wait(timeout=120)
        assert len(head.stdout) == 10
        assert "Traceback" not in err and "bug in videvolve" not in err and "Exception ignored" not in err, err
        if extra:  # print(): the shell tools' status; a table's rich Console ends quietly on its own
            assert listing.returncode == 141, (listing.returncode, err)
