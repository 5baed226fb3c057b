"""gate: screen the candidates on the selection set (full, or multi-fidelity rungs) and apply the cost-aware rule.

Only aggregates leave the gate: per candidate both sides' score and cost, paired statistics, how far it got, the
decision and the reason.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from videvolve.graph.context import Context
from videvolve.graph.run import get_run
from videvolve.graph.state import State
from videvolve.nodes.common import spent
from videvolve.search.history import entries as history_entries
from videvolve.search.screening import screen
from videvolve.search.tree import pending_children


def gate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """History entries for this iteration's candidates."""
    run, ctx = get_run(runtime.context), runtime.context
    parent = state["parent"]
    # mcts: children of this parent that lost an earlier promotion compete again (their results are on disk)
    pending = pending_children(state.get("tree", {}), parent, exclude=state["candidates"])
    candidates = list(state["candidates"]) + pending
    entries, results = screen(run, parent, candidates, state.get("operators", {}), state["iteration"],
                              keep_pending=ctx.search == "mcts", history=history_entries(state.get("history", [])))
    for e in entries:
        run.event(state["iteration"], "gate", e.decision, **e.model_dump(exclude={"iteration", "decision"}))
    return {"history": [e.model_dump() for e in entries], "candidates": candidates, "spent": spent(results)}
