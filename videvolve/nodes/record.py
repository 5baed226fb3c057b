"""record: lineage, the incumbent, the search tree, the diagnoses' outcomes, and whether to go on."""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime

from videvolve.loop.services import Run
from videvolve.loop.state import State
from videvolve.memory.records import RevisionOutcome
from videvolve.search.events import RecordEvent
from videvolve.search.history import GateEntry, entries
from videvolve.search.tree import beats, record_children
from videvolve.usage import Spend


def running_time(run: Run, state: State, now: float | None = None) -> float:
    """Seconds the run has spent running: its count at the last iteration's end, plus this process's time since.

    Time it sat stopped between a kill or a stop and its ``--resume`` is not counted (the part of an iteration a
    killed process had done is not either: that iteration is run again). A run checkpointed before the count was kept
    counts from when this process opened it.
    """
    now = time.time() if now is None else now
    before, at = state.get("running_s", 0.0), state.get("running_at", state.get("started_at", now))
    return before + max(0.0, now - max(at, run.opened_at))


def stop_reason(run: Run, state: State, iteration: int) -> str | None:
    """Why the run stops after ``iteration`` finished iterations (None: it goes on); a resume asks it too."""
    ctx = run.ctx
    spent = Spend.from_state(state.get("spent"))
    if run.dir.stop_file.exists():
        return "STOP file"
    if iteration >= ctx.stop.iterations:
        return f"{ctx.stop.iterations} iterations"
    if ctx.stop.hours is not None and running_time(run, state) >= ctx.stop.hours * 3600:
        return f"{ctx.stop.hours} hours"
    if ctx.stop.max_calls is not None and spent.model_calls >= ctx.stop.max_calls:
        return f"--max-calls {ctx.stop.max_calls}"
    if ctx.stop.max_visual_tokens is not None and spent.visual_tokens >= ctx.stop.max_visual_tokens:
        return f"--max-visual-tokens {ctx.stop.max_visual_tokens}"
    return None


def _promote(run: Run, state: State, best: GateEntry | None) -> dict[str, Any]:
    """The new incumbent, if any: chain search takes the accepted revision, mcts only a better one."""
    if best is None or best.candidate is None:
        return {}
    if run.ctx.search == "mcts" and not beats(run, state["incumbent"], best.candidate):
        return {}
    run.dir.set_best(run.harness_dir(best.candidate))
    return {"incumbent": best.candidate, "incumbent_score": best.cand_score, "incumbent_cost": best.cand_cost}


def record(state: State, runtime: Runtime[Run]) -> dict[str, Any]:
    """Close the iteration."""
    run = runtime.context
    it, parent = state["iteration"], state["parent"]
    gated = [e for e in entries(state.get("history", [])) if e.iteration == it and e.parent == parent
             and e.candidate in state.get("candidates", [])]
    refused = [GateEntry(iteration=it, parent=parent, candidate=d.get("candidate"), operator=d.get("operator"),
                         decision="dropped", reason=d.get("reason", "")) for d in state.get("dropped", [])]
    if not gated and not refused:
        refused = [GateEntry(iteration=it, parent=parent, decision="none",
                             reason=state.get("no_proposal") or "the editor had nothing to propose")]
    for e in [*gated, *refused]:
        if e.candidate:
            run.record_lineage(e.candidate, parent=parent, iteration=it, operator=e.operator, decision=e.decision,
                               reason=e.reason, score=e.cand_score, cost=e.cand_cost, frames=e.cand_frames,
                               rung=e.rung, rungs=e.rungs)
    update: dict[str, Any] = {"tree": record_children(state.get("tree", {}), parent, gated, refused,
                                                      run.ctx.gate.penalty)}
    update["history"] = [e.model_dump() for e in refused]
    accepted = [e for e in gated if e.decision == "accepted"]
    best = max(accepted, key=lambda e: (e.cand_score or 0.0, -(e.cand_cost or 0.0)), default=None)
    update.update(_promote(run, state, best))
    node = update["tree"].get(parent, {})
    if node.get("n") != (state.get("tree", {}).get(parent) or {}).get("n"):  # the parent read on more questions
        run.record_lineage(parent, score=node["score"], cost=node["cost"])
        if "incumbent" not in update and parent == state["incumbent"]:
            update.update(incumbent_score=node["score"], incumbent_cost=node["cost"])
    decided = [e for e in gated if e.decision != "pending"]
    lead = best or (decided[0] if decided else gated[0] if gated else refused[0])
    d_score = lead.cand_score - lead.score if lead.cand_score is not None and lead.score is not None else None
    d_cost = lead.cand_cost - lead.cost if lead.cand_cost is not None and lead.cost is not None else None
    run.memory.set_outcome(state.get("diagnoses", []), RevisionOutcome(
        candidate=lead.candidate, operator=lead.operator, decision=lead.decision, reason=lead.reason,
        d_score=d_score, d_cost=d_cost, selection=len(run.selection)))
    stop = stop_reason(run, state, it + 1)
    run.event(RecordEvent(iteration=it, event=lead.decision, parent=parent, candidate=lead.candidate,
                          operator=lead.operator, reason=lead.reason,
                          incumbent=update.get("incumbent", state["incumbent"]), stop=stop))
    now = time.time()
    update.update(iteration=it + 1, stop_reason=stop, running_s=running_time(run, state, now), running_at=now)
    return update
