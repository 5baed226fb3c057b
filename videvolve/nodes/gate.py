"""gate: evaluate the candidate on the selection set and apply the cost-aware rule; only aggregates leave."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from videvolve.gate import aggregate, gate_rule
from videvolve.graph.context import Context
from videvolve.graph.run import get_run
from videvolve.graph.state import State
from videvolve.metrics import mcnemar, paired_bootstrap
from videvolve.nodes.common import spent


def gate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """One aggregate history entry: both sides' score and cost, paired statistics, decision, reason."""
    run, ctx = get_run(runtime.context), runtime.context
    candidate, incumbent = str(state["candidate"]), state["incumbent"]
    new = run.evaluate(candidate, run.selection, "selection")
    old = run.evaluate(incumbent, run.selection, "selection")
    a, c = aggregate(old, ctx.cost_metric)
    a2, c2 = aggregate(new, ctx.cost_metric)
    eps = ctx.eps if ctx.eps is not None else 1 / len(run.selection)
    decision = gate_rule(a, c, a2, c2, ctx.alpha, ctx.beta, eps)
    boot = paired_bootstrap([r.score for r in old], [r.score for r in new], seed=ctx.seed)
    mcq = [(o.score == 1, n.score == 1) for o, n in zip(old, new, strict=True) if o.kind == "mcq"]
    entry: dict[str, Any] = {"iteration": state["iteration"], "parent": incumbent, "candidate": candidate,
             "operator": state.get("operator"), "decision": "accepted" if decision.accept else "rejected",
             "reason": decision.reason, "score": a, "cost": c, "cand_score": a2, "cand_cost": c2,
             "p_value": boot.p_value, "ci": [boot.ci_low, boot.ci_high], "n": len(new), "eps": eps,
             "mcnemar_p": mcnemar([x for x, _ in mcq], [y for _, y in mcq]).p_value if mcq else None}
    run.event(state["iteration"], "gate", entry["decision"], **{k: v for k, v in entry.items() if k != "iteration"})
    return {"history": [entry], "spent": spent(new)}
