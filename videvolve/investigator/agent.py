"""The investigator as an agent (``--investigator agent``): a model plans its probes and writes the diagnosis.

It gets what the procedure knows (the question, the gold answer and evidence, the prediction, what the trace
observed), looks at the training task's video with the editor's ``probe`` tool (same arguments, same refusal of a
question that contains the gold answer, same function underneath) and ends with ``diagnose``: a category of the
fixed set, evidence whose times are times it probed, a hypothesis, when a fix applies and what to preserve, all
validated. Whenever the conversation yields no usable diagnosis (no tool call, unknown tools or bad arguments round
after round, an invalid diagnosis every time, its rounds spent, a request the endpoint rejects or a reply it cannot
read) the decision tree's diagnosis is kept, marked ``investigator="procedure"`` with the reason in ``fallback``.

Its model calls go through the response cache and its own ledger (``MeteredVLM``); its probes are the
investigator's ledger, never the solver's. Each investigation is kept in ``RUN/investigations/<iteration>/<task>/``
(iterations numbered from 1, as everywhere a person reads them)
(the conversation and the probes' images).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from videvolve.editing.probe import ProbeArgs, leaks_gold, run_probe
from videvolve.evaluation.results import TaskResult
from videvolve.investigator.procedure import Investigator, new_diagnosis, trace_observations
from videvolve.memory.records import CATEGORIES, Category, Diagnosis, Evidence
from videvolve.models.base import ToolCall
from videvolve.models.cache import MeteredVLM
from videvolve.models.toolloop import ToolLoop
from videvolve.rundir import task_stem
from videvolve.skill_library.steps import OcrRead, TraceStep, TranscriptRead
from videvolve.tasks import LETTERS, Task

SYSTEM = """You investigate why an executable harness, which lets a frozen vision-language model answer questions
about long videos, failed on one training question. You know the gold answer; the harness did not. Look at the video
with `probe` (frames, a contact sheet or a clip at times and a resolution you choose, and a question of yours that
must not contain the gold answer), compare with what the harness observed, and finish with `diagnose`. The
categories:
- missed_event: the harness never observed the evidence, and a probe inside it sees it;
- misperception: the harness observed the evidence, but at its resolution the model cannot read it; a
  full-resolution probe can;
- evidence_unused: the harness observed the evidence, readable as shown, and the answer did not use it;
- boundary_error: grounding, the prediction overlaps the gold but its edges are off;
- transcript_unused: the answer is said (or written) in the window and the harness never read it there;
- format_error, budget_exhausted, infra_error, crash: the harness itself failed with that error;
- unresolved: none of the above can be established (the probe does not see it either).
Evidence times must be times you probed. Write the hypothesis, when a fix applies and what it must preserve so that
they generalise to other questions, not only this one."""

NUDGE = "Use the tools: probe the video, then call diagnose."


class DiagnoseArgs(BaseModel):
    """Your diagnosis of this failure (ends the investigation)."""

    category: Category = Field(description="one of: " + ", ".join(CATEGORIES))
    evidence: list[Evidence] = Field(default_factory=list, max_length=32,
                                     description="times you probed (seconds) and what was seen there")
    hypothesis: str = Field(min_length=1, description="why the harness failed")
    applies_when: str = Field(min_length=1, description="the questions and videos a fix of this applies to")
    preserve: str = Field(min_length=1, description="behaviour a fix must keep")


TOOLS: dict[str, tuple[type[BaseModel], str]] = {
    "probe": (ProbeArgs, "Show the model frames, a sheet or a clip of the task's video and ask a question "
                         "(refused if it contains the gold answer)."),
    "diagnose": (DiagnoseArgs, "Submit the diagnosis (validated: a known category, evidence at probed times)."),
}
TIME_TOLERANCE = 0.006
"""Seconds within which an evidence time matches a probed time (captions and replies carry two decimals)."""


def schemas() -> list[dict[str, Any]]:
    """OpenAI function schemas of the investigator's tools."""
    return [{"type": "function", "function": {"name": n, "description": d, "parameters": m.model_json_schema()}}
            for n, (m, d) in TOOLS.items()]


