"""The report's trace viewer: what the model saw (each observed time with its thumbnail) and said, per task.

Per task: the question, its options, the gold answer and the prediction; per step: the thumbnails with their times
(a contact sheet as one image with its cells' times), the reply, and a plain line for the final answer and result.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from videvolve.media import contact_sheet
from videvolve.needles.frames import frame_source
from videvolve.rundir import EvalDir, RunDir
from videvolve.skill_library.steps import ModelCall, Observing, Result, SheetSpec, TraceStep
from videvolve.skill_library.trace import read_steps
from videvolve.tasks import Task, read_tasks
from videvolve.usage import TaskUsage

MAX_TRACES = 6
MAX_THUMBS_PER_STEP = 128
"""Beyond this many observed times in one step, the step says how many it leaves out."""
THUMB_SIDE = 160
DECIMALS = 2


def rounded(value: Any, ndigits: int = DECIMALS) -> Any:
    """Floats rounded in any nesting of lists, tuples and dicts (evidence times, intervals)."""
    if isinstance(value, float):
        return round(value, ndigits)
    if isinstance(value, list | tuple):
        return [rounded(v, ndigits) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v, ndigits) for k, v in value.items()}
    return value


def _readable(text: Any) -> str:
    """A logged answer as short text: a dict or list (logged as JSON or Python text) with its floats rounded."""
    if not isinstance(text, str):
        return json.dumps(rounded(text))
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
        except (ValueError, SyntaxError, TypeError):
            continue
        if isinstance(value, dict | list):
            return json.dumps(rounded(value))
    # not parseable (the trace keeps a long answer's first 2,000 characters): its long decimals rounded all the same
    return re.sub(r"(?<![\w.])\d+\.\d{3,}(?![\w.])", lambda m: str(round(float(m.group()), DECIMALS)), text)


def _shortened(text: str, limit: int = 600) -> str:
    """``text`` up to ``limit`` characters, saying so where it is cut."""
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text):,} characters)"


def _gold(task: Task) -> str:
    if task.kind == "mcq":
        letter = str(task.answer)
        index = ord(letter) - ord("A") if len(letter) == 1 else -1
        options = task.options or []
        return f"{letter}) {options[index]}" if 0 <= index < len(options) else letter
    intervals = rounded([[i.start, i.end] for i in task.intervals])
    return ", ".join(f"{s}-{e} s" for s, e in intervals) or "[] (the event never happens)"


def _thumbs(task: Task, step: ModelCall, stem: str, out: Path) -> tuple[list[dict[str, str]], int]:
    """The step's observations as images with captions; and how many observed times were left out."""
    images: list[dict[str, str]] = []
    shown = 0
    total = 0
    for k, spec in enumerate(step.observations):
        times = spec.times
        total += len(times)
        room = MAX_THUMBS_PER_STEP - shown
        if room <= 0 or not times:
            continue
        try:
            if isinstance(spec, SheetSpec):
                frames = frame_source(task).frames(times, spec.cell_width)
                sheet = contact_sheet(frames, cols=spec.columns, cell_width=spec.cell_width).image
                sheet.thumbnail((6 * THUMB_SIDE, 6 * THUMB_SIDE))
                name = f"traces/{stem}_{step.step}_{k}.png"
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                sheet.save(out / name)
                images.append({"src": name, "caption": f"sheet of {len(times)}: " +
                               ", ".join(f"{t:.2f}" for t in times) + " s", "kind": "sheet"})
                shown += len(times)
                continue
            frames = frame_source(task).frames(times[:room], spec.max_side or THUMB_SIDE)
        except (OSError, ValueError):
            continue
        for j, (t, frame) in enumerate(zip(times[:room], frames, strict=False)):
            name = f"traces/{stem}_{step.step}_{k}_{j}.png"
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            image = frame.image.copy()
            image.thumbnail((THUMB_SIDE, THUMB_SIDE))
            image.save(out / name)
            images.append({"src": name, "caption": f"{t:.2f} s", "kind": spec.kind})
            shown += 1
    return images, max(0, total - shown)


def _step(task: Task, step: TraceStep, stem: str, out: Path) -> dict[str, Any]:
    images, left_out = _thumbs(task, step, stem, out) if isinstance(step, ModelCall) else ([], 0)
    words = step.record()  # the reply, error, answer or message of whichever kind has one
    if isinstance(step, Observing):
        note = f"observed {len(step.observed_times)} time(s)" + \
            (f"; the first {MAX_THUMBS_PER_STEP} shown" if left_out else "")
    elif isinstance(step, Result):
        note = f"outcome {step.outcome}" + (f" ({step.error_kind})" if step.error_kind else "") + \
            f", score {step.score:.2f}, {step.frames} frames"
    else:
        note = _shortened(_readable(words.get("error") or words.get("answer") or words.get("message") or ""))
    return {"step": step.step, "event": step.event, "images": images, "note": note,
            "reply": _readable(words["reply"]) if words.get("reply") else ""}


def traces(run: RunDir, settings: dict[str, Any], out: Path, version: str | None = None) -> list[dict[str, Any]]:
    """Training traces of one harness, one per task (at most ``MAX_TRACES``), thumbnails written to ``out``.

    The harness is ``version`` (the run's best) where it has training traces; else the one evaluated on training
    tasks last (an editor's trial). Each trace names its version: the tasks' latest results may come from several.
    """
    tasks = {t.id: t for t in read_tasks(settings["tasks"]) if t.split == "train"}
    evals = sorted(run.result_files("train"), key=lambda p: p.stat().st_mtime)
    own = [p for p in evals if version and p.parent.parent.parent.name == version]
    if evals and not own:
        own = [p for p in evals if p.parent.parent.parent.name == evals[-1].parent.parent.parent.name]
    shown: list[dict[str, Any]] = []
    for result_file in reversed(own):
        result = json.loads(result_file.read_text())
        task = tasks.get(result["task_id"])
        trace = EvalDir(result_file.parent.parent).trace(result["task_id"])
        if task is None or not trace.exists() or any(s["task_id"] == task.id for s in shown):
            continue
        prediction = (result.get("prediction") or {}).get("answer")
        shown.append({"task_id": task.id, "kind": task.kind, "question": task.question,
                      "version": result_file.parent.parent.parent.name,
                      "options": [f"{chr(ord('A') + i)}) {o}" for i, o in enumerate(task.options or [])],
                      "gold": _gold(task), "label_source": task.label_source,
                      "prediction": _readable(prediction) if prediction is not None else "none",
                      "score": result["score"], "frames": TaskUsage.model_validate(result.get("usage", {})).frames,
                      "steps": [_step(task, s, result_file.stem, out) for s in read_steps(trace)]})
        if len(shown) >= MAX_TRACES:
            break
    return shown
