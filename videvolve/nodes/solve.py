"""solve: pick the version to expand, and run it on this iteration's batch of training tasks."""

from __future__ import annotations

import math
from typing import Any

from langgraph.runtime import Runtime

from videvolve.graph.context import Context
from videvolve.graph.run import get_run
from videvolve.graph.state import State
from videvolve.nodes.common import spent


def pick_parent(state: State, ctx: Context) -> str:
    """Chain: the incumbent. MCTS: the accepted, not exhausted tree node with the highest UCT score."""
    tree = state.get("tree", {})
    open_nodes = [v for v, s in tree.items() if s.get("accepted") and not s.get("exhausted")]
    if ctx.search == "chain" or not open_nodes:
        return state["incumbent"]
    total = sum(tree[v]["visits"] for v in open_nodes) + 1

    def uct(v: str) -> float:
        s = tree[v]
        if s["visits"] == 0:
            return math.inf
        return s["value"] / s["visits"] + ctx.uct_c * math.sqrt(math.log(total) / s["visits"])

    return max(open_nodes, key=lambda v: (uct(v), tree[v]["score"], v))


def solve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Run the parent on the batch; failures are errors or scores below the threshold."""
    run, ctx = get_run(runtime.context), runtime.context
    parent = pick_parent(state, ctx)
    batch = run.batch(state["iteration"])
    results = run.evaluate(parent, batch, "train")
    failures = [r.task_id for r in results if r.outcome == "error" or r.score < ctx.failure_threshold]
    run.event(state["iteration"], "solve", "batch", parent=parent, tasks=len(batch), failures=len(failures),
              score=sum(r.score for r in results) / max(1, len(results)))
    return {"parent": parent, "batch": [t.id for t in batch], "failures": failures, "candidates": [],
            "feedback": None, "dropped": [], "repair_round": 0, "spent": spent(results)}
