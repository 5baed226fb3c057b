"""Score and cost of a harness on tasks, as one summary (errors score 0 and their frames count)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from videvolve.evaluation.results import TaskResult
from videvolve.metrics import summarize_scores
from videvolve.tasks import Task


def summarize(tasks: Sequence[Task], results: Sequence[TaskResult]) -> dict[str, Any]:
    """Score and cost of a harness on tasks; errors score 0 and their frames count."""
    by_id = {r.task_id: r for r in results}
    rs = [by_id[t.id] for t in tasks if t.id in by_id]
    preds = [by_id[t.id].prediction if t.id in by_id and by_id[t.id].outcome == "ok" else None for t in tasks]
    out = summarize_scores(tasks, preds)

    def mean(key: str, kind: str | None = None) -> float:
        vals = [getattr(r.usage, key) for r in rs if kind is None or r.kind == kind]
        return float(np.mean(vals)) if vals else 0.0

    for kind in ("mcq", "grounding"):
        if kind in out:
            out[kind].update({"frames_per_question": mean("frames", kind),
                              "image_tokens_per_question": mean("image_tokens", kind),
                              "errors": sum(1 for r in rs if r.kind == kind and r.outcome == "error")})

    out.update({
        "frames_per_question": mean("frames"), "image_tokens_per_question": mean("image_tokens"),
        "video_tokens_per_question": mean("video_tokens"), "cumulative_tokens_per_question": mean("cumulative_tokens"),
        "transcript_tokens_per_question": mean("transcript_tokens"), "ocr_calls_per_question": mean("ocr_calls"),
        "requests": sum(r.usage.requests for r in rs), "model_calls": sum(r.usage.model_calls for r in rs),
        "cache_hits": sum(r.usage.cache_hits for r in rs), "tool_calls": sum(r.usage.tool_calls for r in rs),
        "errors": sum(1 for r in rs if r.outcome == "error"),
        "errors_by_kind": dict(Counter(r.error_kind or "?" for r in rs if r.outcome == "error")),
        "wall_s": float(sum(r.wall_s for r in rs)),
    })
    return out


def write_summary(out_dir: Path, summary: dict[str, Any]) -> Path:
    """``<out>/summary.json``."""
    path = out_dir / "summary.json"
    path.write_text(json.dumps(summary, indent=1, default=float), encoding="utf-8")
    return path
