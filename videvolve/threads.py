"""Run jobs on a few threads so that Ctrl-C stops them within seconds and an error stops the rest.

Both the solve engine (tasks) and task generation (videos) use :func:`run_in_threads`; a bare
``with ThreadPoolExecutor()`` would, on Ctrl-C, run every queued job to its end before leaving.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from videvolve import interrupt

T = TypeVar("T")
R = TypeVar("R")

INTERRUPT_GRACE_S = 2.5
"""Seconds the jobs in flight get to finish after a KeyboardInterrupt."""
CONSOLE_GRACE_S = 1.0
"""The same after the console's Ctrl-C, whose bound is 5 s (waits between retries have ended already)."""
POLL_S = 0.25
"""How often the main thread, waiting for jobs, looks for a Ctrl-C whose ``KeyboardInterrupt`` went astray."""


def run_in_threads(items: Sequence[T], work: Callable[[T], R], concurrency: int,
                   on_done: Callable[[T, R], None] | None = None) -> None:
    """Run ``work`` on every item on ``concurrency`` threads; ``on_done`` gets each result, one call at a time.

    An exception stops the rest (nothing new starts) and is raised once the running jobs end. On
    ``KeyboardInterrupt`` nothing new starts, the running jobs get a short grace to finish (what they finish is
    passed to ``on_done``), then it is raised; the console then exits without waiting for requests in flight.
    """
    lock = threading.Lock()
    stop = threading.Event()

    def job(item: T) -> None:
        if stop.is_set():
            return
        result = work(item)
        if on_done:
            with lock:
                on_done(item, result)

    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    futures: list[Future[None]] = []
    try:
        futures.extend(pool.submit(job, item) for item in items)
        finished, running = wait(futures, timeout=POLL_S, return_when=FIRST_EXCEPTION)
        while running and not any(f.exception() is not None for f in finished):
            if interrupt.requested():  # Ctrl-C whose KeyboardInterrupt Python swallowed (see videvolve.interrupt)
                raise KeyboardInterrupt
            finished, running = wait(futures, timeout=POLL_S, return_when=FIRST_EXCEPTION)
    except BaseException:  # Ctrl-C: nothing new starts; the jobs in flight get a short grace to finish
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        wait(futures, timeout=CONSOLE_GRACE_S if interrupt.requested() else INTERRUPT_GRACE_S)
        raise
    failure = next((f.exception() for f in finished if f.exception() is not None), None)
    if failure is not None:
        stop.set()
        for f in futures:
            f.cancel()
    pool.shutdown(wait=True)
    if failure is not None:
        raise failure
