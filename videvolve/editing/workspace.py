"""The editor's workspace: one folder per proposal under ``RUN/workspaces/<iteration>-<n>/``, kept for the report.

```
candidate/        a writable copy of the parent (the parent itself is never written)
TASK.md           the goal, the gate's rule with this run's numbers, the rules, the budgets, the tools, the SDK
traces/<task>/    this batch's training tasks: task.json (question, options, the known answer under a key that says
                  where it came from: "gold" only for a person's, else "answer (teacher)" etc.; prediction, score),
                  steps.jsonl, images/ (what the model was shown, named by time), README.md
diagnoses.md      diagnoses.jsonl   memory.md   lineage.md (aggregates only)
transcript.jsonl  tool calls and results;  conversation.json (agent driver);  submitted.json (the version written;
                  repairing.json: the failed one a repair round reopened this workspace for)
trials/  probes/  what the editor's trials and probes returned (probe images included)
```

Only training tasks of this iteration's batch are ever written here; the selection and test splits never are.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from videvolve.editing.base import EditorInput, read_files
from videvolve.editing.safefs import remove_tree
from videvolve.editing.taskdoc import task_md
from videvolve.evaluation.results import TaskResult
from videvolve.media import contact_sheet
from videvolve.needles.frames import frame_source
from videvolve.skill_library.steps import FrameSpec, ModelCall, SheetSpec, TraceStep
from videvolve.tasks import LabelSource, Task


class EditorLimits(BaseModel):
    """What one proposal may spend (the run's settings fill these in)."""

    rounds: int = Field(16, description="model turns of an agent driver (repair turns included)")
    trial_tasks: int = Field(16, description="training-task runs all trials of one proposal may make")
    probes: int = Field(8, description="perception probes of one proposal")
    visual_tokens: int | None = Field(None, description="visual tokens trials and probes may spend (None: no cap)")
    timeout_s: float = Field(600.0, description="wall-clock seconds of one proposal")
    images: int = Field(24, description="images written per training task under traces/")


@dataclass
class TraceItem:
    """One training task of the batch with the parent's result and trace (trusted side only)."""

    task: Task
    result: TaskResult | None
    trace: Sequence[TraceStep]


ANSWER_ORIGINS: dict[LabelSource, str] = {
    "gold": "a person's answer",
    "needles": "exact: content inserted into the frames at known times, not a person's answer",
    "perceived": "the model's own dense look at the video, not a person's answer; it may be wrong",
    "teacher": "an expensive harness's answer, not a person's; it may be wrong",
}
"""What each label source means, as the editor is told beside the answer."""


def answer_key(task: Task) -> str:
    """The name the known answer goes by: ``gold`` only when a person gave it, else ``answer (teacher)`` etc."""
    return "gold" if task.label_source == "gold" else f"answer ({task.label_source})"


def answer_text(task: Task) -> str:
    """The known answer as a person reads it."""
    if task.kind == "mcq" and isinstance(task.answer, str):
        idx = ord(task.answer.strip().upper()[:1] or "A") - 65
        text = task.options[idx] if task.options and 0 <= idx < len(task.options) else ""
        return f"{task.answer} ({text})" if text else task.answer
    return json.dumps([[round(i.start, 2), round(i.end, 2)] for i in task.answer]) if isinstance(task.answer, list) \
        else str(task.answer)


def _render(task: Task, spec: FrameSpec | SheetSpec) -> list[tuple[str, Any]]:
    """(name, image) pairs for one observation spec, as the model was shown it."""
    times = spec.times
    if not times:
        return []
    if isinstance(spec, SheetSpec):
        frames = frame_source(task).frames(times, spec.cell_width)
        sheet = contact_sheet(frames, cols=spec.columns, cell_width=spec.cell_width).image
        return [(f"sheet_{times[0]:09.2f}-{times[-1]:09.2f}s.png", sheet)]
    frames = frame_source(task).frames(times, spec.max_side)
    return [(f"{spec.kind}_{t:09.2f}s.png", f.image) for t, f in zip(times, frames, strict=True)]


def write_trace(folder: Path, item: TraceItem, max_images: int) -> dict[str, Any]:
    """One task's folder under ``traces/``; returns its summary line."""
    task, result = item.task, item.result
    folder.mkdir(parents=True, exist_ok=True)
    pred = result.prediction.answer if result and result.prediction else None
    info = {"task_id": task.id, "kind": task.kind, "question": task.question, "options": task.options,
            "duration": task.duration, answer_key(task): answer_text(task),
            "answer_from": f"{task.label_source}: {ANSWER_ORIGINS[task.label_source]}",
            "evidence": [[i.start, i.end] for i in task.evidence],
            "prediction": pred if not isinstance(pred, list) else [[i.start, i.end] for i in pred],
            "raw": result.prediction.raw[:2000] if result and result.prediction else "",
            "score": result.score if result else None, "outcome": result.outcome if result else "missing",
            "error_kind": result.error_kind if result else None, "error": (result.error or "")[:2000] if result
            else None, "frames": result.frames if result else 0,
            "visual_tokens": result.usage.visual_tokens if result else 0}
    (folder / "task.json").write_text(json.dumps(info, indent=1, default=str) + "\n", encoding="utf-8")
    (folder / "steps.jsonl").write_text("".join(s.line() for s in item.trace), encoding="utf-8")
    lines = [f"# {task.id} ({task.kind}), score {info['score']}", "", task.question, "",
             f"{answer_key(task)}: {info[answer_key(task)]} ({ANSWER_ORIGINS[task.label_source]})", ""]
    written = 0
    for step in item.trace:
        for spec in step.observations if isinstance(step, ModelCall) else []:
            if written >= max_images:
                break
            try:
                images = _render(task, spec)
            except (OSError, ValueError) as exc:
                lines.append(f"- step {step.step}: could not re-render ({exc})")
                continue
            for name, image in images[: max_images - written]:
                path = folder / "images" / f"step{step.step}_{name}"
                path.parent.mkdir(exist_ok=True)
                image.save(path)
                written += 1
                lines.append(f"- step {step.step}: images/{path.name} ({spec.kind}, "
                             f"{image.size[0]}x{image.size[1]})")
    (folder / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return info


def _diagnoses(inp: EditorInput) -> tuple[str, str]:
    rows = [d.model_dump(mode="json", exclude={"outcome"}) for d in inp.diagnoses]
    md = ["# Diagnoses of this batch's failures (training tasks)", ""]
    for d in inp.diagnoses:
        ev = ", ".join(f"{e.time:.1f} s: {e.seen}" for e in d.evidence[:8]) or "none"
        md += [f"## {d.task_id}: {d.category}", d.hypothesis, f"- applies when: {d.applies_when}",
               f"- preserve: {d.preserve}", f"- evidence: {ev}", ""]
    if not inp.diagnoses:
        md.append("No failures in this batch.")
    return "\n".join(md) + "\n", "".join(json.dumps(r) + "\n" for r in rows)


def memory_lines(inp: EditorInput) -> str:
    """Similar past diagnoses and what their revisions became."""
    md = ["# Similar past diagnoses (memory) and what their revisions became", ""]
    for p in inp.similar:
        d, o = p.diagnosis, p.diagnosis.outcome
        became = f"{o.decision} via {o.operator or '?'}" + (f" (d_score {o.d_score:+.3f})" if o and
                                                            o.d_score is not None else "") if o else "pending"
        md.append(f"- [{d.category}] (similarity {p.similarity:.2f}) {d.hypothesis} -> {became}")
    if not inp.similar:
        md.append("Nothing similar in memory yet.")
    return "\n".join(md) + "\n"


def lineage_lines(inp: EditorInput, diffs: dict[str, str]) -> str:
    """The gate's history as the editor may see it (rounded aggregates) and the diffs of the versions."""
    md = ["# Lineage (aggregates only, rounded to what the selection set resolves)", ""]
    for h in inp.history:
        md.append(f"- iteration {h.get('iteration', 0) + 1}: {h.get('operator') or '-'} on {h.get('parent')} -> "
                  f"{h.get('candidate') or 'nothing'}: {h.get('decision')}; score {h.get('score')} -> "
                  f"{h.get('cand_score')}, cost {h.get('cost')} -> {h.get('cand_cost')}; reached "
                  f"{h.get('reached')}" + (f"; why: {h['why']}" if h.get("why") else ""))
    if not inp.history:
        md.append("No revision has been gated yet.")
    for version, diff in diffs.items():
        if diff:
            md += ["", f"## diff of {version}", "```diff", diff.rstrip("\n")[:6000], "```"]
    return "\n".join(md) + "\n"


def build_workspace(root: Path, parent_dir: Path, inp: EditorInput, items: list[TraceItem], limits: EditorLimits,
                    tools_doc: str, diffs: dict[str, str] | None = None) -> Path:
    """Write a fresh workspace for one proposal; returns its folder."""
    remove_tree(root)  # whatever an editor left there, at any depth
    root.mkdir(parents=True)
    shutil.copytree(parent_dir, root / "candidate", ignore=shutil.ignore_patterns("__pycache__"))
    for p in (root / "candidate").rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    (root / "TASK.md").write_text(task_md(inp, limits, tools_doc), encoding="utf-8")
    summary = ["| task | kind | score | frames | outcome |", "|---|---|---|---|---|"]
    for item in items:
        info = write_trace(root / "traces" / item.task.id, item, limits.images)
        summary.append(f"| {item.task.id} | {item.task.kind} | {info['score']} | {info['frames']} | "
                       f"{info['outcome']} |")
    (root / "traces").mkdir(exist_ok=True)
    (root / "traces" / "INDEX.md").write_text("# This batch's training tasks (the parent's results)\n\n" +
                                              "\n".join(summary) + "\n", encoding="utf-8")
    md, jl = _diagnoses(inp)
    (root / "diagnoses.md").write_text(md, encoding="utf-8")
    (root / "diagnoses.jsonl").write_text(jl, encoding="utf-8")
    (root / "memory.md").write_text(memory_lines(inp), encoding="utf-8")
    (root / "lineage.md").write_text(lineage_lines(inp, diffs or {}), encoding="utf-8")
    (root / "parent.json").write_text(json.dumps({"parent": inp.incumbent}) + "\n")
    return root


def candidate_edits(parent_dir: Path, candidate_dir: Path) -> dict[str, str | None]:
    """The candidate's editable files that differ from the parent's (None: deleted)."""
    before, after = read_files(parent_dir), read_files(candidate_dir)
    edits: dict[str, str | None] = {p: t for p, t in after.items() if before.get(p) != t}
    edits.update({p: None for p in before if p not in after})
    return edits
