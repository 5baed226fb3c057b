"""Run a harness on one task in the sandbox and serve its requests; every failure becomes an outcome.

Outcomes: ``ok``, or ``error`` with a kind: ``parse`` (no usable answer), ``unsupported`` (no usable answer after
the model said it cannot read this input, to the parent's own request too: SimVLM outside SynthWorld), ``budget``
(after a request refused for it), ``timeout``, ``memory``, ``crash`` (an exception, a killed process, a protocol
violation), ``bad_request`` (the model endpoint rejected a request, e.g. too many images), ``invalid`` (a request
the parent refused or could not serve: bad arguments, a malformed chat, a pixel, handle or memory cap), ``media``,
``static`` (refused before running). Infrastructure failures (endpoint down, auth) are not outcomes:
:class:`InfraError` propagates so the run stops cleanly and resumes later.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from videvolve import interrupt
from videvolve.errors import Cancelled, ErrorKind, HarnessError, HostError, InfraError, RequestRefused
from videvolve.models.base import request_timeout_of
from videvolve.models.http_errors import outages_to
from videvolve.skill_library.channel import Pipe, decode_request, encode_reply
from videvolve.skill_library.harness import Harness, content_hash
from videvolve.skill_library.outcome import RunOutcome, failure, final_outcome, to_prediction
from videvolve.skill_library.pool import (
    STDERR_TAIL,
    Child,
    WarmPool,
    kill_child,
    pool_key,
    prepare_message,
    signal_child,
    start_or_refuse,
)
from videvolve.skill_library.services import TaskServices
from videvolve.skill_library.static_check import check_source
from videvolve.skill_library.steps import Failed, Final, RequestError

log = logging.getLogger(__name__)

WATCHDOG_S = 1.0
"""Seconds past its timeout after which the watchdog kills a task's child (the protocol's own deadline is first)."""
WATCHDOG_GRACE_S = 1.0
"""Seconds the watchdog then waits for the task's thread before the task ends without it."""
TIMEOUT_MARGIN_S = WATCHDOG_S + WATCHDOG_GRACE_S + 1.0
"""A task ends within its longest time plus this, whatever its harness does (the last second: ending the thread)."""
OFF_THE_CLOCK = frozenset({"ask", "chat", "ocr"})
"""Requests whose serving does not count against the harness's timeout: the parent decodes media and waits for the
model (or runs the OCR engine, one read at a time for the whole machine) for them, and how long that takes is the
machine's and the endpoint's, not the harness's."""
REQUEST_GRACE_S = 5.0
"""Seconds past a model request's own timeout before a task's longest time may end it (the failure is reported)."""
LONGEST = 4.0
"""A task's longest time, as a multiple of its timeout, however long the parent spends serving it (then: timeout).

Time the model endpoint was failing (a request retried, see :mod:`videvolve.models.http_errors`) is not counted: an
outage ends within the retry window, in an answer or in the run's clean stop, and is never the harness's timeout."""


def code_problems(harness: Harness) -> list[str]:
    """The static check of every file of harness code."""
    problems = check_source(harness.solver_source, "solver.py")
    for tool in harness.tools:
        problems += check_source(tool.source, tool.path)
    return problems


