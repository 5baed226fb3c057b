"""One set of editor tools over a workspace, used by every driver (a model's tool calls, the heuristic, bin/ scripts).

Each tool is a plain method with a typed pydantic argument model (the schema a model sees is generated from it);
:meth:`EditorTools.call` validates arguments, runs the tool, meters it in the editor's own ledger, writes the call
and its result to ``transcript.jsonl`` and returns text. A refused call (bad arguments, a path outside the
candidate, an edit whose old text is not found exactly once, a spent budget, a question that contains the answer)
returns its reason as text, which a model reads on its next turn.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from videvolve.editing import safefs
from videvolve.editing.base import EditorInput, PastDiagnosis, Proposal, Rationale, check_edit
from videvolve.editing.probe import ProbeArgs, leaks_gold, run_probe
from videvolve.editing.safefs import PathRefused
from videvolve.editing.workspace import EditorLimits, candidate_edits
from videvolve.errors import HarnessError, VidevolveError
from videvolve.evaluation.results import TaskResult
from videvolve.models.base import VLM
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import CostModel
from videvolve.models.toolloop import unencodable
from videvolve.skill_library.harness import (
    HASHED_SUFFIXES,
    MAX_FILE_BYTES,
    Harness,
    load_harness,
    validate_harness,
)
from videvolve.skill_library.steps import Observing, TraceStep
from videvolve.tasks import Task
from videvolve.usage import VISUAL_TOKENS, CostMeasure

MAX_READ = 20_000
MAX_READ_BYTES = 16 * 1024 * 1024
"""Larger workspace files are refused by read_file rather than read into the run's memory."""


class ListFilesArgs(BaseModel):
    """List files of the workspace."""

    path: str = Field("", description="a folder relative to the workspace ('' for its root)")


class ReadFileArgs(BaseModel):
    """Read a text file of the workspace."""

    path: str = Field(description="relative to the workspace, e.g. candidate/solver.py or traces/t1/task.json")
    offset: int = Field(0, ge=0, description="first character to return")


class WriteFileArgs(BaseModel):
    """Replace (or create) an editable file of the candidate."""

    path: str = Field(description="relative to the workspace, under candidate/, e.g. candidate/config.toml")
    content: str = Field(description="the whole new content")


class EditFileArgs(BaseModel):
    """Replace one exact occurrence of ``old`` by ``new`` in an editable file of the candidate."""

    path: str = Field(description="relative to the workspace, under candidate/")
    old: str = Field(description="text that occurs exactly once in the file")
    new: str = Field(description="its replacement")


class TrialArgs(BaseModel):
    """Run the candidate on training tasks of this batch; compare with the parent on the same tasks."""

    tasks: list[str] = Field(default_factory=list, description="task ids under traces/ (empty: the whole batch)")


class MemorySearchArgs(BaseModel):
    """Search past diagnoses (other videos than this run's held-out ones) and what their revisions became."""

    query: str = Field(description="what to look for, e.g. 'short events missed between sampled frames'")
    k: int = Field(5, ge=1, le=20)


class SubmitArgs(Rationale):
    """Submit the candidate as this proposal (ends the turn; validation and the gate follow)."""


class Ledger(BaseModel):
    """What the editor of one proposal has spent (its own ledger, never the solver's)."""

    rounds: int = Field(0, description="the editor model's replies")
    tool_calls: int = Field(0, description="tool calls answered, refused ones included")
    trials: int = Field(0, description="trial runs of a candidate")
    trial_tasks: int = Field(0, description="task runs of all trials together")
    probes: int = Field(0, description="perception probes")
    model_calls: int = Field(0, description="paid model calls of the trials and probes")
    visual_tokens: int = Field(0, description="visual tokens (image, video, OCR-read) of the trials and probes")
    frames: int = Field(0, description="distinct frames of the trials' task runs, added up")


@dataclass
class EditorEnv:
    """What the tools reach in the trusted parent: this batch's training tasks and the run's services."""

    parent: str
    parent_dir: Path
    tasks: dict[str, Task]
    parent_results: dict[str, TaskResult]
    evaluate: Callable[[Harness, list[Task]], list[TaskResult]]
    """Run a harness on training tasks (results stored where the run keeps training results)."""
    trace_of: Callable[[str, str], Sequence[TraceStep]]
    """(version, task id) -> that result's trace steps."""
    probe_vlm: VLM
    cost: CostModel
    cache: ResponseCache | None = None
    image_format: str = "png"
    memory_search: Callable[[str, int], list[PastDiagnosis]] = field(default=lambda q, k: [])
    cost_measure: CostMeasure = VISUAL_TOKENS
    """The gate's cost: trials report each task's cost as the gate will count it."""


