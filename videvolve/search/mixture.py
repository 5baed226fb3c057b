"""A mixture of harnesses by frame budget (VidHarness): for each tier, the version that does best under that cap.

After evolution every version with complete selection results is run on the selection set under each tier's
per-question frame cap (harnesses read the cap from ``ctx.budget``). A tier goes to the run's best harness unless
another version beats it under that cap by more than ``penalty`` paired standard errors on the same questions (so
that a tier never switches on noise); the choice is kept in ``RUN/mixture.json``. ``eval`` and ``ask`` given a run
directory and ``--budget N`` use the tier for N.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from videvolve.atomic import write_text_atomic
from videvolve.errors import UsageError
from videvolve.evaluation.solve import solve_tasks
from videvolve.rundir import RunDir
from videvolve.search.events import MixtureTier
from videvolve.search.gate import aggregate
from videvolve.search.screening import paired_se
from videvolve.search.services import RunServices
from videvolve.skill_library.harness import content_hash
from videvolve.usage import CostMeasure


def complete_versions(run: RunServices) -> list[str]:
    """The seed, and the versions of a run with a result for every selection task (those that went the distance).

    Under multi-fidelity the seed may have answered only the rungs its candidates reached; it is a mixture's
    cheapest tier often enough to be always among them.
    """
    out = []
    for version, record in run.lineage().items():
        if record.decision == "seed" or all(run.stored(version, t, "selection") is not None for t in run.selection):
            out.append(version)
    return out


def build_mixture(run: RunServices, tiers: list[int], best: str) -> dict[str, Any]:
    """Choose a version per tier (``best``: the run's best harness, the default of every tier); writes the mixture."""
    versions = complete_versions(run)
    if best not in versions:
        versions.append(best)
    table: dict[str, Any] = {}
    for cap in sorted(tiers):
        runtime = run.ctx.runtime.model_copy(update={"budget": cap})
        results = {v: solve_tasks(run.harness(v), run.selection, run.vlm, run.cost, runtime,
                                  run.eval_dir(v, f"selection-cap{cap}"), run.cache) for v in versions}
        scored = {v: aggregate(res, CostMeasure(metric="frames")) for v, res in results.items()}
        top = max(versions, key=lambda v: (scored[v][0], -scored[v][1], v == best, v))
        base = [r.score for r in results[best]]
        margin = scored[top][0] - scored[best][0]
        se = paired_se(base, [r.score for r in results[top]])
        penalty = run.ctx.gate.penalty
        version = top if top != best and margin > penalty * se else best
        why = ("the run's best harness" if top == best else
               f"{top} leads by {margin:+.3f}, more than {penalty} x SE {se:.3f}" if version == top else
               f"{top} leads by only {margin:+.3f} (<= {penalty} x SE {se:.3f}): the run's best harness kept")
        score, frames = scored[version]
        table[str(cap)] = {"version": version, "score": score, "frames": frames, "why": why,
                           "candidates": {v: sc for v, (sc, _) in scored.items()}}
        run.event(MixtureTier(iteration=-1, cap=cap, version=version, score=score, frames=frames, why=why))
    mixture = {"tiers": table, "best": best, "selection_questions": len(run.selection)}
    write_text_atomic(run.dir.mixture, json.dumps(mixture, indent=1), "the run's mixture")
    return mixture


def tier_for(mixture: dict[str, Any], budget: int | None) -> tuple[int, str]:
    """(tier, version) for a budget: the largest tier within it (the smallest tier when none is)."""
    tiers = sorted(int(k) for k in mixture["tiers"])
    if budget is None:
        cap = tiers[-1]
    else:
        within = [t for t in tiers if t <= budget]
        cap = within[-1] if within else tiers[0]
    return cap, mixture["tiers"][str(cap)]["version"]


def resolve_run_harness(path: Path, budget: int | None) -> Path:
    """A run directory given as a harness: its mixture's tier for the budget, else its best harness."""
    run = RunDir(path)
    if run.mixture.exists():
        try:
            _, version = tier_for(json.loads(run.mixture.read_text(encoding="utf-8")), budget)
        except (ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
            raise UsageError(f"{run.mixture} is not a mixture videvolve wrote ({type(exc).__name__}: {exc}); "
                             f"delete it to use the run's best harness, or rebuild it with `videvolve evolve "
                             f"--resume`") from None
        return run.harness(version)
    return best_version(run)


def best_version(run: RunDir) -> Path:
    """The run's best harness as its immutable version folder (``best/`` is replaced when a revision is promoted).

    A server that loaded ``best/`` would find it changed under it at the next promotion; the version folder never
    changes. ``best/`` itself where the run holds no such folder.
    """
    try:
        version = run.harness(content_hash(run.best))
    except OSError:  # best/ being put in place this instant, or none yet
        return run.best
    return version if version.is_dir() else run.best
