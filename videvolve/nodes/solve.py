"""solve: the incumbent on this iteration's batch of training tasks (results on disk as they arrive)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from videvolve.graph.context import Context
from videvolve.graph.run import get_run
from videvolve.graph.state import State
from videvolve.nodes.common import spent


def solve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Run the incumbent on the batch; failures are errors or scores below the threshold."""
    run, ctx = get_run(runtime.context), runtime.context
    batch = run.batch(state["iteration"])
    results = run.evaluate(state["incumbent"], batch, "train")
    failures = [r.task_id for r in results if r.outcome == "error" or r.score < ctx.failure_threshold]
    run.event(state["iteration"], "solve", "batch", tasks=len(batch), failures=len(failures),
              score=sum(r.score for r in results) / max(1, len(results)))
    return {"batch": [t.id for t in batch], "failures": failures, "candidate": None, "operator": None,
            "feedback": None, "dropped": None, "repair_round": 0, "spent": spent(results)}
