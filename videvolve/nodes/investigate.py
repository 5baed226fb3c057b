"""investigate: diagnose each failed training task by revisiting its video; store the diagnoses in memory."""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

from videvolve.evaluation.results import video_fingerprint
from videvolve.investigator import Investigator
from videvolve.investigator.agent import AgentInvestigator
from videvolve.loop.services import Run
from videvolve.loop.state import State
from videvolve.memory.records import Diagnosis
from videvolve.models import make_vlm
from videvolve.models.cache import MeteredVLM, ResponseCache
from videvolve.models.step_cache import step_cache
from videvolve.search.events import Diagnoses, InvestigateFallback
from videvolve.skill_library.trace import read_steps
from videvolve.usage import Spend

log = logging.getLogger(__name__)


def investigator_model(run: Run, cache: ResponseCache | None = None) -> MeteredVLM:
    """The agent investigator's model (by default the solver's, as in Video-RSI) with its own cap, cached, metered."""
    ctx = run.ctx
    settings = (ctx.investigator.agent_model or ctx.model).model_copy(update={"max_tokens":
                                                                              ctx.investigator.max_tokens})
    return MeteredVLM(make_vlm(settings), cache or run.cache)


def investigate(state: State, runtime: Runtime[Run]) -> dict[str, Any]:
    """One diagnosis per failure; the probes' cost is the investigator's own ledger."""
    run = runtime.context
    it = state["iteration"]
    cache = step_cache(run.cache, run.root, f"{it}-investigate")  # a rerun after a kill pays what it paid
    try:
        return _investigate(run, state, cache)
    finally:
        if cache is not None:
            cache.close()


def _investigate(run: Run, state: State, cache: ResponseCache | None) -> dict[str, Any]:
    ctx = run.ctx
    it = state["iteration"]
    by_id = {t.id: t for t in run.train}
    inv = Investigator(run.probe_vlm, run.cost, ctx.investigator.probe_frames, cache, ctx.runtime.image_format)
    agent = AgentInvestigator(investigator_model(run, cache), inv, run.dir.investigations, ctx.investigator.rounds) \
        if ctx.investigator.kind == "agent" else None
    evals = run.dir.evals(state["parent"], "train")
    diagnoses: list[Diagnosis] = []
    for task_id in state.get("failures", []):
        task = by_id[task_id]
        result = run.stored(state["parent"], task, "train")
        if result is None:
            continue
        trace = read_steps(evals.trace(task_id))
        if agent is None:
            diagnoses.append(inv.diagnose(task, result, trace, ctx.run_id, it, state.get("run_uid", "")))
            continue
        d = agent.diagnose(task, result, trace, ctx.run_id, it, state.get("run_uid", ""))
        if d.fallback:
            log.warning("iteration %d: the agent investigator gave no usable diagnosis of %s; the procedure's is "
                        "kept: %s", it + 1, task_id, d.fallback)
            run.event(InvestigateFallback(iteration=it, task=task_id, reason=d.fallback, category=d.category))
        diagnoses.append(d)
    for i, d in enumerate(diagnoses):  # read from a proxy: the source's fingerprint, as held-out videos are excluded
        if (source := run.sources.get(by_id[d.task_id].video)) is not None:
            diagnoses[i] = d.model_copy(update={"video_fingerprint": video_fingerprint(source)})
    run.memory.put(diagnoses)
    counts: dict[str, int] = {}
    for d in diagnoses:
        counts[d.category] = counts.get(d.category, 0) + 1
    investigators = None if agent is None else {
        k: sum(d.investigator == k for d in diagnoses) for k in ("agent", "procedure")}
    run.event(Diagnoses(iteration=it, categories=counts, probe_cost=inv.ledger,
                        diagnosis_ids=[d.id for d in diagnoses], investigators=investigators))
    ledger = inv.ledger  # the probes' visual tokens are its "image_tokens" (probes show frames and clips)
    spend = Spend(model_calls=ledger["model_calls"], visual_tokens=ledger["image_tokens"],
                  probe_frames=ledger["frames"])
    if agent is not None:  # the agent's own calls count against --max-calls; replies from the cache cost nothing
        spend += Spend.of_model("investigator", agent.model.ledger)
    return {"diagnoses": [d.id for d in diagnoses], "spent": spend.to_state()}