def _gold(task: Task) -> str:
    if task.kind == "mcq" and isinstance(task.answer, str) and task.options:
        return f"{task.answer} ({task.options[LETTERS.index(task.answer)]})"
    spans = [f"{i.start:.2f}-{i.end:.2f} s" for i in task.intervals]
    return ", ".join(spans) or "the target is absent from the video"


def brief(task: Task, result: TaskResult, trace: Sequence[TraceStep]) -> str:
    """The failure as the agent sees it: question, gold, prediction, outcome and what the trace observed."""
    lines = [f"Task {task.id} ({task.kind}), video of {task.duration or 0:.1f} s.", f"Question: {task.question}"]
    if task.options:
        lines += [f"  {LETTERS[i]}. {o}" for i, o in enumerate(task.options)]
    lines.append(f"Gold answer: {_gold(task)}")
    if task.evidence:
        lines.append("Evidence (where the answer can be seen): " +
                     ", ".join(f"{i.start:.2f}-{i.end:.2f} s" for i in task.evidence))
    answer = None if result.prediction is None else result.prediction.answer
    pred = [f"{i.start:.2f}-{i.end:.2f} s" for i in answer] if isinstance(answer, list) else answer
    lines.append(f"Harness prediction: {pred}; score {result.score:.3f}; outcome {result.outcome}" +
                 (f" ({result.error_kind}: {(result.error or '').strip()[:400]})" if result.outcome == "error" else ""))
    groups: dict[str, list[float]] = {}
    for s in trace_observations(trace):
        groups.setdefault(f"{s.kind} at {s.size} px" if s.size else f"{s.kind} at full resolution", []).append(s.time)
    for how, times in groups.items():
        shown = ", ".join(f"{t:.2f}" for t in sorted(set(times))[:64])
        lines.append(f"The harness observed {len(set(times))} time(s) as {how}: {shown}")
    if not groups:
        lines.append("The harness observed nothing of the video.")
    reads = [s for s in trace if isinstance(s, TranscriptRead | OcrRead)]
    if reads:  # as the brief said it when steps were dicts: an OCR read names no window
        lines.append("It read: " + "; ".join(
            f"transcript {s.start}-{s.end}" if isinstance(s, TranscriptRead) else "ocr -" for s in reads[:8]))
    lines.append(f"Probe this video with task_id {task.id!r}; finish with diagnose.")
    return "\n".join(lines)


