"""validate: static checks, then a smoke run on a few training tasks in the sandbox."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from videvolve.graph.context import Context
from videvolve.graph.run import get_run
from videvolve.graph.state import State
from videvolve.nodes.common import spent
from videvolve.skill_library.harness import validate_harness

HARNESS_FAULTS = ("static", "crash", "parse", "timeout", "memory")


def validate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Pass, go back to the editor with the reason (bounded), or drop the candidate."""
    run, ctx = get_run(runtime.context), runtime.context
    candidate = str(state["candidate"])
    reason = validate_harness(run.harness_dir(candidate))
    used: dict[str, float] = {}
    if reason is None:
        by_id = {t.id: t for t in run.train}
        smoke = [by_id[i] for i in state.get("batch", [])[: ctx.smoke_tasks]]
        results = run.evaluate(candidate, smoke, "train")
        used = spent(results)
        bad = [r for r in results if r.outcome == "error" and r.error_kind in HARNESS_FAULTS]
        if bad:
            reason = f"smoke run on task {bad[0].task_id}: {bad[0].error_kind}: {(bad[0].error or '')[:1500]}"
    it = state["iteration"]
    if reason is None:
        run.event(it, "validate", "passed", candidate=candidate)
        return {"feedback": None, "spent": used}
    if state.get("repair_round", 0) < ctx.repair_rounds:
        run.event(it, "validate", "sent back", candidate=candidate, reason=reason)
        return {"feedback": reason, "repair_round": state.get("repair_round", 0) + 1, "spent": used}
    run.event(it, "validate", "dropped", candidate=candidate, reason=reason)
    return {"candidate": None, "dropped": candidate, "feedback": reason, "spent": used}
