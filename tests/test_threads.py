"""run_in_threads: Ctrl-C and errors stop what has not started; every finished result reaches on_done."""

from __future__ import annotations

import threading
import time

import pytest

from videvolve import interrupt
from videvolve.threads import run_in_threads


def test_every_result_reaches_on_done_one_call_at_a_time():
    seen: list[tuple[int, int]] = []
    run_in_threads(range(20), lambda i: i * i, 4, lambda i, r: seen.append((i, r)))
    assert sorted(seen) == [(i, i * i) for i in range(20)]


def test_an_error_stops_what_has_not_started_and_is_raised():
    started: list[int] = []

    def work(i: int) -> int:
        started.append(i)
        if i == 1:
            raise ValueError("bad video")
        time.sleep(0.05)
        return i

    with pytest.raises(ValueError, match="bad video"):
        run_in_threads(range(50), work, 2)
    assert len(started) < 10


@pytest.mark.slow
def test_a_ctrl_c_stops_the_wait_and_no_queued_job_starts():
    release = threading.Event()
    started: list[int] = []

    def work(i: int) -> int:
        started.append(i)
        release.wait(30)  # a request that does not come back
        return i

    threading.Timer(0.3, interrupt.STOP.set).start()  # what the console's Ctrl-C watcher does
    began = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_in_threads(range(10), work, 2)
        assert time.monotonic() - began < 3  # polled within 0.25 s, then at most the console's 1 s grace
        assert sorted(started) == [0, 1]  # the 8 queued jobs never started
    finally:
        interrupt.STOP.clear()
        release.set()
