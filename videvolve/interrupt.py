"""Ctrl-C: one process-wide flag, so that a run stops within seconds and keeps what finished.

The console entry point runs a command within :func:`installed`: the first SIGINT marks the run as stopping and
raises ``KeyboardInterrupt`` in the main thread; a watcher thread then sets :data:`STOP` (waits between retries,
:func:`sleep`, end at once by raising :class:`Interrupted`), no new task starts, and the process exits without waiting
for requests in flight (every finished result is already on disk). A second SIGINT exits at once.

Python may swallow the ``KeyboardInterrupt`` (raised inside a weakref callback or a ``__del__``, it is only
"ignored"), so nothing relies on it alone: the main thread's waits poll :func:`requested`, and the watcher ends the
process :data:`BACKSTOP_S` seconds after the first Ctrl-C if the command has not ended by then.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from videvolve.errors import InfraError

STOP = threading.Event()
"""Set (by the watcher thread) after the first Ctrl-C of a command run from the console."""
INTERRUPTED = 130
"""Exit status of a command ended by Ctrl-C (128 + SIGINT)."""
BACKSTOP_S = 20.0
"""Seconds after the first Ctrl-C at which the process ends, whatever its main thread is doing."""

_requested = False  # set by the handler itself: a plain store, safe where taking an Event's lock is not
_wake_fd: int | None = None  # the watcher's pipe: b"i" a Ctrl-C, b"e" the command ended


class Interrupted(InfraError):
    """The user stopped the run: like an endpoint that is down, never a task's result."""


def requested() -> bool:
    """Whether Ctrl-C was pressed (true from the handler's first instruction, before :data:`STOP` is set)."""
    return _requested or STOP.is_set()


def sleep(seconds: float) -> None:
    """``time.sleep`` that ends at once, raising :class:`Interrupted`, when the run is being stopped."""
    if STOP.wait(seconds):
        raise Interrupted("interrupted (Ctrl-C) while waiting to retry")


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    global _requested
    if _requested:
        _write_stderr("interrupted again: exiting now\n")
        os._exit(INTERRUPTED)
    _requested = True
    if _wake_fd is not None:  # the watcher sets STOP: an Event's lock may be held by the frame this handler interrupts
        with contextlib.suppress(OSError):
            os.write(_wake_fd, b"i")
    raise KeyboardInterrupt


def _watch(read_fd: int) -> None:
    """The watcher thread: on Ctrl-C set :data:`STOP`, then end the process if the command outlives the backstop."""
    try:
        if os.read(read_fd, 1) != b"i":
            return
        STOP.set()
        ready, _, _ = select.select([read_fd], [], [], BACKSTOP_S)
        if ready and os.read(read_fd, 1) == b"e":
            return
        _write_stderr(f"interrupted: still running {BACKSTOP_S:.0f} s after Ctrl-C, exiting now (every finished "
                      "result is kept; rerun the same command, or `--resume` a run, to continue)\n")
        exit_now(INTERRUPTED)
    finally:
        os.close(read_fd)


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """Within the block, Ctrl-C stops this process within seconds (main thread only; the old handler is restored)."""
    global _wake_fd
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_fd, write_fd = os.pipe()
    threading.Thread(target=_watch, args=(read_fd,), name="videvolve-ctrl-c", daemon=True).start()
    _wake_fd = write_fd
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _wake_fd = None
        with contextlib.suppress(OSError):
            os.write(write_fd, b"e")
        os.close(write_fd)


def _write_stderr(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(text)
        sys.stderr.flush()


def exit_now(code: int) -> None:
    """End the process without waiting for worker threads still blocked in a request (output flushed first)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
