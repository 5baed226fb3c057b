"""record: lineage, the incumbent, the search tree, the diagnoses' outcomes, and whether to go on."""

from __future__ import annotations

import shutil
import time
from typing import Any

from langgraph.runtime import Runtime

from videvolve.graph.context import Context
from videvolve.graph.run import Run, get_run
from videvolve.graph.state import State
from videvolve.memory.records import RevisionOutcome


def _stop_reason(run: Run, state: State, iteration: int) -> str | None:
    ctx = run.ctx
    spent = state.get("spent", {})
    if (run.root / "STOP").exists():
        return "STOP file"
    if iteration >= ctx.iterations:
        return f"{ctx.iterations} iterations"
    if ctx.hours is not None and time.time() - state.get("started_at", time.time()) >= ctx.hours * 3600:
        return f"{ctx.hours} hours"
    if ctx.max_calls is not None and spent.get("model_calls", 0) >= ctx.max_calls:
        return f"--max-calls {ctx.max_calls}"
    if ctx.max_visual_tokens is not None and spent.get("visual_tokens", 0) >= ctx.max_visual_tokens:
        return f"--max-visual-tokens {ctx.max_visual_tokens}"
    return None


def record(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Close the iteration."""
    run = get_run(runtime.context)
    it, parent = state["iteration"], state["parent"]
    gated = [h for h in state.get("history", []) if h.get("iteration") == it and h.get("parent") == parent
             and h.get("candidate") in state.get("candidates", [])]
    extra = [{"iteration": it, "parent": parent, "candidate": d.get("candidate"), "operator": d.get("operator"),
              "decision": "dropped", "reason": d.get("reason", "")} for d in state.get("dropped", [])]
    if not gated and not extra:
        extra = [{"iteration": it, "parent": parent, "candidate": None, "operator": None, "decision": "none",
                  "reason": "the editor had nothing to propose"}]
    tree = state.get("tree", {})
    node_updates: dict[str, dict[str, Any]] = {}
    for e in gated + extra:
        cand = e.get("candidate")
        if cand:
            run.record_lineage(cand, parent=parent, iteration=it, operator=e.get("operator"), decision=e["decision"],
                               reason=e["reason"], score=e.get("cand_score"), cost=e.get("cand_cost"),
                               rung=e.get("rung"), rungs=e.get("rungs"))
            node_updates[cand] = {"parent": parent, "visits": 0, "value": 0.0, "score": e.get("cand_score") or 0.0,
                                  "cost": e.get("cand_cost") or 0.0, "accepted": e["decision"] == "accepted",
                                  "pending": e["decision"] == "pending", "exhausted": False,
                                  "full": e.get("rung") == e.get("rungs"),
                                  **{k: tree[cand][k] for k in ("visits", "value") if cand in tree}}
    # back up the expansion: the reward is the best score among this iteration's children (the parent's if none)
    reward = max([e.get("cand_score") or 0.0 for e in gated] or [tree.get(parent, {}).get("score", 0.0)])
    node: str | None = parent
    while node is not None and node in tree:
        stats = {**tree[node], **node_updates.get(node, {})}
        stats["visits"] += 1
        stats["value"] += reward
        node_updates[node] = stats
        node = stats.get("parent")
    if not gated and not any(d.get("candidate") for d in state.get("dropped", [])):
        node_updates[parent] = {**node_updates.get(parent, tree.get(parent, {})), "exhausted": True}
    update: dict[str, Any] = {"tree": node_updates}
    if extra:
        update["history"] = extra
    accepted = [e for e in gated if e["decision"] == "accepted"]
    best = max(accepted, key=lambda e: (e["cand_score"], -e["cand_cost"]), default=None)
    if best is not None and (run.ctx.search == "chain" or
                             (best["cand_score"], -best["cand_cost"]) > (state["incumbent_score"],
                                                                         -state["incumbent_cost"])):
        update.update(incumbent=best["candidate"], incumbent_score=best["cand_score"],
                      incumbent_cost=best["cand_cost"])
        shutil.rmtree(run.root / "best", ignore_errors=True)
        shutil.copytree(run.harness_dir(best["candidate"]), run.root / "best")
    decided = [e for e in gated if e["decision"] != "pending"]
    lead = best or (decided[0] if decided else gated[0] if gated else extra[0])
    d_score = lead["cand_score"] - lead["score"] if lead.get("cand_score") is not None else None
    d_cost = lead["cand_cost"] - lead["cost"] if lead.get("cand_cost") is not None else None
    run.memory.set_outcome(state.get("diagnoses", []), RevisionOutcome(
        candidate=lead.get("candidate"), operator=lead.get("operator"), decision=lead["decision"],
        reason=lead["reason"], d_score=d_score, d_cost=d_cost))
    stop = _stop_reason(run, state, it + 1)
    run.event(it, "record", lead["decision"], candidate=lead.get("candidate"), operator=lead.get("operator"),
              reason=lead["reason"], incumbent=update.get("incumbent", state["incumbent"]), stop=stop)
    update.update(iteration=it + 1, stop_reason=stop)
    return update
