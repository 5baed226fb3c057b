"""gate: screen the candidates on the selection set (full, or multi-fidelity rungs) and apply the cost-aware rule.

Only aggregates leave the gate: per candidate both sides' score and cost, paired statistics, how far it got, the
decision and the reason.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from videvolve.loop.services import Run
from videvolve.loop.state import State
from videvolve.nodes.common import spent
from videvolve.search.events import GateEvent
from videvolve.search.history import entries as history_entries
from videvolve.search.screening import screen
from videvolve.search.tree import pending_children, seed_of


def gate(state: State, runtime: Runtime[Run]) -> dict[str, Any]:
    """History entries for this iteration's candidates."""
    run = runtime.context
    ctx = run.ctx
    parent = state["parent"]
    # mcts: children of this parent that lost an earlier promotion compete again (their results are on disk)
    pending = pending_children(state.get("tree", {}), parent, exclude=state["candidates"])
    candidates = list(state["candidates"]) + pending
    entries, results = screen(run, parent, candidates, state.get("operators", {}), state["iteration"],
                              keep_pending=ctx.search == "mcts", history=history_entries(state.get("history", [])),
                              seed_version=seed_of(state.get("tree", {})))
    for e in entries:
        run.event(GateEvent.of(e))
    return {"history": [e.model_dump() for e in entries], "candidates": candidates, "spent": spent(results)}
