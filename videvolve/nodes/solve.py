"""solve: pick the version to expand, and run it on this iteration's batch of training tasks."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from videvolve.loop.services import Run
from videvolve.loop.state import State
from videvolve.nodes.common import spent
from videvolve.search.events import SolveBatch
from videvolve.search.tree import pick_parent


def solve(state: State, runtime: Runtime[Run]) -> dict[str, Any]:
    """Run the parent on the batch; failures are errors or scores below the threshold."""
    run = runtime.context
    ctx = run.ctx
    parent = pick_parent(state.get("tree", {}), state["incumbent"], ctx.search, ctx.uct_c)
    batch = run.batch(state["iteration"])
    results = run.evaluate(parent, batch, "train")
    failures = [r.task_id for r in results if r.outcome == "error" or r.score < ctx.investigator.failure_threshold]
    run.event(SolveBatch(iteration=state["iteration"], parent=parent, tasks=len(batch), failures=len(failures),
                         score=sum(r.score for r in results) / max(1, len(results))))
    return {"parent": parent, "batch": [t.id for t in batch], "failures": failures, "candidates": [],
            "feedback": None, "dropped": None, "no_proposal": None, "repair_round": 0, "spent": spent(results)}
