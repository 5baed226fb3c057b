"""Sandboxed children started ahead of time: each runs exactly one task, never two.

A child's start (bubblewrap, the interpreter, the bootstrap's imports, the restricted world) costs about 45 ms of
CPU, which used to sit on every task's critical path. A :class:`WarmPool` keeps up to ``size`` children of one
harness started and waiting, so a task takes one that is ready. The protocol is the same with or without a pool:
the first line (the harness, its limits, the SDK) goes in when the child starts; the child builds its world, drops
to the unprivileged uid and waits; the second line (the task) goes in when a task takes it. Nothing of a task ever
reaches a child before that child is given to that task, and a child is killed when its task ends, so no state
crosses tasks.

Children are started by one long-lived thread of the pool (bubblewrap's ``--die-with-parent`` follows the thread
that started it), and :meth:`WarmPool.close` kills every child still waiting; a killed parent takes them with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from videvolve.config import RuntimeSettings
from videvolve.errors import SandboxStartError
from videvolve.skill_library.harness import Harness
from videvolve.skill_library.sandbox import get_sandbox, sdk_source
from videvolve.skill_library.static_check import imported_modules

STDERR_TAIL = 4000
PROCESS_LIMIT = 32
"""RLIMIT_NPROC of the child. The kernel counts every process and thread of uid 65534 on the host against it, so
it allows several sandboxes at once (each is one process with two threads; a waiting one, one thread) and no
fork bomb."""


@dataclass
class Child:
    """One started sandboxed interpreter, its first line written, waiting for its task."""

    proc: subprocess.Popen[bytes]
    spawned: float
    """``time.perf_counter()`` when it was started."""
    stderr: list[bytes] = field(default_factory=list)
    drain: threading.Thread | None = None

    def alive(self) -> bool:
        """Whether it is still running (a waiting child never exits on its own)."""
        return self.proc.poll() is None


def prepare_message(harness: Harness, settings: RuntimeSettings, timeout: float) -> dict[str, Any]:
    """The child's first line: everything but the task."""
    return {
        "config": harness.config, "budget": settings.budget, "skill": harness.skill, "sdk_source": sdk_source(),
        "modules": sorted(set().union(*(imported_modules(s) for s in (sdk_source(), harness.solver_source,
                                                                       *(t.source for t in harness.tools))))),
        "solver_path": "solver.py", "solver_source": harness.solver_source,
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters, "source": t.source,
                   "path": t.path} for t in harness.tools],
        "limits": {"memory_bytes": settings.memory_bytes, "cpu_seconds": int(timeout) + 5,
                   "file_bytes": 16 * 1024 * 1024, "processes": PROCESS_LIMIT, "open_files": 64},
    }


def start_child(settings: RuntimeSettings, prepare: bytes) -> Child:
    """Start a sandboxed interpreter and write its first line (``prepare``, JSON ending in a newline)."""
    proc = get_sandbox(settings.allow_weak_sandbox).popen(stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                          stderr=subprocess.PIPE, start_new_session=True)
    child = Child(proc, time.perf_counter())
    child.drain = threading.Thread(target=_drain, args=(proc, child.stderr), daemon=True)
    try:
        child.drain.start()
    except RuntimeError:  # no thread for its stderr: the child is not left running
        kill_process(proc)
        raise
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # a child that died at once: its task reports it as a crash
        proc.stdin.write(prepare)
        proc.stdin.flush()
    return child


def start_or_refuse(settings: RuntimeSettings, prepare: bytes) -> Child:
    """:func:`start_child`, or :class:`SandboxStartError` when the system will not start it (no task's fault)."""
    try:
        return start_child(settings, prepare)
    except (OSError, RuntimeError) as exc:  # RuntimeError: "can't start new thread" (its stderr's reader)
        raise SandboxStartError(f"cannot start a sandboxed interpreter: {exc} (the machine refuses new processes, "
                                "or bubblewrap cannot run; `videvolve doctor` checks the sandbox; everything "
                                "finished is kept: fix it, then resume)") from exc


SANDBOX_WAIT_S = 300.0
"""The longest a task waits for the pool's next child (a start takes well under a second): the machine's time, off
the task's clock, so it needs a bound of its own, or a sandbox start that hangs would hang the run."""

DEAD_STARTS = 3
"""Children in a row found dead before their task: the sandbox cannot start here (not the harness's doing)."""


def _drain(proc: subprocess.Popen[bytes], sink: list[bytes]) -> None:
    assert proc.stderr is not None
    total = 0
    for chunk in iter(lambda: proc.stderr.read(4096), b""):  # type: ignore[union-attr]
        total += len(chunk)
        sink.append(chunk)
        while total > 4 * STDERR_TAIL and len(sink) > 1:
            total -= len(sink.pop(0))


