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


def _thumbs(task: Task, step: dict[str, Any], stem: str, out: Path) -> tuple[list[dict[str, str]], int]:
    """The step's observations as images with captions; and how many observed times were left out."""
    images: list[dict[str, str]] = []
    shown = 0
    total = 0
    for k, spec in enumerate(step.get("observations", [])):
        times = [float(t) for t in spec.get("times", [])]
        total += len(times)
        room = MAX_THUMBS_PER_STEP - shown
        if room <= 0 or not times:
            continue
        try:
            if spec.get("kind") == "sheet":
                cell = int(spec.get("cell_width") or 160)
                frames = frame_source(task).frames(times, cell)
                sheet = contact_sheet(frames, cols=int(spec.get("cols") or 6), cell_width=cell).image
                sheet.thumbnail((6 * THUMB_SIDE, 6 * THUMB_SIDE))
                name = f"traces/{stem}_{step['step']}_{k}.png"
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                sheet.save(out / name)
                images.append({"src": name, "caption": f"sheet of {len(times)}: " +
                               ", ".join(f"{t:.2f}" for t in times) + " s", "kind": "sheet"})
                shown += len(times)
                continue
            frames = frame_source(task).frames(times[:room], spec.get("max_side") or THUMB_SIDE)
        except (OSError, ValueError):
            continue
        for j, (t, frame) in enumerate(zip(times[:room], frames, strict=False)):
            name = f"traces/{stem}_{step['step']}_{k}_{j}.png"
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            image = frame.image.copy()
            image.thumbnail((THUMB_SIDE, THUMB_SIDE))
            image.save(out / name)
            images.append({"src": name, "caption": f"{t:.2f} s", "kind": str(spec.get("kind", "frame"))})
            shown += 1
    return images, max(0, total - shown)


def _step(task: Task, step: dict[str, Any], stem: str, out: Path) -> dict[str, Any]:
    images, left_out = _thumbs(task, step, stem, out) if step.get("observations") else ([], 0)
    observed = step.get("observed_times")
    if observed is not None:
        note = f"observed {len(observed)} time(s)" + (f"; the first {MAX_THUMBS_PER_STEP} shown" if left_out else "")
    elif step.get("event") == "result":
        note = f"outcome {step.get('outcome')}" + (f" ({step['error_kind']})" if step.get("error_kind") else "") + \
            f", score {float(step.get('score') or 0):.2f}, {step.get('frames', 0)} frames"
    else:
        note = _shortened(_readable(step.get("error") or step.get("answer") or step.get("message") or ""))
    return {"step": step["step"], "event": step["event"], "images": images, "note": note,
            "reply": _readable(step.get("reply", "")) if step.get("reply") else ""}


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
        lines = [json.loads(x) for x in trace.read_text(encoding="utf-8").splitlines() if x.strip()]
        prediction = (result.get("prediction") or {}).get("answer")
        shown.append({"task_id": task.id, "kind": task.kind, "question": task.question,
                      "version": result_file.parent.parent.parent.name,
                      "options": [f"{chr(ord('A') + i)}) {o}" for i, o in enumerate(task.options or [])],
                      "gold": _gold(task), "label_source": task.label_source,
                      "prediction": _readable(prediction) if prediction is not None else "none",
                      "score": result["score"], "frames": TaskUsage.model_validate(result.get("usage", {})).frames,
                      "steps": [_step(task, s, result_file.stem, out) for s in lines]})
        if len(shown) >= MAX_TRACES:
            break
    return shown