def run_task(harness: Harness, services: TaskServices, timeout: float | None = None,
             static_check: bool = True, pool: WarmPool | None = None,
             cancel: threading.Event | None = None) -> RunOutcome:
    """Run ``harness`` on the task behind ``services`` in a fresh sandboxed interpreter.

    With a ``pool`` started for this harness and these limits, the interpreter is one of its children, started
    ahead of time and never used before; otherwise it is started now.

    The timeout is the harness's own time: waiting for its sandbox and for the requests the parent serves off its
    clock (:data:`OFF_THE_CLOCK`: decoding and model calls, slow on a loaded machine or a busy endpoint) is not
    counted, so a slow server does not make a harness's answer a ``timeout`` scored 0. Whatever the child does, the
    task ends within :data:`LONGEST` x ``timeout`` plus :data:`TIMEOUT_MARGIN_S`, plus the time the model endpoint
    was down (retried for its window, then :class:`InfraError`, never a task's timeout), and never before a model
    request in flight has had its own timeout (:data:`REQUEST_GRACE_S` more): the protocol runs in a
    thread of its own, and a watchdog here kills the child :data:`WATCHDOG_S` after its deadline and gives up on the
    thread (a request of the child's still being served) :data:`WATCHDOG_GRACE_S` later.

    ``static_check=False`` exists only so tests can show that the runtime walls hold on their own. ``cancel``: set,
    the child is stopped within a second and :class:`~videvolve.errors.Cancelled` raised (nothing is scored).
    """
    started = time.monotonic()
    if static_check:
        problems = code_problems(harness)
        if problems:
            services.trace.write(Failed(kind=ErrorKind.STATIC, error="; ".join(problems)))
            return RunOutcome("error", ErrorKind.STATIC, "refused before running: " + "; ".join(problems),
                              usage=services.meter.to_dict())
    timeout = timeout or services.settings.wall_seconds
    if content_hash(harness.path) != harness.version_id:
        raise HarnessError(f"harness {harness.path} changed on disk since it was loaded (expected "
                           f"{harness.version_id}); harness versions are immutable")
    attempt = _Attempt(harness, services, timeout, pool, started)
    worker = threading.Thread(target=attempt.run, name=f"videvolve-task-{services.view.id}"[:60], daemon=True)
    worker.start()
    try:
        while worker.is_alive() and (left := attempt.deadline() + WATCHDOG_S - time.monotonic()) > 0:
            worker.join(min(left, 1.0))  # the deadline moves while the parent serves off the clock
            if interrupt.requested():  # Ctrl-C whose KeyboardInterrupt Python swallowed (see videvolve.interrupt)
                raise KeyboardInterrupt
            if cancel is not None and cancel.is_set():  # no one waits for the answer any more
                raise Cancelled(f"the task {services.view.id} was cancelled: its client went away")
        if worker.is_alive():
            attempt.expire()
            worker.join(WATCHDOG_GRACE_S)
    except BaseException:  # Ctrl-C while waiting: the child goes with the task
        attempt.expire()
        raise
    if worker.is_alive():  # still serving one of the child's requests: the task ends without it
        services.trace.write(Failed(kind=ErrorKind.TIMEOUT, error=attempt.why_late()))
        services.trace.seal()
        outcome = RunOutcome("error", ErrorKind.TIMEOUT, attempt.why_late(), usage=_usage(services))
    elif attempt.raised is not None:
        raise attempt.raised
    else:
        assert attempt.outcome is not None
        outcome = attempt.outcome
        outcome.usage = _usage(services)
    outcome.wall_s = round(time.monotonic() - started, 3)
    return outcome


def _usage(services: TaskServices) -> dict[str, Any]:
    """The meter's reading (retried: a request still being served may change it while it is read)."""
    for _ in range(5):
        try:
            return services.meter.to_dict()
        except RuntimeError:  # a set changed size during iteration
            time.sleep(0.01)
    return {}


