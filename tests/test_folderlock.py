"""One process at a time per run or evaluation folder; a folder that vanishes stops the run, never scores a task."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from videvolve.config import RuntimeSettings
from videvolve.errors import StorageError
from videvolve.evaluation.solve import solve_tasks
from videvolve.folderlock import LOCK_NAME, FolderBusy, ensure_free, hold, remove_tree
from videvolve.graph.driver import evolve
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness

HOLDER = """
import sys, time
from pathlib import Path
from videvolve.folderlock import hold
with hold(Path(sys.argv[1]), "run folder"):
    print("held", flush=True)
    time.sleep(120)
"""


@contextmanager
def held_elsewhere(folder: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``folder`` until the block ends (then killed with SIGKILL)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_second_process_is_refused_and_a_killed_holder_leaves_no_stale_lock(tmp_path: Path):
    folder = tmp_path / "run"
    with held_elsewhere(folder) as proc:
        with pytest.raises(FolderBusy) as info, hold(folder, "run folder"):
            pass
        message = str(info.value)
        assert f"process {proc.pid}" in message and str(folder) in message and "another folder" in message
        with pytest.raises(FolderBusy):
            ensure_free(folder, "run folder")
    # the holder was killed with SIGKILL: the kernel released its lock
    with hold(folder, "run folder"):
        assert (folder / LOCK_NAME).exists()
    ensure_free(folder)


def test_holds_nest_and_are_shared_by_threads_of_one_process(tmp_path: Path):
    folder = tmp_path / "evals"
    seen: list[str] = []

    def worker() -> None:
        with hold(folder, "evaluation folder"):
            seen.append("thread")

    with hold(folder), hold(folder):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen == ["thread"]
    with held_elsewhere(folder), pytest.raises(FolderBusy), hold(folder):  # every hold above was released
        pass


def test_solve_refuses_an_evaluation_folder_another_process_writes(small_world: Any, tmp_path: Path, seed: Path):
    out = tmp_path / "evals"
    with held_elsewhere(out), pytest.raises(FolderBusy, match="evaluation folder"):
        solve_tasks(load_harness(seed), small_world.tasks[:2], SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(),
                    out)
    assert not (out / "results").exists()


def test_evolve_refuses_a_run_folder_another_process_holds(make_context: Any, tmp_path: Path):
    ctx = make_context()
    with held_elsewhere(Path(ctx.run_dir)), pytest.raises(FolderBusy, match="run folder"):
        evolve(ctx)
    assert not (Path(ctx.run_dir) / "settings.json").exists()  # nothing of the run was written


def test_the_cli_refuses_a_second_copy_of_a_run_before_saying_anything_else(make_context: Any, tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]):
    from videvolve.cli import main

    ctx = make_context()
    with held_elsewhere(Path(ctx.run_dir)):
        code = main(["evolve", "--tasks", ctx.tasks, "--run", ctx.run_dir, "--seed-harness", ctx.seed_harness,
                     "--memory", ctx.memory, "--iterations", "1"])
    got = capsys.readouterr()
    assert code == 2
    assert "run folder" in got.err and "in use by another videvolve process" in got.err, got.err
    assert "selection" not in got.err + got.out  # no power note for a run that will not start


class FolderDeletingVLM(SimVLM):
    """SimVLM that deletes the evaluation folder's traces on its first request (a user's ``rm -rf`` mid-run)."""

    def __init__(self, traces: Path) -> None:
        super().__init__()
        self.traces = traces

    def complete(self, messages: list[Any], tools: list[Any] | None = None) -> Any:
        shutil.rmtree(self.traces, ignore_errors=True)
        return super().complete(messages, tools)


def test_a_vanished_folder_stops_the_solve_and_scores_nothing(small_world: Any, tmp_path: Path, seed: Path):
    out = tmp_path / "evals"
    with pytest.raises(StorageError, match="deleted or moved"):
        solve_tasks(load_harness(seed), small_world.tasks[:1], FolderDeletingVLM(out / "traces"),
                    cost_model("qwen2.5-vl"), RuntimeSettings(), out)
    assert not list(out.glob("results/*.json"))  # the task is not scored: the run stops for a resume


def test_a_fresh_start_never_deletes_a_run_another_process_writes(tmp_path: Path):
    root = tmp_path / "world-uniform"
    run = root / "run"
    with held_elsewhere(run):
        with pytest.raises(FolderBusy):
            remove_tree(root, "benchmark run")
        assert run.exists()
    remove_tree(root)
    assert not root.exists()


MEMORY_HOLDER = """
import sys, time
from videvolve.memory import ChromaStore, HashingEmbedder
from videvolve.memory.records import Diagnosis
store = ChromaStore(sys.argv[1], HashingEmbedder())
store.put([Diagnosis(id="d1", run_id="other", iteration=0, harness_id="h", task_id="t1", video_id="v1",
                     kind="mcq", category="missed_event", hypothesis="the short event fell between two frames",
                     applies_when="-", preserve="-")])
print("held", flush=True)
time.sleep(120)
"""


def test_a_memory_another_run_writes_is_read_from_its_records_and_never_written(tmp_path: Path, make_context: Any):
    from videvolve.errors import UsageError
    from videvolve.memory import HashingEmbedder
    from videvolve.memory.store import InMemoryStore, open_store, read_store

    memory = tmp_path / "memory"
    proc = subprocess.Popen([sys.executable, "-c", MEMORY_HOLDER, str(memory)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(FolderBusy, match="--memory DIR"):  # Chroma's index has one writing process
            open_store(memory, HashingEmbedder())
        with pytest.raises(FolderBusy, match="diagnosis memory"):  # a second run on it stops before its folder
            evolve(make_context(memory=str(memory)))
        assert not (Path(make_context().run_dir) / "settings.json").exists()
        reader = read_store(memory, HashingEmbedder())
        assert isinstance(reader, InMemoryStore)
        assert [d.id for d, _ in reader.search("an event between frames")] == ["d1"]
        with pytest.raises(UsageError, match="read-only"):
            reader.put(reader.records())
    finally:
        proc.kill()
        proc.wait()
    store = open_store(memory, HashingEmbedder())  # the killed writer left no lock
    try:
        assert [d.id for d in store.records()] == ["d1"]
    finally:
        store.close()


def test_a_second_copy_of_one_run_is_told_about_the_run_folder_first(make_context: Any):
    ctx = make_context()
    with held_elsewhere(Path(ctx.memory)), held_elsewhere(Path(ctx.run_dir)), \
            pytest.raises(FolderBusy, match="the run folder"):
        evolve(ctx)
