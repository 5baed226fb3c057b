"""prepare: copy the seed harness into the run and evaluate it on the selection set (the incumbent's baseline).

Under multi-fidelity validation the seed answers the first rung only: screening compares every candidate with its
parent on the questions the candidate reached, and evaluates the parent (the seed included) further only when a
candidate gets that far, so a run whose candidates stop early never pays for the seed on the whole set.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from langgraph.runtime import Runtime

from videvolve.loop.services import Run
from videvolve.loop.state import State
from videvolve.nodes.common import spent
from videvolve.search.events import Baseline
from videvolve.search.gate import aggregate, mean_frames
from videvolve.search.screening import rungs
from videvolve.search.tree import root
from videvolve.skill_library.harness import copy_harness, find_harness


def prepare(state: State, runtime: Runtime[Run]) -> dict[str, Any]:
    """The seed becomes the incumbent and the root of the search tree."""
    run = runtime.context
    ctx = run.ctx
    seed = copy_harness(find_harness(ctx.seed_harness), run.dir.harnesses, summary="seed")
    version = seed.name
    first = rungs(run.selection, ctx.gate.rungs, ctx.seed, ctx.gate.validation)[0]
    results = run.evaluate(version, first, "selection")
    score, cost = aggregate(results, ctx.gate.cost_measure)
    run.record_lineage(version, parent=None, iteration=0, operator=None, decision="seed", reason="the seed harness",
                       score=score, cost=cost, frames=mean_frames(results))
    run.dir.set_best(seed)
    run.event(Baseline(iteration=0, harness=version, score=score, cost=cost, selection=len(run.selection),
                       questions=len(results)))
    now = time.time()
    return {"started_at": now, "running_s": now - run.opened_at, "running_at": now,
            "tasks_digest": run.tasks_digest, "run_uid": secrets.token_hex(8),
            "iteration": 0, "incumbent": version,
            "incumbent_score": score, "incumbent_cost": cost, "parent": version, "history": [], "spent": spent(results),
            "tree": root(version, score, cost, len(results)),
            "stop_reason": "--iterations 0" if ctx.stop.iterations == 0 else None}
