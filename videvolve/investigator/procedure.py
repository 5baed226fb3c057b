"""The investigator: revisit a failed training task's video, compare with the trace and the gold, and diagnose.

Trusted code: it knows the gold answer and the evidence intervals, and uses them to decide where to look; its
perception probes never contain the answer ("which of these images show <what the question is about>?" on frames
it chooses). Categories, each produced when, and only when, its condition holds:

- ``format_error`` / ``budget_exhausted`` / ``infra_error`` / ``crash``: the harness's error outcome (parse;
  budget; bad request or media; crash, timeout, memory, static);
- ``boundary_error``: grounding, the prediction overlaps the gold but scores below the threshold;
- ``misperception``: the trace observed the evidence (or, for an absent target, reported something where a
  full-resolution probe sees no target) and a probe at the trace's own resolution does not read it, while a
  full-resolution probe does;
- ``evidence_unused``: the trace observed the evidence and a probe at the trace's own resolution reads it;
- ``missed_event``: the trace never observed the evidence and a dense full-resolution probe inside it finds it;
- ``transcript_unused``: where the video has a transcript, the answer was said in the window (or written on
  screen there, read by OCR when the extra is installed) and the harness did not read it there (``reading.py``);
- ``unresolved``: none of the above could be established (the probe does not see it either).

Probe frames and tokens are the investigator's own ledger, never the solver's.
"""

from __future__ import annotations

import hashlib
import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from videvolve.config import RuntimeSettings
from videvolve.datasets.transcripts import load_transcript
from videvolve.errors import ErrorKind
from videvolve.evaluation.results import TaskResult, video_fingerprint
from videvolve.investigator.reading import said_unread, written_unread
from videvolve.memory.records import Diagnosis, Evidence
from videvolve.metrics.intervals import hull_iou
from videvolve.models.base import VLM
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import CostModel
from videvolve.models.parsing import parse_match
from videvolve.needles.frames import frame_source
from videvolve.skill_library.services import TaskServices
from videvolve.skill_library.steps import ModelCall, SheetSpec, TraceStep
from videvolve.tasks import Task

ERROR_CATEGORIES = {ErrorKind.PARSE: "format_error", ErrorKind.BUDGET: "budget_exhausted",
                    ErrorKind.BAD_REQUEST: "infra_error", ErrorKind.MEDIA: "infra_error", ErrorKind.CRASH: "crash",
                    ErrorKind.TIMEOUT: "crash", ErrorKind.MEMORY: "crash", ErrorKind.STATIC: "crash",
                    ErrorKind.INVALID: "crash", ErrorKind.UNSUPPORTED: "format_error"}


def probe_target(task: Task) -> str:
    """What probes ask about: the question itself, never its answer."""
    text = "what this question is about: " + task.question
    if task.options:
        text += " (options: " + "; ".join(task.options) + ")"
    return text


@dataclass
class Seen:
    """Observations of the trace: time and how it was shown (frame max_side, or sheet cell width)."""

    time: float
    kind: str
    size: int | None


def trace_observations(trace: Sequence[TraceStep]) -> list[Seen]:
    """Every observation the harness showed the model, from its trace."""
    out: list[Seen] = []
    for step in trace:
        if isinstance(step, ModelCall):
            for spec in step.observations:
                size = spec.cell_width if isinstance(spec, SheetSpec) else spec.max_side
                out.extend(Seen(t, spec.kind, size) for t in spec.times)
    return out


def diagnosis_id(run_id: str, iteration: int, harness_id: str, task_id: str, run_uid: str = "") -> str:
    """Deterministic, so a resumed run writes the same records; ``run_uid`` tells apart runs of one name.

    The memory is shared by runs, and two runs may have one name (``exp1/run`` and ``exp2/run``, a run started again
    where one was deleted): without the run's own ``run_uid`` (drawn when it starts), one's records replace the other's.
    """
    run = f"{run_id}/{run_uid}" if run_uid else run_id  # runs from before run_uid keep their ids
    return hashlib.sha1(f"{run}:{iteration}:{harness_id}:{task_id}".encode()).hexdigest()[:16]