class WarmPool:
    """Up to ``size`` started children of one harness, for at most ``total`` tasks (None: no bound)."""

    def __init__(self, harness: Harness, settings: RuntimeSettings, size: int, total: int | None = None,
                 timeout: float | None = None, start: Callable[[RuntimeSettings, bytes], Child] = start_or_refuse
                 ) -> None:
        self.timeout = timeout or settings.wall_seconds
        self.wait_s = SANDBOX_WAIT_S
        self._start = start
        self._failure: Exception | None = None
        self.key = pool_key(harness, settings, self.timeout)
        self.settings = settings
        self._prepare = (json.dumps(prepare_message(harness, settings, self.timeout)) + "\n").encode()
        self._idle: queue.Queue[Child | None] = queue.Queue()  # None: the spawner could not start one
        self._wanted = threading.Semaphore(0)
        self._left = total
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._children: list[Child] = []
        self._pending = 0
        self._spawner = threading.Thread(target=self._spawn_loop, name="videvolve-warm-pool", daemon=True)
        self._spawner.start()
        for _ in range(size if total is None else min(size, total)):
            self._want()

    def _want(self) -> bool:
        """Ask the spawner for one more child, unless the pool already started one for each of its tasks."""
        with self._lock:
            if self._left is not None:
                if self._left <= 0:
                    return False
                self._left -= 1
            self._pending += 1
        self._wanted.release()
        return True

    def _spawn_loop(self) -> None:
        """Start a child each time one is wanted; this thread outlives every child it starts.

        A start that fails (the system refuses it, no sandbox can run here, anything else) is handed on as ``None``
        (and kept in ``_failure``): a task waiting for a child must learn it at once. A task's clock stops while it
        waits for its sandbox, so a spawner that died instead would leave every waiting task, and the run, hung.
        """
        while True:
            self._wanted.acquire()
            if self._closed.is_set():
                return
            child: Child | None = None
            try:
                child = self._start(self.settings, self._prepare)
            except Exception as exc:  # whatever it is, the tasks waiting must get it: a dead spawner hangs them all
                self._failure = exc
            with self._lock:
                if child is not None:
                    self._children.append(child)
                self._pending -= 1
            self._idle.put(child)

    def take(self) -> Child:
        """A started child for one task (waiting for one if none is ready); another is started in its place.

        :class:`SandboxStartError` when none can be started, or when :data:`DEAD_STARTS` in a row die before use.
        """
        if self._closed.is_set():
            raise RuntimeError("the warm pool is closed")
        self._want()
        dead = 0
        while True:
            with self._lock:
                cold = self._idle.empty() and self._pending == 0  # more tasks than the pool was told: start one
            child = self._start(self.settings, self._prepare) if cold else self._next()
            if child is None:
                raise self._failure or SandboxStartError("cannot start a sandboxed interpreter")
            with self._lock:
                if child in self._children:
                    self._children.remove(child)
            if child.alive():
                return child
            kill_child(child)  # died while waiting (killed from outside): start another
            dead += 1
            if dead >= DEAD_STARTS:
                tail = b"".join(child.stderr)[-STDERR_TAIL:].decode(errors="replace").strip()
                raise SandboxStartError(f"{dead} sandboxed interpreters in a row died before their task started"
                                        f"{': ' + tail if tail else ''} (`videvolve doctor` checks the sandbox; "
                                        "everything finished is kept: fix it, then resume)")
            if not self._want():
                self._force()

    def _next(self) -> Child | None:
        """The next child the spawner started (None: it could not), within :data:`SANDBOX_WAIT_S`."""
        try:
            return self._idle.get(timeout=self.wait_s)
        except queue.Empty:
            raise SandboxStartError(f"no sandboxed interpreter started within {self.wait_s:g} s (the machine is "
                                    "overloaded, or bubblewrap hangs; `videvolve doctor` checks the sandbox; "
                                    "everything finished is kept: fix it, then resume)") from None

    def _force(self) -> None:
        with self._lock:
            self._pending += 1
        self._wanted.release()

    def close(self) -> None:
        """Stop starting children and kill every one still waiting.

        Call it once no task runs: a child dies with the thread that started it, which ends here.
        """
        self._closed.set()
        self._wanted.release()
        self._spawner.join(timeout=10)
        with self._lock:
            waiting, self._children = self._children, []
        for child in waiting:
            kill_child(child)

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pool_key(harness: Harness, settings: RuntimeSettings, timeout: float) -> tuple[Any, ...]:
    """What a pool's children were started for: a task can use one only if its own key is the same."""
    return (harness.version_id, harness.path, settings.budget, settings.memory_bytes, settings.allow_weak_sandbox,
            int(timeout))


def kill_process(proc: subprocess.Popen[bytes]) -> None:
    """Kill the child's whole process group."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def signal_child(child: Child) -> None:
    """Kill the child's process group from any thread; its pipes stay open for the thread that reads them."""
    if child.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.proc.pid, signal.SIGKILL)


def kill_child(child: Child) -> None:
    """Kill the child's whole process group, close its pipes, collect its stderr."""
    kill_process(child.proc)
    if child.drain is not None:
        child.drain.join(timeout=5)
