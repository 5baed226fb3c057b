"""Run a harness on one task in the sandbox and serve its requests; every failure becomes an outcome.

Outcomes: ``ok``, or ``error`` with a kind: ``parse`` (no usable answer), ``unsupported`` (no usable answer after
the model said it cannot read this input: SimVLM outside SynthWorld), ``budget``, ``timeout``, ``memory``,
``crash`` (an exception, a killed process, a protocol violation), ``bad_request`` (the model endpoint rejected a
request, e.g. too many images), ``invalid`` (a request the parent refused or could not serve: bad arguments, a
malformed chat, a pixel, handle or memory cap), ``media``, ``static`` (refused before running). Infrastructure
failures (endpoint down, auth) are not outcomes: :class:`InfraError` propagates so the run stops cleanly and
resumes later.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from videvolve.errors import ErrorKind, HarnessError, InfraError, RequestRefused
from videvolve.models.parsing import parse_intervals, parse_letter
from videvolve.skill_library.harness import Harness, content_hash
from videvolve.skill_library.pool import STDERR_TAIL, WarmPool, kill_child, pool_key, prepare_message, start_child
from videvolve.skill_library.sdk import MAX_MESSAGE_BYTES
from videvolve.skill_library.services import TaskServices
from videvolve.skill_library.static_check import check_source
from videvolve.tasks import Interval, Prediction, TaskView

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    """The result of one harness on one task (no score: scoring needs the gold answer, kept elsewhere)."""

    outcome: str
    error_kind: str | None = None
    error: str | None = None
    prediction: Prediction | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0


def _to_prediction(view: TaskView, result: Any) -> tuple[Prediction | None, str | None]:
    """Turn what ``solve`` returned into a prediction, or say why it cannot be used."""
    raw = ""
    evidence: list[float] = []
    answer = result
    if isinstance(result, dict):
        answer = result.get("answer")
        raw = str(result.get("raw", ""))[:4000]
        ev = result.get("evidence_times", [])
        evidence = [float(t) for t in ev if isinstance(t, int | float)] if isinstance(ev, list) else []
    if view.kind == "mcq":
        n = len(view.options or ())
        letter = parse_letter(answer, n) if isinstance(answer, str) else None
        if letter is None:
            return None, f"no option letter in the answer {str(answer)[:200]!r}"
        return Prediction(task_id=view.id, kind="mcq", answer=letter, raw=raw or str(answer)[:4000],
                          evidence_times=evidence), None
    if isinstance(answer, str):
        pairs = parse_intervals(answer, view.duration)
        raw = raw or answer[:4000]
    elif isinstance(answer, list) and all(isinstance(x, list | tuple) and len(x) == 2 and
                                          all(isinstance(v, int | float) for v in x) for x in answer):
        pairs = parse_intervals(json.dumps([list(map(float, x)) for x in answer]), view.duration)
    else:
        pairs = None
    if pairs is None:
        return None, f"no intervals in the answer {str(answer)[:200]!r}"
    return Prediction(task_id=view.id, kind="grounding", answer=[Interval(start=a, end=b) for a, b in pairs],
                      raw=raw, evidence_times=evidence), None


def _final(prediction: Prediction | None, why: str | None, notice: str | None) -> RunOutcome:
    """A final answer's outcome: ok, else ``unsupported`` after a model's notice, else ``parse``."""
    if why is None:
        return RunOutcome("ok", prediction=prediction)
    if notice is not None:
        return RunOutcome("error", ErrorKind.UNSUPPORTED.value, notice)
    return RunOutcome("error", ErrorKind.PARSE, why)


class _Pipe:
    """Reads newline-delimited messages from the child with a deadline and a size cap."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buf = b""
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.fd, selectors.EVENT_READ)

    def readline(self, deadline: float) -> bytes | None:
        while b"\n" not in self.buf:
            if len(self.buf) > MAX_MESSAGE_BYTES:
                raise HarnessError("message from the harness exceeds the size cap")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not self.sel.select(timeout=left):
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line


def code_problems(harness: Harness) -> list[str]:
    """The static check of every file of harness code."""
    problems = check_source(harness.solver_source, "solver.py")
    for tool in harness.tools:
        problems += check_source(tool.source, tool.path)
    return problems


def _child_kind(kind: object) -> ErrorKind:
    """The error kind a child reports, trusted only among the harness's own kinds (anything else is a crash)."""
    try:
        known = ErrorKind(str(kind))
    except ValueError:
        return ErrorKind.CRASH
    return ErrorKind.CRASH if known.infrastructure else known


