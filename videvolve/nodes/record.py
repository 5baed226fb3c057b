"""record: lineage, the incumbent, the diagnoses' outcomes, and whether to go on."""

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
    it = state["iteration"]
    update: dict[str, Any] = {}
    gated = state.get("candidate")
    if gated:
        entry = state["history"][-1]
    elif state.get("dropped"):
        entry = {"iteration": it, "parent": state["incumbent"], "candidate": state["dropped"],
                 "operator": state.get("operator"), "decision": "dropped", "reason": state.get("feedback") or ""}
        update["history"] = [entry]
    else:
        entry = {"iteration": it, "parent": state["incumbent"], "candidate": None, "operator": None,
                 "decision": "none", "reason": "the editor had nothing to propose"}
        update["history"] = [entry]
    candidate = entry.get("candidate")
    if candidate and candidate != "(refused edit)":
        run.record_lineage(candidate, parent=state["incumbent"], iteration=it, operator=entry.get("operator"),
                           decision=entry["decision"], reason=entry["reason"], score=entry.get("cand_score"),
                           cost=entry.get("cand_cost"))
    if entry["decision"] == "accepted":
        update.update(incumbent=candidate, incumbent_score=entry["cand_score"], incumbent_cost=entry["cand_cost"])
        shutil.rmtree(run.root / "best", ignore_errors=True)
        shutil.copytree(run.harness_dir(str(candidate)), run.root / "best")
    d_score = entry["cand_score"] - entry["score"] if gated else None
    d_cost = entry["cand_cost"] - entry["cost"] if gated else None
    run.memory.set_outcome(state.get("diagnoses", []), RevisionOutcome(
        candidate=candidate, operator=entry.get("operator"), decision=entry["decision"], reason=entry["reason"],
        d_score=d_score, d_cost=d_cost))
    stop = _stop_reason(run, state, it + 1)
    run.event(it, "record", entry["decision"], candidate=candidate, operator=entry.get("operator"),
              reason=entry["reason"], incumbent=update.get("incumbent", state["incumbent"]), stop=stop)
    update.update(iteration=it + 1, stop_reason=stop)
    return update
