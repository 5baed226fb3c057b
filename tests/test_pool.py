"""Warm sandboxes: each task gets a child started ahead of time and used by no other; none outlives the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from videvolve.config import RuntimeSettings
from videvolve.errors import SandboxStartError
from videvolve.evaluation.solve import solve_tasks
from videvolve.models.base import Reply
from videvolve.models.cost import cost_model
from videvolve.skill_library import pool as pool_module
from videvolve.skill_library.harness import load_harness
from videvolve.skill_library.pool import WarmPool
from videvolve.tasks import Task


class _SlowA:
    """Answers A after ``delay`` seconds."""

    name = "slow-a"
    revision = "1"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def complete(self, messages: Any, tools: Any = None) -> Reply:
        time.sleep(self.delay)
        return Reply(text="A")

    def decoding(self) -> dict[str, Any]:
        return {}


def sandbox_children(pid: int) -> list[int]:
    """Live processes started by ``pid`` that are sandboxes (bubblewrap or unshare)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and Path(argv0.decode(errors="replace")).name in ("bwrap", "unshare"):
            found.append(int(entry.name))
    return found


def _tasks(video: Path, n: int) -> list[Task]:
    return [Task(id=f"t{i}", video_id="v", video=str(video), kind="mcq", question=f"q{i}?", options=["x", "y"],
                 answer="A", duration=20.0) for i in range(n)]


def test_each_task_runs_in_its_own_child_started_ahead_and_none_is_left(index_video: Path, seed: Path,
                                                                         tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch):
    taken: list[int] = []
    real_take = WarmPool.take

    def take(self: WarmPool) -> Any:
        child = real_take(self)
        taken.append(child.proc.pid)
        return child

    monkeypatch.setattr(WarmPool, "take", take)
    results = solve_tasks(load_harness(seed), _tasks(index_video, 5), _SlowA(), cost_model("qwen2.5-vl"),
                          RuntimeSettings(concurrency=2), tmp_path / "out")
    assert [r.outcome for r in results] == ["ok"] * 5, [r.error for r in results]
    assert len(taken) == 5 and len(set(taken)) == 5  # one child per task, never one for two
    assert all(r.usage.client_s["sandbox_start"] < 5 for r in results)
    assert sandbox_children(os.getpid()) == []


