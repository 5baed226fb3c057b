"""The editor's perception probes (Video-RSI's active investigation) and the rule that keeps the answer out of them.

A probe shows the model frames, a contact sheet or a clip of a training task's video, chosen by the editor, with a
question of its own, or reads the video's transcript between two times (no model call; its text tokens metered).
A question that contains the gold answer is refused: for mcq the correct option's text, for grounding any gold time,
compared case-folded on whole words.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from videvolve.config import RuntimeSettings
from videvolve.datasets.transcripts import load_transcript
from videvolve.errors import MediaError, RequestRefused
from videvolve.media import contact_sheet
from videvolve.models.base import VLM
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import CostModel
from videvolve.needles.frames import frame_source
from videvolve.skill_library.services import TaskServices
from videvolve.tasks import Task
from videvolve.usage import TaskUsage


class ProbeArgs(BaseModel):
    """A perception probe on one training task's video."""

    task_id: str = Field(description="a training task of this batch (a folder name under traces/)")
    times: list[float] = Field(description="times in seconds to look at (for a clip: its start and end)",
                               min_length=1, max_length=32)
    show: Literal["frames", "sheet", "clip", "transcript"] = Field(
        "frames", description="frames, one contact sheet, a clip, or the transcript said between the first and last "
        "time (no model call; empty when the video has none)")
    max_side: int | None = Field(None, description="longest side of frames/clip in pixels (None: full resolution)")
    cell_width: int = Field(160, description="sheet cell width in pixels")
    fps: float = Field(2.0, description="clip sampling rate")
    question: str = Field(description="what to ask about what is shown (must not contain the gold answer)")
    mode: Literal["ask", "match", "describe"] = Field(
        "ask", description="ask: the question as the prompt; match: which observations show the question's "
        "subject (times come back); describe: one line per observation")


def _words(text: str) -> str:
    return " " + " ".join(re.findall(r"[\w.:]+", text.casefold())) + " "


def _time_forms(t: float) -> set[str]:
    forms = {f"{t:g}", f"{t:.1f}", f"{t:.2f}", str(round(t))}
    forms.add(f"{int(t) // 60}:{int(t) % 60:02d}")
    return forms


def leaks_gold(task: Task, question: str) -> str | None:
    """Why ``question`` gives the gold answer away, or None."""
    words = _words(question)
    if task.kind == "mcq" and isinstance(task.answer, str) and task.options:
        idx = ord(task.answer.strip().upper()[:1] or "A") - 65
        if 0 <= idx < len(task.options):
            option = _words(task.options[idx]).strip()
            if option and f" {option} " in words:
                return f"the question contains the correct option's text ({task.options[idx]!r})"
    if task.kind == "grounding" and isinstance(task.answer, list):
        for iv in task.answer:
            for t in (iv.start, iv.end):
                hit = next((f for f in sorted(_time_forms(t)) if f" {f.casefold()} " in words), None)
                if hit:
                    return f"the question contains a gold time ({hit})"
    return None


def run_probe(args: ProbeArgs, task: Task, vlm: VLM, cost: CostModel, cache: ResponseCache | None,
              image_format: str, out_dir: Path) -> dict[str, Any]:
    """Show the observations, ask, save the images; returns the reply, the images and the probe's cost."""
    settings = RuntimeSettings(image_format="jpeg" if image_format == "jpeg" else "png")
    try:  # a generated task whose spliced-in video went is refused whole, as its evaluation is
        frames = frame_source(task)
    except MediaError as exc:
        return {"error": f"media: {exc}"}
    services = TaskServices(task.view(), task.video, vlm, cost, settings, cache=cache,
                            transcript=load_transcript(task), frames=frames)
    times = [float(t) for t in args.times]
    if args.show == "transcript":
        try:
            segments = services.op_transcript(min(times), max(times))
        except RequestRefused as exc:
            return {"error": f"{exc.kind}: {exc}"}
        said = "\n".join(f"[{s['start']:.1f}-{s['end']:.1f} s] {s['text']}" for s in segments)
        return {"reply": said[:4000] or "(nothing is said in this window, or the video has no transcript)",
                "images": [], "frames": 0, "visual_tokens": 0, "model_calls": 0,
                "transcript_tokens": services.meter.transcript_tokens}
    try:
        if args.show == "sheet":
            handles = [services.op_sheet(times, cols=min(6, len(times)), cell_width=args.cell_width)["handle"]]
        elif args.show == "clip":
            handles = [services.op_clip(min(times), max(times), fps=args.fps, max_side=args.max_side)["handle"]]
        else:
            handles = [o["handle"] for o in services.op_frames(times, max_side=args.max_side)]
        target = "what this question is about: " + args.question
        if args.mode == "match":
            reply = services.op_ask(handles, mode="match", target=target)
        elif args.mode == "describe":
            reply = services.op_ask(handles, mode="describe")
        else:
            reply = services.op_ask(handles, prompt=args.question, mode="answer")
    except RequestRefused as exc:  # ServiceError among them
        return {"error": f"{exc.kind}: {exc}"}
    images = _save(task, args, out_dir)
    usage = TaskUsage.model_validate(services.meter.to_dict())
    return {"reply": reply[:2000], "images": images, "frames": usage.frames, "visual_tokens": usage.visual_tokens,
            "model_calls": usage.model_calls}


def _save(task: Task, args: ProbeArgs, out_dir: Path) -> list[str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    times = sorted(args.times)
    if args.show == "clip":
        n = max(1, min(32, round((times[-1] - times[0]) * args.fps)))
        times = [times[0] + k / args.fps for k in range(n)]
    try:
        if args.show == "sheet":
            frames = frame_source(task).frames(times, args.cell_width)
            contact_sheet(frames, cols=min(6, len(times)), cell_width=args.cell_width).image.save(out_dir / "sheet.png")
            return [(out_dir / "sheet.png").name]
        names = []
        for t, f in zip(times, frame_source(task).frames(times, args.max_side), strict=True):
            name = f"frame_{t:09.2f}s.png"
            f.image.save(out_dir / name)
            names.append(name)
        return names
    except (OSError, ValueError, MediaError):
        return []