TOOLS: dict[str, tuple[type[BaseModel], str]] = {
    "list_files": (ListFilesArgs, "List files and folders of the workspace (TASK.md, candidate/, traces/, ...)."),
    "read_file": (ReadFileArgs, f"Read a text file of the workspace (at most {MAX_READ} characters from offset)."),
    "write_file": (WriteFileArgs, "Write a whole editable file of candidate/."),
    "edit_file": (EditFileArgs, "Exact search/replace in an editable file of candidate/ (old must occur once)."),
    "trial": (TrialArgs, "Run candidate/ on training tasks of this batch: score, frames, visual tokens, errors and "
                         "trace excerpts per task, and the difference with the parent on the same tasks."),
    "probe": (ProbeArgs, "Show the model frames, a sheet or a clip of a training task's video and ask a question "
                         "(refused if it contains the gold answer), or read what is said between two times "
                         "(show=transcript)."),
    "memory_search": (MemorySearchArgs, "Similar past diagnoses and what their revisions became."),
    "submit": (SubmitArgs, "Submit candidate/ as this proposal."),
}


def tool_schemas() -> list[dict[str, Any]]:
    """OpenAI function schemas of the tools (from their argument models)."""
    return [{"type": "function", "function": {"name": name, "description": desc,
                                              "parameters": model.model_json_schema()}}
            for name, (model, desc) in TOOLS.items()]


def tools_doc() -> str:
    """The tools as TASK.md lists them."""
    lines = []
    for name, (model, desc) in TOOLS.items():
        params = ", ".join(f"{k}: {(f.description or '').split('(')[0].strip()}" for k, f in model.model_fields.items())
        lines.append(f"- `{name}({', '.join(model.model_fields)})`: {desc}" + (f" Arguments: {params}." if params
                                                                                  else ""))
    return "\n".join(lines)


class ToolRefused(VidevolveError):
    """A tool call that cannot be done; its message goes back to the editor."""