class Session:
    """One investigation: the probe and diagnose tools over one failed task, with the times it probed."""

    def __init__(self, inv: Investigator, task: Task, folder: Path, max_probes: int) -> None:
        self.inv, self.task, self.folder, self.max_probes = inv, task, folder, max_probes
        self.probes = 0
        self.probed: list[tuple[float, float]] = []
        """Spans (a point for frames and sheets) the probes showed."""

    def call(self, call: ToolCall) -> tuple[str, bool, DiagnoseArgs | None]:
        """Run one tool call: (text for the model, whether it succeeded, the diagnosis when valid)."""
        if call.name not in TOOLS:
            return f"error: unknown tool {call.name!r}; the tools are {', '.join(TOOLS)}", False, None
        model, _ = TOOLS[call.name]
        try:
            args = model.model_validate(call.arguments or {})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            what = "invalid diagnosis" if call.name == "diagnose" else f"bad arguments for {call.name}"
            return f"error: {what}: {problems}", False, None
        if isinstance(args, ProbeArgs):
            return self.probe(args)
        assert isinstance(args, DiagnoseArgs)
        unprobed = [e.time for e in args.evidence if not self.was_probed(e.time)]
        if unprobed:
            return (f"error: invalid diagnosis: evidence time(s) {', '.join(f'{t:g}' for t in unprobed[:8])} were "
                    "never probed; give times you probed (or probe them first)"), False, None
        return "diagnosis recorded", True, args

    def was_probed(self, t: float) -> bool:
        """Whether a probe showed time ``t``."""
        return any(a - TIME_TOLERANCE <= t <= b + TIME_TOLERANCE for a, b in self.probed)

    def probe(self, args: ProbeArgs) -> tuple[str, bool, None]:
        """The editor's probe on this task's video (only this training task; never a question with the answer)."""
        if args.task_id != self.task.id:
            return f"refused: only the task under investigation ({self.task.id}) can be probed", False, None
        leak = leaks_gold(self.task, args.question)
        if leak:
            return f"refused: {leak}; ask about what to look for, not the answer", False, None
        if self.probes >= self.max_probes:
            return f"refused: this investigation's {self.max_probes} probes are spent; diagnose now", False, None
        self.probes += 1
        inv = self.inv
        out = run_probe(args, self.task, inv.vlm, inv.cost, inv.cache, inv.settings.image_format,
                        self.folder / "probes" / f"{self.probes:02d}")
        inv.ledger["frames"] += int(out.get("frames", 0))
        inv.ledger["image_tokens"] += int(out.get("visual_tokens", 0))
        inv.ledger["model_calls"] += int(out.get("model_calls", 0))
        if "error" in out:
            return f"error: the probe failed: {out['error']}", False, None
        times = sorted(args.times)
        self.probed += [(times[0], times[-1])] if args.show == "clip" else [(t, t) for t in times]
        shown = {"probe": self.probes, "times": times, "show": args.show, "mode": args.mode, "reply": out["reply"],
                 "images": [f"probes/{self.probes:02d}/{n}" for n in out.get("images", [])]}
        return json.dumps(shown), True, None


class AgentInvestigator:
    """Diagnoses a failure with a tool-calling model; the decision tree's diagnosis when its reply is unusable."""

    def __init__(self, model: MeteredVLM, procedure: Investigator, root: Path, rounds: int = 8) -> None:
        self.model, self.procedure, self.root, self.rounds = model, procedure, root, rounds
        self.ledger = procedure.ledger
        """Probe frames, tokens and calls, shared with the procedure (the investigator's one ledger)."""

    def diagnose(self, task: Task, result: TaskResult, trace: Sequence[TraceStep], run_id: str,
                 iteration: int, run_uid: str = "") -> Diagnosis:
        """The model's diagnosis, or the procedure's with why in ``fallback`` (``run_uid``: its run's, in its id)."""
        before = {**self.ledger, "agent_calls": int(self.model.ledger["calls"])}
        folder = self.root / str(iteration + 1) / task_stem(task.id)  # numbered from 1
        folder.mkdir(parents=True, exist_ok=True)
        session = Session(self.procedure, task, folder, max_probes=self.rounds)
        loop: ToolLoop[DiagnoseArgs] = ToolLoop(self.model, schemas(), self.rounds, who="investigator",
                                                goal="diagnosing", nudge=NUDGE)
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": brief(task, result, trace)}]
        found = loop.run(messages, session.call)
        (folder / "conversation.json").write_text(json.dumps({"messages": messages, "failure": loop.failure},
                                                             indent=1), encoding="utf-8")
        if found is None:
            fallback = self.procedure.diagnose(task, result, trace, run_id, iteration, run_uid)
            why = loop.failure or "no diagnosis"
            return fallback.model_copy(update={"fallback": why, "probe_cost": self._cost(before)})
        return new_diagnosis(task, result, run_id, iteration, run_uid, **found.model_dump(), investigator="agent",
                             probe_cost=self._cost(before))

    def _cost(self, before: dict[str, int]) -> dict[str, int]:
        """What this diagnosis spent: probe frames, tokens and calls, and the agent's own requests."""
        now = {**self.ledger, "agent_calls": int(self.model.ledger["calls"])}
        return {k: now[k] - before.get(k, 0) for k in now}
