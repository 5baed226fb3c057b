"""validate: static checks, then a smoke run on a few training tasks in the sandbox."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from videvolve.errors import ErrorKind
from videvolve.loop.services import Run
from videvolve.loop.state import State
from videvolve.nodes.common import spent
from videvolve.search.events import ValidateFailed, ValidatePassed
from videvolve.skill_library.harness import validate_harness
from videvolve.usage import Spend


def why_invalid(run: Run, state: State, candidate: str, used: list[dict[str, float]]) -> str | None:
    """The reason a candidate cannot be gated, or None."""
    reason = validate_harness(run.harness_dir(candidate))
    if reason is not None:
        return reason
    by_id = {t.id: t for t in run.train}
    smoke = [by_id[i] for i in state.get("batch", [])[: run.ctx.editor.smoke_tasks]]
    results = run.evaluate(candidate, smoke, "train")
    used.append(spent(results))
    bad = [r for r in results if r.outcome == "error" and ErrorKind(r.error_kind or "crash").harness_fault]
    return f"smoke run on task {bad[0].task_id}: {bad[0].error_kind}: {(bad[0].error or '')[:1500]}" if bad else None


def validate(state: State, runtime: Runtime[Run]) -> dict[str, Any]:
    """Keep the valid candidates; a lone invalid one goes back to the editor (bounded), others are dropped."""
    run = runtime.context
    ctx = run.ctx
    it = state["iteration"]
    used: list[dict[str, float]] = []
    valid: list[str] = []
    dropped: list[dict[str, Any]] = []
    for cand in state.get("candidates", []):
        reason = why_invalid(run, state, cand, used)
        op = state.get("operators", {}).get(cand)
        if reason is None:
            run.event(ValidatePassed(iteration=it, candidate=cand))
            valid.append(cand)
        elif len(state["candidates"]) == 1 and state.get("repair_round", 0) < ctx.editor.repair_rounds:
            run.event(ValidateFailed(iteration=it, event="sent back", candidate=cand, reason=reason))
            return {"feedback": reason, "repair_round": state.get("repair_round", 0) + 1,
                    "spent": _total(used)}
        else:
            run.event(ValidateFailed(iteration=it, event="dropped", candidate=cand, reason=reason))
            dropped.append({"candidate": cand, "operator": op, "reason": reason})
    return {"candidates": valid, "dropped": dropped, "feedback": None, "spent": _total(used)}


def _total(used: list[dict[str, float]]) -> dict[str, float]:
    return Spend.total(Spend.from_state(u) for u in used).to_state()