class EditorTools:
    """The tools over one workspace, with their ledger and limits."""

    def __init__(self, root: Path, env: EditorEnv, limits: EditorLimits, inp: EditorInput) -> None:
        self.root, self.env, self.limits, self.inp = root, env, limits, inp
        self.ledger = Ledger()
        self.submitted: Proposal | None = None
        self.resumed = False
        """Whether this workspace is reopened for a repair round (the agent's conversation goes on)."""
        self.operator = "agent"
        """What a submitted proposal is recorded as made by (the driver sets it)."""
        self.deadline = time.monotonic() + limits.timeout_s

    @property
    def candidate(self) -> Path:
        """The writable copy of the parent."""
        return self.root / "candidate"

    # ---- dispatch ----

    def call(self, name: str, args: dict[str, Any] | None) -> tuple[str, bool]:
        """Run one tool by name; (text for the editor, whether it succeeded)."""
        self.ledger.tool_calls += 1
        if name not in TOOLS:
            text, ok = f"error: unknown tool {name!r}; the tools are {', '.join(TOOLS)}", False
        elif why := unencodable(args):
            text, ok = f"error: {why}", False
        else:
            model, _ = TOOLS[name]
            try:
                parsed = model.model_validate(args or {})
                text, ok = getattr(self, name)(parsed), True
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                                     for e in exc.errors())
                text, ok = f"error: bad arguments for {name}: {problems}", False
            except (ToolRefused, PathRefused) as exc:
                text, ok = f"refused: {exc}", False
        self.log({"kind": "tool", "name": name, "args": args, "ok": ok, "result": text[:4000]})
        return text, ok

    def log(self, entry: dict[str, Any]) -> None:
        """One line of the transcript."""
        line = json.dumps({"ts": round(time.time(), 3), **entry}, default=str) + "\n"
        safefs.write_bytes(self.root, "transcript.jsonl", line.encode("utf-8"), append=True)

    # ---- files ----

    def _editable(self, rel: str) -> str:
        if not rel.startswith("candidate/"):
            raise ToolRefused(f"only files under candidate/ can be written, not {rel!r}")
        inner = rel.removeprefix("candidate/")
        reason = check_edit(inner, "")
        if reason:
            raise ToolRefused(reason)
        return inner

    def list_files(self, a: ListFilesArgs) -> str:
        """Files under a folder of the workspace (links are listed, never entered)."""
        prefix = "".join(f"{p}/" for p in safefs.parts(a.path))
        with safefs.open_dir(self.root, a.path) as top:
            out = [rel + ("/" if e.is_dir(follow_symlinks=False) else "") for rel, e, _ in
                   safefs.walk(top, prefix, strict=False)
                   if "__pycache__" not in rel.split("/") and e.name != "transcript.jsonl"]
        return "\n".join(out[:500]) + (f"\n... {len(out) - 500} more" if len(out) > 500 else "")

    def read_file(self, a: ReadFileArgs) -> str:
        """A text file's content."""
        if Path(a.path).suffix in (".png", ".jpg", ".jpeg", ".mp4"):
            raise ToolRefused(f"{a.path} is an image; its name says its time, and `probe` shows it to the model")
        text = safefs.read_bytes(self.root, a.path, MAX_READ_BYTES).decode("utf-8", errors="replace")
        part = text[a.offset: a.offset + MAX_READ]
        more = len(text) - a.offset - len(part)
        return part + (f"\n[... {more} more characters; read again with offset {a.offset + len(part)}]" if more > 0
                       else "")

    def write_file(self, a: WriteFileArgs) -> str:
        """Write an editable file."""
        reason = check_edit(self._editable(a.path), a.content)
        if reason:
            raise ToolRefused(reason)
        safefs.write_bytes(self.root, a.path, a.content.encode("utf-8"))
        return f"wrote {a.path} ({len(a.content)} characters)"

    def edit_file(self, a: EditFileArgs) -> str:
        """Exact search/replace, refused unless ``old`` occurs exactly once."""
        inner = self._editable(a.path)
        try:
            text = safefs.read_bytes(self.root, a.path, MAX_FILE_BYTES).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolRefused(f"{a.path} is not UTF-8 text; use write_file to replace it") from exc
        count = text.count(a.old) if a.old else 0
        if count != 1:
            raise ToolRefused(f"the old text occurs {count} times in {a.path}; it must occur exactly once (copy it "
                              "exactly, with enough context to be unique)")
        new = text.replace(a.old, a.new, 1)
        reason = check_edit(inner, new)
        if reason:
            raise ToolRefused(reason)
        safefs.write_bytes(self.root, a.path, new.encode("utf-8"))
        return f"edited {a.path}: replaced {len(a.old)} characters by {len(a.new)}"

    def snapshot(self) -> AbstractContextManager[Path]:
        """A private copy of ``candidate/``, taken without following links: what a trial runs and submit takes.

        An editor command runs beside the tools and may change the candidate at any moment.
        """
        return safefs.snapshot(self.root, "candidate", MAX_FILE_BYTES, HASHED_SUFFIXES)

    # ---- trials, probes, memory ----

    def _check_spend(self, what: str) -> None:
        if time.monotonic() > self.deadline:
            raise ToolRefused(f"this proposal's time limit ({self.limits.timeout_s:.0f} s) is spent; submit now")
        cap = self.limits.visual_tokens
        if cap is not None and self.ledger.visual_tokens >= cap:
            raise ToolRefused(f"the editor's visual-token budget ({cap}) is spent; no more {what}")

    def trial(self, a: TrialArgs) -> str:
        """Candidate vs parent on chosen training tasks of this batch."""
        ids = a.tasks or list(self.env.tasks)
        unknown = [t for t in ids if t not in self.env.tasks]
        if unknown:
            raise ToolRefused(f"not a training task of this batch: {', '.join(unknown[:5])}; the batch is "
                              f"{', '.join(self.env.tasks)}")
        self._check_spend("trials")
        left = self.limits.trial_tasks - self.ledger.trial_tasks
        if len(ids) > left:
            raise ToolRefused(f"{len(ids)} tasks asked, {left} trial task runs left in this proposal's budget")
        with self.snapshot() as candidate:
            reason = validate_harness(candidate)
            if reason:
                raise ToolRefused(f"the candidate does not pass the static check: {reason}")
            try:
                harness = load_harness(candidate)
            except HarnessError as exc:
                raise ToolRefused(str(exc)) from exc
            results = self.env.evaluate(harness, [self.env.tasks[t] for t in ids])
        self.ledger.trials += 1
        self.ledger.trial_tasks += len(ids)
        report = self._trial_report(harness.version_id, results)
        self.ledger.model_calls += sum(r.usage.model_calls for r in results)
        self.ledger.visual_tokens += sum(r.usage.visual_tokens for r in results)
        self.ledger.frames += sum(r.frames for r in results)
        safefs.write_bytes(self.root, f"trials/{self.ledger.trials:02d}.json",
                           (json.dumps(report, indent=1, default=float) + "\n").encode("utf-8"))
        return json.dumps(report, default=float)

    def _trial_report(self, version: str, results: list[TaskResult]) -> dict[str, Any]:
        rows, diffs, parents = [], [], []
        for r in results:
            p = self.env.parent_results.get(r.task_id)
            steps = self.env.trace_of(version, r.task_id)
            excerpt = [{"event": s.event, "observed": len(s.observed_times) if isinstance(s, Observing) else 0,
                        "reply": str((w := s.record()).get("reply") or w.get("error") or w.get("message")
                                     or "")[:200]} for s in steps[-3:]]  # its words, whichever it has
            rows.append({"task": r.task_id, "kind": r.kind, "score": round(r.score, 4),
                         "parent_score": None if p is None else round(p.score, 4), "frames": r.frames,
                         "parent_frames": None if p is None else p.frames,
                         "visual_tokens": r.usage.visual_tokens, "cost": self._cost(r), "outcome": r.outcome,
                         "error": (r.error or "")[:500] or None,
                         "trace": excerpt})
            if p is not None:
                diffs.append(r.score - p.score)
                parents.append(p)
        n = max(1, len(results))
        return {"candidate": version, "tasks": len(results), "mean_score": round(sum(r.score for r in results) / n, 4),
                "mean_difference_vs_parent": round(sum(diffs) / len(diffs), 4) if diffs else None,
                "mean_frames": round(sum(r.frames for r in results) / n, 2),
                "mean_visual_tokens": round(sum(r.usage.visual_tokens for r in results) / n, 1),
                "parent_mean_frames": round(sum(p.frames for p in parents) / max(1, len(parents)), 2),
                "parent_mean_visual_tokens": round(sum(p.usage.visual_tokens for p in parents) / max(1, len(parents)),
                                                   1),
                "cost_metric": self.env.cost_measure.metric,
                "mean_cost": round(sum(self._cost(r) for r in results) / n, 2),
                "parent_mean_cost": round(sum(self._cost(p) for p in parents) / max(1, len(parents)), 2),
                "per_task": rows}

    def _cost(self, r: TaskResult) -> float:
        return self.env.cost_measure.of(r)

    def probe(self, a: ProbeArgs) -> str:
        """A perception probe on a training task's video."""
        task = self.env.tasks.get(a.task_id)
        if task is None:
            raise ToolRefused(f"not a training task of this batch: {a.task_id}")
        leak = leaks_gold(task, a.question)
        if leak:
            raise ToolRefused(f"{leak}; ask about what to look for, not the answer")
        self._check_spend("probes")
        if self.ledger.probes >= self.limits.probes:
            raise ToolRefused(f"this proposal's {self.limits.probes} probes are spent")
        self.ledger.probes += 1
        out_dir = self.root / "probes" / f"{self.ledger.probes:02d}"
        result = run_probe(a, task, self.env.probe_vlm, self.env.cost, self.env.cache, self.env.image_format, out_dir)
        for key in ("model_calls", "visual_tokens", "frames"):
            setattr(self.ledger, key, getattr(self.ledger, key) + int(result.get(key, 0)))
        result = {"probe": self.ledger.probes, **a.model_dump(), **result,
                  "images": [f"probes/{out_dir.name}/{n}" for n in result.get("images", [])]}
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "probe.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        return json.dumps(result)

    def memory_search(self, a: MemorySearchArgs) -> str:
        """Similar past diagnoses with their outcomes."""
        found = self.env.memory_search(a.query, a.k)
        rows = [{"category": p.diagnosis.category, "similarity": round(p.similarity, 3),
                 "hypothesis": p.diagnosis.hypothesis, "applies_when": p.diagnosis.applies_when,
                 "became": None if p.diagnosis.outcome is None else {
                     "decision": p.diagnosis.outcome.decision, "operator": p.diagnosis.outcome.operator,
                     "d_score": p.diagnosis.outcome.d_score}} for p in found]
        return json.dumps(rows) if rows else "nothing similar in memory"

    # ---- submit ----

    def submit(self, a: SubmitArgs) -> str:
        """Take the candidate's editable files back as a proposal."""
        with self.snapshot() as candidate:
            edits = candidate_edits(self.env.parent_dir, candidate)
            reason = validate_harness(candidate)
        if not edits:
            raise ToolRefused("the candidate is identical to the parent; edit a file first")
        if reason:
            raise ToolRefused(f"the candidate does not pass the static check: {reason}")
        self.submitted = Proposal(operator=self.operator, rationale=a.rationale, applies_when=a.applies_when,
                                  preserve=a.preserve, edits=edits, diagnoses=[d.id for d in self.inp.diagnoses],
                                  workspace=str(self.root))
        return f"submitted {len(edits)} changed file(s): {', '.join(sorted(edits))}; validation and the gate follow"