def run_task(harness: Harness, services: TaskServices, timeout: float | None = None,
             static_check: bool = True, pool: WarmPool | None = None) -> RunOutcome:
    """Run ``harness`` on the task behind ``services`` in a fresh sandboxed interpreter.

    With a ``pool`` started for this harness and these limits, the interpreter is one of its children, started
    ahead of time and never used before; otherwise it is started now.

    ``static_check=False`` exists only so tests can show that the runtime walls hold on their own.
    """
    started = time.monotonic()
    if static_check:
        problems = code_problems(harness)
        if problems:
            services.trace.write("error", kind="static", error="; ".join(problems))
            return RunOutcome("error", ErrorKind.STATIC, "refused before running: " + "; ".join(problems),
                              usage=services.meter.to_dict())
    settings = services.settings
    timeout = timeout or settings.wall_seconds
    if content_hash(harness.path) != harness.version_id:
        raise HarnessError(f"harness {harness.path} changed on disk since it was loaded (expected "
                           f"{harness.version_id}); harness versions are immutable")
    asked = time.perf_counter()
    if pool is not None and pool.key == pool_key(harness, settings, timeout):
        child = pool.take()
    else:
        prepare = prepare_message(harness, settings, timeout)
        child = start_child(settings, (json.dumps(prepare) + "\n").encode())
    proc, stderr = child.proc, child.stderr
    spawned: float | None = asked  # "sandbox_start": what this task waited for its sandbox
    outcome: RunOutcome | None = None
    last_error_kind: str | None = None
    try:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps({"task": services.view.model_dump(mode="json")}) + "\n").encode())
        proc.stdin.flush()
        pipe = _Pipe(proc)
        deadline = started + timeout
        while outcome is None:
            line = pipe.readline(deadline)
            if spawned is not None:  # the sandbox is up and the harness has asked for something
                services.meter.spend("sandbox_start", time.perf_counter() - spawned)
                spawned = None
            if line is None:
                break
            try:
                msg = json.loads(line)
                op, args = msg["op"], msg.get("args", {})
            except (ValueError, KeyError, TypeError):
                outcome = RunOutcome("error", ErrorKind.CRASH, "the harness broke the protocol (not a JSON request)")
                break
            if op == "final":
                try:
                    prediction, why = _to_prediction(services.view, args.get("result"))
                except (ValueError, TypeError, OverflowError, AttributeError) as exc:
                    prediction, why = None, f"the answer could not be read: {type(exc).__name__}: {exc}"
                services.trace.write("final", answer=str(args.get("result"))[:2000], parsed=why is None)
                outcome = _final(prediction, why, services.meter.notice)
            elif op == "fail":
                kind = _child_kind(args.get("kind"))
                if kind == ErrorKind.BAD_REQUEST and last_error_kind in (
                        ErrorKind.BUDGET, ErrorKind.BAD_REQUEST, ErrorKind.MEDIA, ErrorKind.INVALID, ErrorKind.PARSE):
                    kind = ErrorKind(last_error_kind)
                elif kind == ErrorKind.BAD_REQUEST:
                    kind = ErrorKind.CRASH
                services.trace.write("error", kind=kind, error=str(args.get("error"))[:3000])
                outcome = RunOutcome("error", kind, str(args.get("error"))[:3000])
            else:
                reply = _serve(services, msg, op, args)
                if not reply["ok"]:
                    last_error_kind = reply["kind"]
                if "id" in msg:
                    proc.stdin.write((json.dumps(reply) + "\n").encode())
                    proc.stdin.flush()
    except TimeoutError:
        outcome = RunOutcome("error", ErrorKind.TIMEOUT, f"the harness did not finish within {timeout:.0f} s")
    except InfraError:
        raise
    except (BrokenPipeError, HarnessError) as exc:
        outcome = RunOutcome("error", ErrorKind.CRASH, str(exc) or "the harness closed its channel")
    finally:
        kill_child(child)
    if outcome is None:
        tail = b"".join(stderr).decode(errors="replace")[-STDERR_TAIL:]
        code = proc.returncode
        why = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        kind = ErrorKind.MEMORY if "MemoryError" in tail else ErrorKind.CRASH
        outcome = RunOutcome("error", kind, f"the harness process {why} without an answer. {tail}".strip())
        services.trace.write("error", kind=kind, error=outcome.error)
    outcome.usage = services.meter.to_dict()
    outcome.wall_s = round(time.monotonic() - started, 3)
    return outcome


def _serve(services: TaskServices, msg: dict[str, Any], op: Any, args: Any) -> dict[str, Any]:
    """Serve one request. Whatever it raises, except an infrastructure failure, is the harness's error."""
    try:
        result = services.handle(str(op), args if isinstance(args, dict) else {})
        return {"id": msg.get("id"), "ok": True, "result": result}
    except InfraError:
        raise
    except RequestRefused as exc:  # a ServiceError, or a refusal of the reading services
        return {"id": msg.get("id"), "ok": False, "kind": exc.kind, "error": str(exc)}
    except TypeError as exc:
        return {"id": msg.get("id"), "ok": False, "kind": "invalid", "error": f"bad arguments to {op!r}: {exc}"}
    except Exception as exc:  # a request our code or the model could not serve: the harness's error, not the run's
        log.warning("request %r of task %s failed: %s", op, services.view.id, exc, exc_info=True)
        services.trace.write("request_error", op=str(op)[:100], error=f"{type(exc).__name__}: {exc}"[:2000])
        return {"id": msg.get("id"), "ok": False, "kind": "invalid",
                "error": f"the request {str(op)[:100]!r} failed: {type(exc).__name__}: {exc}"[:3000]}
