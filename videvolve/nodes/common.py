"""Small helpers shared by the nodes."""

from __future__ import annotations

from collections.abc import Sequence

from videvolve.evaluation.results import TaskResult


def spent(results: Sequence[TaskResult]) -> dict[str, float]:
    """Model calls and visual tokens of results (for the run's --max-calls / --max-visual-tokens)."""
    return {"model_calls": float(sum(r.usage.get("model_calls", 0) for r in results)),
            "visual_tokens": float(sum(r.usage.get("image_tokens", 0) + r.usage.get("video_tokens", 0)
                                       for r in results))}
