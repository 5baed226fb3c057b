"""investigate: diagnose each failed training task by revisiting its video; store the diagnoses in memory."""

from __future__ import annotations

import json
from typing import Any

from langgraph.runtime import Runtime

from videvolve.evaluation.results import result_path
from videvolve.graph.context import Context
from videvolve.graph.run import get_run
from videvolve.graph.state import State
from videvolve.investigator import Investigator


def investigate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """One diagnosis per failure; the probes' cost is the investigator's own ledger."""
    run, ctx = get_run(runtime.context), runtime.context
    by_id = {t.id: t for t in run.train}
    inv = Investigator(run.probe_vlm, run.cost, ctx.probe_frames, run.cache, ctx.runtime.image_format)
    out_dir = run.eval_dir(state["parent"], "train")
    diagnoses = []
    for task_id in state.get("failures", []):
        task = by_id[task_id]
        result = run.stored(state["parent"], task, "train")
        if result is None:
            continue
        trace_path = out_dir / "traces" / f"{result_path(out_dir, task_id).stem}.jsonl"
        trace = [json.loads(x) for x in trace_path.read_text().splitlines() if x.strip()] if trace_path.exists() \
            else []
        diagnoses.append(inv.diagnose(task, result, trace, ctx.run_id, state["iteration"]))
    run.memory.put(diagnoses)
    counts: dict[str, int] = {}
    for d in diagnoses:
        counts[d.category] = counts.get(d.category, 0) + 1
    run.event(state["iteration"], "investigate", "diagnoses", categories=counts, probe_cost=inv.ledger)
    ledger = inv.ledger
    return {"diagnoses": [d.id for d in diagnoses],
            "spent": {"model_calls": float(ledger["model_calls"]), "visual_tokens": float(ledger["image_tokens"]),
                      "probe_frames": float(ledger["frames"])}}
