"""Failures a test provokes on purpose: a crash after a node, a hang, a full disk."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def interrupt_after(node: str, count: int, exc: type[BaseException]) -> Callable[[str, Any, Any], None]:
    """An ``evolve`` progress callback that raises ``exc`` once ``node`` has finished ``count`` times (a crash)."""
    seen: list[str] = []

    def callback(name: str, values: Any, state: Any) -> None:
        seen.append(name)
        if name == node and seen.count(node) == count:
            raise exc

    return callback


def in_thread(fn: Callable[[], T], seconds: float) -> tuple[T, float]:
    """``fn()``'s value and how long it took, in a thread of its own; what ``fn`` raises is raised here.

    ``AssertionError`` when it is still running after ``seconds``: a hang ends the test, not CI.
    """
    box: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise AssertionError(f"still running after {seconds} s (hung)")
    if errors:
        raise errors[0]
    return box[0], time.monotonic() - started


@contextlib.contextmanager
def full_disk(size: int) -> Iterator[None]:
    """Within the block no file may grow past ``size`` bytes: a write that would fails half-way, as on a full disk.

    ``RLIMIT_FSIZE`` (writes past it fail with ``EFBIG``, ``SIGXFSZ`` ignored meanwhile): it holds for the whole
    process, so use it in the main thread, around the one write under test.
    """
    import resource
    import signal

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