def new_diagnosis(task: Task, result: TaskResult, run_id: str, iteration: int, run_uid: str = "",
                  **fields: Any) -> Diagnosis:
    """A diagnosis of ``result`` on ``task`` (its id deterministic), with the findings in ``fields``."""
    return Diagnosis(id=diagnosis_id(run_id, iteration, result.harness_id, task.id, run_uid), run_id=run_id,
                     iteration=iteration, harness_id=result.harness_id, task_id=task.id, video_id=task.video_id,
                     video_fingerprint=video_fingerprint(task.video), kind=task.kind, source=task.source,
                     label_source=task.label_source, **fields)


class Investigator:
    """Diagnoses failures with perception probes on the original videos."""

    def __init__(self, vlm: VLM, cost: CostModel, probe_frames: int = 16, cache: ResponseCache | None = None,
                 image_format: str = "png") -> None:
        self.vlm = vlm
        self.cost = cost
        self.probe_frames = probe_frames
        self.cache = cache
        self.settings = RuntimeSettings(image_format="jpeg" if image_format == "jpeg" else "png")
        self.ledger: dict[str, int] = {"frames": 0, "image_tokens": 0, "model_calls": 0, "ocr_calls": 0}

    def _probe(self, task: Task, times: list[float], size: int | None = None, sheet: bool = False) -> set[float]:
        """Times (among ``times``) at which a probe sees what the question is about."""
        times = sorted(set(times))[: self.probe_frames]
        if not times:
            return set()
        services = TaskServices(task.view(), task.video, self.vlm, self.cost, self.settings, cache=self.cache,
                                frames=frame_source(task))  # a generated task's needles, as its harness saw
        if sheet:
            handles = [services.op_sheet(times, cols=min(6, len(times)), cell_width=size or 160)["handle"]]
        else:
            handles = [o["handle"] for o in services.op_frames(times, max_side=size)]
        reply = services.op_ask(handles, mode="match", target=probe_target(task))
        usage = services.meter.to_dict()
        for key in self.ledger:
            self.ledger[key] += int(usage.get(key, 0))
        found = parse_match(reply) or {"yes": []}
        return {t for t in times if any(abs(t - y) <= 0.006 for y in found["yes"])}  # captions carry 2 decimals

    def diagnose(self, task: Task, result: TaskResult, trace: Sequence[TraceStep], run_id: str,
                 iteration: int, run_uid: str = "") -> Diagnosis:
        """One diagnosis for one failed result (``run_uid``: see :func:`diagnosis_id`)."""
        before = dict(self.ledger)
        category, evidence, facts = self._classify(task, result, trace)
        cost = {k: self.ledger[k] - before[k] for k in self.ledger}
        hypothesis, applies, preserve = _narrative(category, task, result, facts)
        return new_diagnosis(task, result, run_id, iteration, run_uid, category=category, evidence=evidence,
                             hypothesis=hypothesis, applies_when=applies, preserve=preserve, probe_cost=cost)

    def _classify(self, task: Task, result: TaskResult,
                  trace: Sequence[TraceStep]) -> tuple[Any, list[Evidence], dict[str, Any]]:
        if result.outcome == "error":
            kind = ErrorKind(result.error_kind or "crash")
            return ERROR_CATEGORIES.get(kind, "crash"), [], {"error": result.error or ""}
        seen = trace_observations(trace)
        times = sorted({s.time for s in seen})
        spacing = statistics.median([b - a for a, b in itertools.pairwise(times)]) if len(times) > 1 \
            else task.duration
        facts: dict[str, Any] = {"spacing": spacing, "observed": len(times)}
        pred = [] if result.prediction is None or not isinstance(result.prediction.answer, list) else \
            [i.pair() for i in result.prediction.answer]
        if task.kind == "grounding":
            gold = [i.pair() for i in task.intervals]
            facts.update(pred=pred, gold=gold)
            if not gold:  # an absent target, reported anyway
                centers = [(a + b) / 2 for a, b in pred][: self.probe_frames]
                hits = self._probe(task, centers)
                ev = [Evidence(time=t, seen="target" if t in hits else "no target") for t in centers]
                return ("misperception" if centers and not hits else "unresolved"), ev, facts
            if any(hull_iou(p, g) > 0 for p in pred for g in gold):
                facts["iou"] = result.score
                return "boundary_error", [Evidence(time=p[0], seen="predicted start") for p in pred], facts
            spans = gold
        else:
            spans = [i.pair() for i in task.evidence]
            facts.update(gold=spans)
        reading = self._reading(task, trace)
        if reading:
            return "transcript_unused", reading, facts
        if not spans:
            return "unresolved", [], facts
        inside = [s for s in seen if any(a <= s.time <= b for a, b in spans)]
        if not inside:
            dense = [a + (b - a) * (k + 0.5) / 4 for a, b in spans for k in range(4)]
            hits = self._probe(task, dense)
            ev = [Evidence(time=t, seen="evidence" if t in hits else "nothing") for t in dense[: self.probe_frames]]
            facts["nearest"] = min((min(abs(t - a), abs(t - b)) for t in times for a, b in spans), default=None)
            return ("missed_event" if hits else "unresolved"), ev, facts
        first = inside[0]
        at_times = [s.time for s in inside][: self.probe_frames]
        as_seen = self._probe(task, at_times, size=first.size, sheet=first.kind == "sheet")
        facts["resolution"] = first.size
        if as_seen:
            return "evidence_unused", [Evidence(time=t, seen="evidence, readable as shown") for t in sorted(as_seen)], \
                facts
        sharp = self._probe(task, at_times)
        ev = [Evidence(time=t, seen="readable only at full resolution" if t in sharp else "unreadable")
              for t in at_times]
        return ("misperception" if sharp else "unresolved"), ev, facts


    def _reading(self, task: Task, trace: Sequence[TraceStep]) -> list[Evidence]:
        """Where the video has a transcript: the answer said (or written) in the window, unread by the harness."""
        transcript = load_transcript(task)
        if transcript is None:
            return []
        said = said_unread(task, transcript, trace)
        if said:
            return said
        written, calls = written_unread(task, trace)
        self.ledger["ocr_calls"] += calls
        return written


