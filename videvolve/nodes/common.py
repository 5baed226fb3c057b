"""Small helpers shared by the nodes."""

from __future__ import annotations

from collections.abc import Sequence

from videvolve.evaluation.results import TaskResult
from videvolve.usage import Spend


def spent(results: Sequence[TaskResult]) -> dict[str, float]:
    """What results add to the run's totals (--max-calls, --max-visual-tokens), as the state's plain JSON."""
    return Spend.of(r.usage for r in results).to_state()