class _Attempt:
    """One task's protocol with its child, run in a thread of its own so that the watchdog can end it."""

    def __init__(self, harness: Harness, services: TaskServices, timeout: float, pool: WarmPool | None,
                 started: float) -> None:
        self.harness, self.services, self.timeout, self.pool, self.started = harness, services, timeout, pool, started
        self.child: Child | None = None
        self.outcome: RunOutcome | None = None
        self.raised: BaseException | None = None
        self.serving: str | None = None
        self.served = 0.0
        """Seconds spent off the harness's clock so far (its sandbox's start, requests in :data:`OFF_THE_CLOCK`)."""
        self._serving_since: float | None = None
        self.request_limit = request_timeout_of(services.vlm)
        """Seconds one model request may take (its client's timeout; None: unbounded), asked once."""
        self.outages = 0.0
        """Seconds the model endpoint was failing while it served this task's requests (off every clock)."""
        self._down_since: float | None = None
        self._lock = threading.Lock()
        self._expired = False

    def expire(self) -> None:
        """The watchdog: kill the child's process group (its descriptors stay with the thread that uses them)."""
        with self._lock:
            self._expired = True
            child = self.child
        if child is not None:
            signal_child(child)

    def off(self) -> float:
        """Seconds spent off the harness's clock so far, the request being served included."""
        since = self._serving_since
        return self.served + (time.monotonic() - since if since is not None else 0.0)

    def down(self) -> float:
        """Seconds the model endpoint was failing while serving this task so far, an outage going on included."""
        since = self._down_since
        return self.outages + (time.monotonic() - since if since is not None else 0.0)

    def outage(self, since: float | None) -> None:
        """Start (``since``: when) or stop counting an outage of the model endpoint (:func:`outages_to`)."""
        if since is None and self._down_since is not None:
            self.outages += time.monotonic() - self._down_since
        self._down_since = since

    def deadline(self) -> float:
        """When the task times out: its timeout of the harness's own time, at most :data:`LONGEST` x it in all.

        An outage of the model endpoint is the machine's, not the harness's: it moves the deadline on by its length.
        A model request in flight may first fail by its own timeout (the endpoint's client's), so that a server that
        never answers becomes that outage (retried, then the run's clean stop), not the harness's timeout.
        """
        end = self.started + min(self.timeout + self.off(), LONGEST * self.timeout + self.down())
        since, limit = self._serving_since, self.request_limit
        if since is not None and self.serving in OFF_THE_CLOCK and limit is not None:
            end = max(end, since + limit + REQUEST_GRACE_S)  # an endpoint that never answers fails as one, not here
        return end

    def off_clock(self, since: float | None) -> None:
        """Start (``since``: when) or stop counting time off the harness's clock."""
        if since is None and self._serving_since is not None:
            self.served += time.monotonic() - self._serving_since
        self._serving_since = since

    def why_late(self) -> str:
        doing = f" (the parent was still serving its {self.serving!r} request)" if self.serving else ""
        off = self.off()
        own = time.monotonic() - self.started - off
        if off >= 1 and own < self.timeout:  # the longest time, spent mostly serving it
            return (f"the task did not finish within {LONGEST:g} x its {self.timeout:.0f} s timeout ({own:.0f} s of "
                    f"the harness's own time, {off:.0f} s serving its requests){doing}; if the model endpoint or "
                    f"this machine is that slow, lower --concurrency or raise --task-timeout")
        return (f"the harness did not finish within {self.timeout:.0f} s of its own time"
                + (f" (not counting {off:.0f} s serving its requests)" if off >= 1 else "") + doing)

    def run(self) -> None:
        """The outcome, or what the run must stop for (``raised``): never neither, whatever fails on the way."""
        try:
            with outages_to(self.outage):
                self.outcome = self._outcome()
        except BaseException as exc:  # infrastructure, or the task's own files could not be written
            self.raised = exc

    def _outcome(self) -> RunOutcome:
        try:
            outcome = self._run()
        except (InfraError, HostError):
            raise
        except BaseException as exc:  # never the run's: the task's crash, with the reason
            log.warning("task %s: %s while serving its harness", self.services.view.id, _short(exc))
            outcome = RunOutcome("error", ErrorKind.CRASH, f"the harness's task failed in the parent: {_short(exc)}")
            self.services.trace.write(Failed(kind=ErrorKind.CRASH, error=outcome.error))
        if self._expired and outcome.error_kind != ErrorKind.TIMEOUT:  # what the watchdog's kill caused
            outcome = RunOutcome("error", ErrorKind.TIMEOUT, self.why_late())
            self.services.trace.write(Failed(kind=ErrorKind.TIMEOUT, error=outcome.error))
        return outcome

    def _run(self) -> RunOutcome:
        harness, services, timeout = self.harness, self.services, self.timeout
        settings = services.settings
        asked = time.perf_counter()
        self.off_clock(time.monotonic())  # waiting for a sandbox is the machine's time
        pool = self.pool
        if pool is not None and pool.key == pool_key(harness, settings, timeout):
            child = pool.take()
        else:
            prepare = prepare_message(harness, settings, timeout)
            child = start_or_refuse(settings, (json.dumps(prepare) + "\n").encode())
        self.off_clock(None)
        with self._lock:
            self.child = child
            expired = self._expired
        if expired:
            signal_child(child)
        try:
            return self._converse(child, asked)
        finally:
            kill_child(child)

    def _converse(self, child: Child, asked: float) -> RunOutcome:
        services = self.services
        proc, stderr = child.proc, child.stderr
        spawned: float | None = asked  # "sandbox_start": what this task waited for its sandbox
        outcome: RunOutcome | None = None
        refused: set[str] = set()  # the kinds of the requests refused, and the last one's
        last_refused: str | None = None
        pipe = Pipe(proc)
        try:
            pipe.write((json.dumps({"task": services.view.model_dump(mode="json")}) + "\n").encode(),
                       self.deadline())
            while outcome is None:
                line = pipe.readline(self.deadline())
                if spawned is not None:  # the sandbox is up and the harness has asked for something
                    services.meter.spend("sandbox_start", time.perf_counter() - spawned)
                    spawned = None
                if line is None:
                    break
                msg, broken = decode_request(line)
                if msg is None:
                    outcome = RunOutcome("error", ErrorKind.CRASH, broken)
                    services.trace.write(Failed(kind=ErrorKind.CRASH, error=broken))
                    break
                op, args = msg["op"], msg.get("args", {})
                if op == "final":
                    try:
                        prediction, why = to_prediction(services.view, args.get("result"))
                    except (ValueError, TypeError, OverflowError, AttributeError, RecursionError) as exc:
                        prediction, why = None, f"the answer could not be read: {type(exc).__name__}: {exc}"
                    services.trace.write(Final(answer=str(args.get("result"))[:2000], parsed=why is None))
                    self.off_clock(time.monotonic())  # the parent's own check of a model's notice (SimVLM)
                    outcome = final_outcome(prediction, why, services.confirmed_notice() if why else None)
                    self.off_clock(None)
                elif op == "fail":
                    kind, error = failure(args.get("kind"), str(args.get("error"))[:3000], refused, last_refused)
                    services.trace.write(Failed(kind=kind, error=error))
                    outcome = RunOutcome("error", kind, error)
                else:
                    self.serving = str(op)[:100]
                    if isinstance(op, str) and op in OFF_THE_CLOCK:  # a hostile op may be any JSON value
                        self.off_clock(time.monotonic())
                    try:
                        reply = _serve(services, msg, op, args)
                    finally:
                        self.off_clock(None)
                        self.serving = None
                    if time.monotonic() >= self.deadline():
                        raise TimeoutError
                    if not reply["ok"]:
                        last_refused = str(reply["kind"])
                        refused.add(last_refused)
                    if "id" in msg:
                        pipe.write(encode_reply(reply, op), self.deadline())
        except TimeoutError:
            outcome = RunOutcome("error", ErrorKind.TIMEOUT, self.why_late())
        except InfraError:
            raise
        except (BrokenPipeError, HarnessError) as exc:
            outcome = RunOutcome("error", ErrorKind.CRASH, str(exc) or "the harness closed its channel")
        finally:
            pipe.close()
        if outcome is None:
            kill_child(child)
            tail = b"".join(stderr).decode(errors="replace")[-STDERR_TAIL:]
            code = proc.returncode
            why = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
            kind = ErrorKind.MEMORY if "MemoryError" in tail else ErrorKind.CRASH
            outcome = RunOutcome("error", kind, f"the harness process {why} without an answer. {tail}".strip())
            services.trace.write(Failed(kind=kind, error=outcome.error))
        return outcome


