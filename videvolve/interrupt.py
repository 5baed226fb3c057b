"""Ctrl-C: one process-wide flag, so that a run stops within seconds and keeps what finished.

The console entry point runs a command within :func:`installed`: the first SIGINT sets :data:`STOP` and raises
``KeyboardInterrupt`` in the main thread; waits between retries (:func:`sleep`) end at once by raising
:class:`Interrupted`, no new task starts, and the process exits without waiting for requests in flight (every
finished result is already on disk). A second SIGINT exits at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from videvolve.errors import InfraError

STOP = threading.Event()
"""Set by the first Ctrl-C of a command run from the console."""
INTERRUPTED = 130
"""Exit status of a command ended by Ctrl-C (128 + SIGINT)."""


class Interrupted(InfraError):
    """The user stopped the run: like an endpoint that is down, never a task's result."""


def sleep(seconds: float) -> None:
    """``time.sleep`` that ends at once, raising :class:`Interrupted`, when the run is being stopped."""
    if STOP.wait(seconds):
        raise Interrupted("interrupted (Ctrl-C) while waiting to retry")


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if STOP.is_set():
        sys.stderr.write("interrupted again: exiting now\n")
        sys.stderr.flush()
        os._exit(INTERRUPTED)
    STOP.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """Within the block, Ctrl-C stops this process within seconds (main thread only; the old handler is restored)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def exit_now(code: int) -> None:
    """End the process without waiting for worker threads still blocked in a request (output flushed first)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
