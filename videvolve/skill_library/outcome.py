"""What a harness's ``solve`` returned, or the failure its child reported, as a task's outcome."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from videvolve.errors import ErrorKind
from videvolve.models.parsing import parse_intervals, parse_letter
from videvolve.tasks import Interval, Prediction, TaskView


@dataclass
class RunOutcome:
    """The result of one harness on one task (no score: scoring needs the gold answer, kept elsewhere)."""

    outcome: str
    error_kind: str | None = None
    error: str | None = None
    prediction: Prediction | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0


def to_prediction(view: TaskView, result: Any) -> tuple[Prediction | None, str | None]:
    """Turn what ``solve`` returned into a prediction, or say why it cannot be used."""
    raw = ""
    evidence: list[float] = []
    answer = result
    if isinstance(result, dict):
        answer = result.get("answer")
        raw = str(result.get("raw", ""))[:4000]
        evidence = _times(result.get("evidence_times", []))
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


def _times(value: Any) -> list[float]:
    """The finite times in what a harness gave as evidence (JSON carries NaN and Infinity; a stored result cannot)."""
    times = []
    for t in value if isinstance(value, list) else ():
        if isinstance(t, int | float) and not isinstance(t, bool):
            try:
                t = float(t)
            except OverflowError:  # an int too large for a float
                continue
            if math.isfinite(t):
                times.append(t)
    return times


def final_outcome(prediction: Prediction | None, why: str | None, notice: str | None) -> RunOutcome:
    """A final answer's outcome: ok, else ``unsupported`` after a model's notice, else ``parse``.

    ``notice``: one the parent's own request got too (``TaskServices.confirmed_notice``), never the harness's alone.
    """
    if why is None:
        return RunOutcome("ok", prediction=prediction)
    if notice is not None:
        return RunOutcome("error", ErrorKind.UNSUPPORTED.value, notice)
    return RunOutcome("error", ErrorKind.PARSE, why)


CHILD_KINDS = frozenset({ErrorKind.MEMORY, ErrorKind.BUDGET, ErrorKind.BAD_REQUEST, ErrorKind.CRASH})
"""The kinds a child's bootstrap reports of itself; ``bad_request`` (a request the parent refused) is then read as
the refusal's own kind, and ``budget`` stands only after a refusal for the budget (:func:`failure`). The rest
(media, unsupported, parse, ...) only the parent can tell."""
RELABELLED = frozenset({ErrorKind.BUDGET, ErrorKind.BAD_REQUEST, ErrorKind.MEDIA, ErrorKind.INVALID, ErrorKind.PARSE})
"""The refusals' kinds an uncaught ``SDKError`` (reported ``bad_request``) is read as: the last refusal's."""


def child_kind(kind: object) -> ErrorKind:
    """The error kind a child reports, trusted only among :data:`CHILD_KINDS` (anything else is a crash).

    A child that claimed ``media`` or ``unsupported`` (not the harness's fault) would pass validation broken, and have
    its results never reused.
    """
    try:
        known = ErrorKind(str(kind))
    except ValueError:
        return ErrorKind.CRASH
    return known if known in CHILD_KINDS else ErrorKind.CRASH


def failure(claimed: object, error: str, refused: set[str], last: str | None) -> tuple[ErrorKind, str]:
    """A child's ``fail`` as the task's error kind and text, with no kind the parent did not see for itself.

    ``refused``: the kinds of this task's requests the parent refused (``last``: the last one's). An uncaught
    ``SDKError`` (``bad_request``) is the last refusal's kind. ``budget`` is not the harness's fault, so it stands
    only where the parent refused a request of this task for its budget: a ``BudgetExceeded`` the harness raised
    itself (or after refusals of other kinds) would pass validation broken, and is its crash.
    """
    kind = child_kind(claimed)
    if kind == ErrorKind.BAD_REQUEST:
        kind = ErrorKind(last) if last in RELABELLED else ErrorKind.CRASH
    if kind == ErrorKind.BUDGET and ErrorKind.BUDGET not in refused:
        return ErrorKind.CRASH, ("the harness raised BudgetExceeded itself (no request of this task was refused for "
                                 "its budget): " + error)[:3000]
    return kind, error