MAX_LOGGED_TRACEBACKS = 20
"""Failed requests logged with a traceback per process; later ones get one line each (the trace has them all)."""
_logged = iter(range(MAX_LOGGED_TRACEBACKS))


def _log_failure(op: str, task_id: str, exc: BaseException) -> None:
    """Log a request our code could not serve: a traceback for the first few, then one capped line."""
    if next(_logged, None) is not None:
        log.warning("request %r of task %s failed: %s", op, task_id, _short(exc), exc_info=exc)
    else:
        log.warning("request %r of task %s failed: %s (traceback not logged: more than %d so far)", op, task_id,
                    _short(exc), MAX_LOGGED_TRACEBACKS)


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:500]}"


def _serve(services: TaskServices, msg: dict[str, Any], op: Any, args: Any) -> dict[str, Any]:
    """Serve one request. Whatever it raises, except an infrastructure or host failure, is the harness's error."""
    try:
        result = services.handle(str(op), args if isinstance(args, dict) else {})
        return {"id": msg.get("id"), "ok": True, "result": result}
    except (InfraError, HostError):  # the endpoint, or this machine (the cache's disk full): never the harness's
        raise
    except RequestRefused as exc:  # a ServiceError, or a refusal of the reading services
        return {"id": msg.get("id"), "ok": False, "kind": exc.kind, "error": str(exc)}
    except TypeError as exc:
        return {"id": msg.get("id"), "ok": False, "kind": "invalid", "error": f"bad arguments to {op!r}: {exc}"}
    except Exception as exc:  # a request our code or the model could not serve: the harness's error, not the run's
        _log_failure(str(op)[:100], services.view.id, exc)
        services.trace.write(RequestError(op=str(op)[:100], error=f"{type(exc).__name__}: {exc}"[:2000]))
        return {"id": msg.get("id"), "ok": False, "kind": "invalid",
                "error": f"the request {str(op)[:100]!r} failed: {type(exc).__name__}: {exc}"[:3000]}
