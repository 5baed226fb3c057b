"""--executor ray: the same predictions and costs as local threads; a resumed Ray run pays for nothing twice."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from tests.conftest import run_context  # noqa: E402
from videvolve.config import ModelSettings, RuntimeSettings  # noqa: E402
from videvolve.evaluation.solve import solve_tasks  # noqa: E402
from videvolve.models.cache import ResponseCache  # noqa: E402
from videvolve.models.cost import cost_model  # noqa: E402
from videvolve.models.sim import SimVLM  # noqa: E402
from videvolve.skill_library.harness import load_harness  # noqa: E402

pytestmark = pytest.mark.slow  # full runs of the loop or the CLI: `make test-fast` leaves them out


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


@pytest.fixture()
def harness(seed: Path):
    return load_harness(seed)


def rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])


def test_ray_matches_local(small_world, harness, tmp_path: Path, local_ray):
    tasks = small_world.tasks[:8]
    settings = RuntimeSettings(concurrency=2)
    local = solve_tasks(harness, tasks, SimVLM(), cost_model("qwen2.5-vl"), settings, tmp_path / "local")
    remote = solve_tasks(harness, tasks, SimVLM(), cost_model("qwen2.5-vl"), settings, tmp_path / "ray",
                         executor="ray", model=ModelSettings())
    for a, b in zip(local, remote, strict=True):
        assert a.task_id == b.task_id and a.prediction == b.prediction and a.score == b.score
        for key in ("frames", "image_tokens", "cumulative_tokens", "requests"):
            assert getattr(a.usage, key) == getattr(b.usage, key), key


def test_resumed_ray_run_pays_for_nothing_twice(small_world, harness, tmp_path: Path, local_ray):
    tasks = small_world.tasks[:10]
    cache_path = tmp_path / "cache.sqlite"
    settings = RuntimeSettings()
    out = tmp_path / "run"
    first = solve_tasks(harness, tasks[:6], SimVLM(), cost_model("qwen2.5-vl"), settings, out,
                        ResponseCache(cache_path), executor="ray", model=ModelSettings())
    paid_first = rows(cache_path)
    stamps = {p.name: os.stat(p).st_mtime_ns for p in (out / "results").glob("*.json")}
    resumed = solve_tasks(harness, tasks, SimVLM(), cost_model("qwen2.5-vl"), settings, out,
                          ResponseCache(cache_path), executor="ray", model=ModelSettings())
    assert len(first) == 6 and len(resumed) == 10
    assert rows(cache_path) - paid_first == sum(r.usage.requests for r in resumed[6:])  # only the new tasks
    assert {p.name: os.stat(p).st_mtime_ns for p in (out / "results").glob("*.json") if p.name in stamps} == stamps


class Interrupt(Exception):
    pass


def test_resumed_ray_evolve_pays_for_no_evaluation_twice(small_world, harness, tmp_path: Path, local_ray):
    """An evolve run on Ray interrupted inside an iteration and resumed: same lineage, same paid calls."""
    from videvolve.graph.driver import evolve
    from videvolve.loop.context import Context
    from videvolve.testing import interrupt_after

    def ctx(name: str) -> Context:
        return run_context(small_world, tmp_path, harness.path, name=name, iterations=2, executor="ray")

    whole = evolve(ctx("whole"))
    with pytest.raises(Interrupt):
        evolve(ctx("resumed"), interrupt_after("solve", 2, Interrupt))
    done = {p: os.stat(p).st_mtime_ns for p in (tmp_path / "resumed" / "evals").glob("*/*/results/*.json")}
    assert done
    resumed = evolve(ctx("resumed"))
    assert {p: os.stat(p).st_mtime_ns for p in done} == done  # nothing finished before the crash ran again
    assert resumed["incumbent"] == whole["incumbent"]
    assert [(h.get("candidate"), h["decision"]) for h in resumed["history"]] == \
        [(h.get("candidate"), h["decision"]) for h in whole["history"]]
    assert rows(tmp_path / "resumed-cache.sqlite") == rows(tmp_path / "whole-cache.sqlite")  # nothing paid twice


def test_a_full_disk_on_a_worker_stops_the_run_in_words(small_world, seed: Path, tmp_path: Path, local_ray,
                                                         capsys: pytest.CaptureFixture[str]):
    """main: "run stopped: ray::_remote_task() (pid=..., ip=...)" and Ray's traceback of the worker, in colour codes
    (only an InfraError was raised as itself; a StorageError or a HostError came wrapped in Ray's RayTaskError)."""
    from videvolve.cli import main

    tasks = small_world.tasks[:2]
    out = tmp_path / "out"
    (out / "results" / f"{tasks[0].id}.json.tmp").mkdir(parents=True)  # the result cannot be written there
    code = main(["eval", "--tasks", str(small_world.tasks_path), "--split", "all", "--limit", "2",
                 "--harness", str(seed), "--out", str(out), "--executor", "ray", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert f"run stopped: cannot write the result {out / 'results' / tasks[0].id}.json: a folder is in the way" \
        in " ".join(err.split())
    assert "ray::" not in err and "Traceback" not in err and "\x1b" not in err


def own_workers(prefix: bytes) -> list[int]:
    """Pids of this process's Ray workers running ``prefix`` (their title), never another session's."""
    raylet = ray._private.worker._global_node.all_processes["raylet"][0].process.pid
    found = []
    for proc in Path("/proc").iterdir():
        try:
            ppid = int((proc / "stat").read_text().rpartition(")")[2].split()[1])
            if ppid == raylet and (proc / "cmdline").read_bytes().startswith(prefix):
                found.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@pytest.mark.parametrize("kills", [1, 99])
def test_a_worker_killed_is_retried_then_a_clean_stop(small_world, tmp_path: Path, local_ray, kills: int):
    """main, killed past Ray's 3 retries: ray.exceptions.WorkerCrashedError, not a run-stopping error (a bug's
    traceback, exit 70). Killed once: Ray runs the task again, and its result is the threads' one."""
    import signal
    import threading

    from videvolve.errors import HostError

    task = small_world.tasks[:1]
    (tmp_path / "slow").mkdir()  # a harness that runs till its 3 s are up: its worker is there to be found and
    (tmp_path / "slow" / "solver.py").write_text("def solve(task, ctx):\n    while True:\n        pass\n")  # killed
    harness = load_harness(tmp_path / "slow")  # (the seed answered before the killer's first look on an idle machine)
    runtime = RuntimeSettings(wall_seconds=3.0)
    stop = threading.Event()
    killed: list[int] = []

    def killer() -> None:
        while not stop.is_set() and len(killed) < kills:
            for pid in own_workers(b"ray::_remote_task"):
                os.kill(pid, signal.SIGKILL)  # as the OOM killer would
                killed.append(pid)
            stop.wait(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        if kills > 3:
            with pytest.raises(HostError, match=f"Ray could not run task {task[0].id}: The worker died"):
                solve_tasks(harness, task, SimVLM(), cost_model("qwen2.5-vl"), runtime, tmp_path / "ray",
                            executor="ray", model=ModelSettings())
        else:
            (remote,) = solve_tasks(harness, task, SimVLM(), cost_model("qwen2.5-vl"), runtime,
                                    tmp_path / "ray", executor="ray", model=ModelSettings())
            (local,) = solve_tasks(harness, task, SimVLM(), cost_model("qwen2.5-vl"), runtime, tmp_path / "local")
            assert killed and (remote.outcome, remote.error_kind) == (local.outcome, local.error_kind) == (
                "error", "timeout")
    finally:
        stop.set()
        thread.join()


def test_concurrency_caps_the_tasks_a_cluster_runs_at_once(small_world, tmp_path: Path, local_ray):
    """``--concurrency 1`` on a 2-CPU cluster: one task at a time (main: every CPU's worth, whatever it said), and
    each of them still run and kept."""
    import threading

    (tmp_path / "busy").mkdir()  # each task holds a worker for its second
    (tmp_path / "busy" / "solver.py").write_text("def solve(task, ctx):\n    while True:\n        pass\n")
    harness = load_harness(tmp_path / "busy")
    tasks = small_world.tasks[:3]
    stop, peak = threading.Event(), [0]

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], len(own_workers(b"ray::_remote_task")))
            stop.wait(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        results = solve_tasks(harness, tasks, SimVLM(), cost_model("qwen2.5-vl"),
                              RuntimeSettings(wall_seconds=1.0, concurrency=1), tmp_path / "ray", executor="ray",
                              model=ModelSettings())
    finally:
        stop.set()
        thread.join()
    assert [r.task_id for r in results] == [t.id for t in tasks]
    assert {(r.outcome, r.error_kind) for r in results} == {("error", "timeout")}
    assert peak[0] == 1