def _span(spans: list[tuple[float, float]]) -> str:
    return ", ".join(f"{a:.1f}-{b:.1f} s" for a, b in spans[:3]) or "none"


def _narrative(category: str, task: Task, result: TaskResult, f: dict[str, Any]) -> tuple[str, str, str]:
    """A deterministic summary: hypothesis, when a fix applies, what to preserve."""
    gold = f.get("gold") or []
    length = max((b - a for a, b in gold), default=0.0)
    spacing = float(f.get("spacing", 0.0))
    minutes = (task.duration or 0.0) / 60
    preserve = f"answers that were right; at most {result.frames} frames a question"
    if category == "missed_event":
        return (f"The evidence ({_span(gold)}, {length:.1f} s long) was never observed: observations were "
                f"{spacing:.1f} s apart, and a probe inside the interval sees it. A short event fell between sampled "
                "frames.",
                f"{task.kind} questions about events of about {length:.0f} s in {minutes:.0f}-minute videos sampled "
                f"every {spacing:.0f} s", preserve)
    if category == "misperception":
        res = f.get("resolution")
        shown = f"{res} px" if res else "the resolution shown"
        return (f"The trace observed the moment ({_span(gold)}) but at {shown}, where the model could not read it; "
                "a full-resolution probe reads it. Small details were lost to downscaling.",
                f"{task.kind} questions whose answer depends on small details; observations at {shown}", preserve)
    if category == "evidence_unused":
        return (f"The trace's own observations show the evidence ({_span(gold)}), readable as shown, but the answer "
                "did not use it.", f"{task.kind} questions where the right observation was already made", preserve)
    if category == "transcript_unused":
        return (f"The answer was said (or written) in the window ({_span(gold) if gold else 'the video'}) but the "
                "harness never read the transcript there: it only looked.",
                f"{task.kind} questions about videos with a transcript, whose answer is spoken or written", preserve)
    if category == "boundary_error":
        return (f"The event was found but its edges are coarse: predicted {_span(f.get('pred', []))} for "
                f"{_span(gold)} (IoU {f.get('iou', 0):.2f}); boundaries fell halfway to observations {spacing:.1f} s "
                "apart.", f"grounding of events of about {length:.0f} s with observations {spacing:.0f} s apart",
                preserve)
    if category == "unresolved":
        return ("Neither the trace nor a dense full-resolution probe could see the evidence.",
                f"{task.kind} questions the model cannot perceive", preserve)
    return (f"The harness failed with {result.error_kind}: {(f.get('error') or '').splitlines()[0][:300]}",
            f"any question where the harness hits '{result.error_kind}'", preserve)
