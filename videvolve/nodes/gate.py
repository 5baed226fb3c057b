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
from videvolve.validation import screen


def gate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """History entries for this iteration's candidates."""
    run = get_run(runtime.context)
    entries, results = screen(run, state["parent"], state["candidates"], state.get("operators", {}),
                              state["iteration"])
    for e in entries:
        run.event(state["iteration"], "gate", e["decision"], **{k: v for k, v in e.items() if k != "iteration"})
    return {"history": entries, "spent": spent(results)}