def test_a_pool_replaces_a_child_that_died_waiting_and_close_kills_the_waiting(seed: Path):
    settings = RuntimeSettings(concurrency=2)
    pool = WarmPool(load_harness(seed), settings, size=2)
    try:
        deadline = time.monotonic() + 20
        while len(sandbox_children(os.getpid())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        first = pool._idle.queue[0]  # the next child to be taken, killed while it waits
        pool_module.kill_process(first.proc)
        child = pool.take()
        assert child is not first and child.alive()
        pool_module.kill_child(child)
    finally:
        pool.close()
    assert sandbox_children(os.getpid()) == []


def _taken_within(pool: WarmPool, seconds: float) -> BaseException | None:
    """What ``pool.take()`` raised, failing the test if it neither returns nor raises within ``seconds``."""
    box: list[BaseException | None] = []

    def take() -> None:
        try:
            pool_module.kill_child(pool.take())
            box.append(None)
        except BaseException as exc:
            box.append(exc)

    worker = threading.Thread(target=take, daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"take() still waiting after {seconds} s: a task would hang until its wall-clock limit"
    return box[0]


def test_a_sandbox_the_system_will_not_start_stops_the_task_at_once(seed: Path):
    def refused(settings: RuntimeSettings, prepare: bytes) -> pool_module.Child:
        raise SandboxStartError("cannot start a sandboxed interpreter: [Errno 11] Resource temporarily unavailable")

    pool = WarmPool(load_harness(seed), RuntimeSettings(concurrency=2), size=2, start=refused)
    try:
        raised = _taken_within(pool, 10)  # it waited for the spawner's child for ever (then the 900 s timeout)
        assert isinstance(raised, SandboxStartError) and "Resource temporarily unavailable" in str(raised)
    finally:
        pool.close()


def test_a_machine_out_of_threads_stops_the_task_as_the_machines_failure_and_leaves_no_child(
        seed: Path, monkeypatch: pytest.MonkeyPatch):
    """Starting a child needs a thread to read its stderr; "can't start new thread" (a RuntimeError) reached the task
    as a plain exception, scored as the harness's crash, and left the child running."""
    from videvolve.skill_library.harness import load_harness as load
    from videvolve.skill_library.pool import prepare_message, start_or_refuse

    real_start = threading.Thread.start

    def no_thread(self: threading.Thread) -> None:
        if getattr(self, "_target", None) is pool_module._drain:
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    import json

    prepare = (json.dumps(prepare_message(load(seed), RuntimeSettings(), 10.0)) + "\n").encode()
    with pytest.raises(SandboxStartError, match="can't start new thread"):
        start_or_refuse(RuntimeSettings(), prepare)
    deadline = time.monotonic() + 5
    while sandbox_children(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox_children(os.getpid()) == []


def test_a_machine_without_a_sandbox_stops_the_waiting_tasks_at_once(seed: Path, monkeypatch: pytest.MonkeyPatch):
    """Bubblewrap missing: the spawner's failure reaches every task waiting for a child (a pilot run hung on it)."""
    from videvolve.skill_library import sandbox

    real_which = sandbox.shutil.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    sandbox.get_sandbox.cache_clear()
    pool = WarmPool(load_harness(seed), RuntimeSettings(concurrency=2), size=2)
    try:
        for _ in range(2):  # both tasks of the run, not only the first
            raised = _taken_within(pool, 10)
            assert isinstance(raised, SandboxStartError), raised
            assert "bubblewrap is not installed" in str(raised) and "resume" in str(raised)
    finally:
        pool.close()
        sandbox.get_sandbox.cache_clear()


def test_a_spawner_failing_in_any_way_does_not_leave_tasks_waiting(seed: Path):
    def broken(settings: RuntimeSettings, prepare: bytes) -> pool_module.Child:
        raise RuntimeError("an unforeseen bug in starting a child")

    pool = WarmPool(load_harness(seed), RuntimeSettings(concurrency=1), size=1, start=broken)
    try:
        raised = _taken_within(pool, 10)
        assert isinstance(raised, RuntimeError) and "unforeseen" in str(raised)
    finally:
        pool.close()


def test_a_sandbox_start_that_hangs_stops_the_task_instead_of_the_run(seed: Path):
    release = threading.Event()

    def hanging(settings: RuntimeSettings, prepare: bytes) -> pool_module.Child:
        release.wait(30)  # bubblewrap stuck at start: the task's clock is stopped while it waits for its sandbox
        raise SandboxStartError("released")

    pool = WarmPool(load_harness(seed), RuntimeSettings(concurrency=1), size=1, start=hanging)
    pool.wait_s = 0.5
    try:
        raised = _taken_within(pool, 10)  # main: waited for the spawner for ever
        assert isinstance(raised, SandboxStartError) and "within 0.5 s" in str(raised), raised
    finally:
        release.set()
        pool.close()


def test_children_that_die_before_their_task_stop_it_with_their_stderr(seed: Path):
    def dying(settings: RuntimeSettings, prepare: bytes) -> pool_module.Child:
        proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stderr.write('bwrap: no user namespaces')"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.wait()
        child = pool_module.Child(proc, time.perf_counter())
        child.stderr.append(proc.stderr.read() if proc.stderr else b"")
        return child

    pool = WarmPool(load_harness(seed), RuntimeSettings(concurrency=1), size=1, start=dying)
    try:
        raised = _taken_within(pool, 10)  # it started another and another until the task's wall-clock limit
        assert isinstance(raised, SandboxStartError) and "bwrap: no user namespaces" in str(raised)
    finally:
        pool.close()


def test_the_pool_can_be_turned_off(index_video: Path, seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(WarmPool, "__init__", lambda *a, **k: pytest.fail("a pool was made"))
    results = solve_tasks(load_harness(seed), _tasks(index_video, 2), _SlowA(), cost_model("qwen2.5-vl"),
                          RuntimeSettings(concurrency=2, warm_sandboxes=False), tmp_path / "out")
    assert [r.outcome for r in results] == ["ok", "ok"]


INTERRUPTED = '''
import signal
import sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job of a shell starts with SIGINT ignored
from pathlib import Path
from tests.test_pool import _SlowA, _tasks, sandbox_children
from videvolve.config import RuntimeSettings
from videvolve.evaluation.solve import solve_tasks
from videvolve.models.cost import cost_model
from videvolve.skill_library.harness import load_harness
import os

try:
    # 80 tasks of 0.4 s: the run cannot end on its own while the test, however loaded the machine, looks for the
    # sandboxes and sends the signal (with 12 it once did, and there was nothing left to interrupt)
    solve_tasks(load_harness(sys.argv[2]), _tasks(Path(sys.argv[1]), 80), _SlowA(0.4), cost_model("qwen2.5-vl"),
                RuntimeSettings(concurrency=2), Path(sys.argv[3]), on_result=lambda r: print("result", flush=True))
    print("finished before the interrupt", flush=True)
except KeyboardInterrupt:
    print("left", len(sandbox_children(os.getpid())), flush=True)
'''


@pytest.mark.slow
def test_an_interrupted_eval_leaves_no_sandbox_behind(index_video: Path, seed: Path, tmp_path: Path):
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{repo}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED, str(index_video), str(seed), str(tmp_path / "out")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "result"
    seen = sandbox_children(proc.pid)
    assert len(seen) >= 2  # running and waiting children
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert out.strip().splitlines()[-1] == "left 0", (out, err[-2000:])
    alive = [pid for pid in seen if Path(f"/proc/{pid}").exists()
             and b"bwrap" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert alive == []
