"""Multi-fidelity against full validation on a finished run, replayed from its stored results.

:func:`mf_agreement` counts the decisions both make alike and what each pays; :func:`mf_replayed` also says, candidate
by candidate, how much of the selection set multi-fidelity read before it decided, and how far full validation's
verdict on the whole set lay from the gate's threshold (:class:`Stop`): a close call cannot be told early.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy import stats

from videvolve.config import RuntimeSettings
from videvolve.evaluation.results import TaskResult
from videvolve.evaluation.solve import solve_tasks
from videvolve.loop.context import Context, GateSettings
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.search.events import GateEvent, read_events
from videvolve.search.gate import aggregate, guarded
from videvolve.search.history import GateEntry
from videvolve.search.screening import open_paths, paired_se, rungs, screen
from videvolve.search.significance import paired, video_t
from videvolve.skill_library.harness import load_harness
from videvolve.tasks import Task, read_tasks

COUNTS = ("decisions", "same", "evaluations_mf", "evaluations_full", "evaluations_accepted")


@dataclass(frozen=True)
class Margin:
    """One path a candidate may pass by (a gain, a cost cut): how far full validation's figures on the whole set lie
    from that path's two thresholds, in standard errors (positive: it passes)."""

    score: float
    """How far the mean difference lies from where the gate's test stops passing, in standard errors of the mean (the
    unit in which the questions not yet read move it): for a gain, the sign-flip test's (its normal approximation,
    as multi-fidelity models it) or, where less, the test over videos' lower bound over that standard error; for a
    cut, its lower bound (floored, over videos too) plus the margin over it. Infinite where the cost alone decides
    (no level was spent)."""
    cost: float
    """The per-question cost's distance under its bound: minus the mean of (cost - bound) over its standard error, or,
    where less and the gate judges the cost over the selection videos, minus its upper bound over them in that unit."""


@dataclass(frozen=True)
class Stop:
    """One candidate of a decision: how much of it multi-fidelity read, how close full validation's call was."""

    run: str
    candidate: str
    full: str
    """Full validation's decision (accepted / rejected)."""
    read: int
    """Selection questions multi-fidelity had read of it when it decided (its rung)."""
    population: int
    """Selection questions full validation read."""
    distance: float | None
    """Full validation's score margin (:attr:`Margin.score`) on the path the candidate's cost leaves open on the
    whole set, the larger of the two where both are open; None where its cost fits neither (the cost decides)."""
    parent: str = ""
    """The version it was compared with (paired, question by question)."""
    margins: tuple[Margin, ...] = ()
    """Each path's margins: a gain's, then a cut's where the parent costs anything."""
    guard: float = math.inf
    """The guard on each kind: the least, over the kinds, of how far a kind's mean loss lies below where its sign-flip
    test of a loss would pass, in its standard errors (positive: none loses significantly; every path needs it;
    infinite where no kind's answers changed)."""


def mf_agreement(run_dir: Path, futility: float | None = None, curtail: float | None = None,
                 rungs: list[float] | None = None, orders: int = 1) -> dict[str, int]:
    """Multi-fidelity against full validation on a finished run's own candidates, replayed from stored results.

    Candidates screened out on a partial rung are evaluated on the rest of the selection set first (evaluation is
    deterministic); each decision is then made again both ways at the level the run gave it, from the run's seed
    (its first parent). Evaluations are counted as a run pays for them: each (version, question) once, parents and
    the seed (on the first rung, as ``prepare`` evaluates it; the whole set under full validation) included, so a
    winner accepted early is paid for again when a later candidate's rungs reach the questions it skipped.
    ``futility``, ``curtail``, ``rungs``: replay with these instead of the current defaults. ``evaluations_accepted``:
    the selection questions of the seed and of the candidates full validation accepts (what a rule that stopped
    every rejected candidate at once would still pay). ``orders``: replay both ways that many times, under the run's
    seed and the next ``orders - 1`` (each its own order of the questions in the rungs), and sum: one order is one
    draw of what multi-fidelity decides.
    """
    return mf_replayed(run_dir, futility, curtail, rungs, orders)[0]


def gated(run_dir: Path) -> list[GateEntry]:
    """The run's judged candidates, in order (from its checkpointed history, as the lineage records them)."""
    path = run_dir / "events.jsonl"
    _read(path)  # an exit naming it when it cannot be read
    return [e.entry() for e in read_events(path)
            if isinstance(e, GateEvent) and e.event in ("accepted", "rejected") and e.candidate]


def mf_replayed(run_dir: Path, futility: float | None = None, curtail: float | None = None,
                sizes: list[float] | None = None, orders: int = 1) -> tuple[dict[str, int], list[Stop]]:
    """:func:`mf_agreement`'s counts, and each candidate of the run's decisions as replayed both ways under the
    run's own order (:class:`Stop`), from the same replay."""
    from gate_null import Replay

    settings = json.loads(_read(run_dir / "settings.json"))
    ctx = Context.model_validate(settings)
    selection = [t for t in read_tasks(ctx.tasks) if t.split == "selection"]
    history = gated(run_dir)
    totals = dict.fromkeys(COUNTS, 0)
    stops: list[Stop] = []
    if not history:
        return totals, stops
    vlm, cost, runtime = SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2)
    versions = list(dict.fromkeys(v for e in history for v in (e.parent, e.candidate) if v is not None))
    results = {v: solve_tasks(load_harness(run_dir / "harnesses" / v), selection, vlm, cost, runtime,
                              run_dir / "evals" / v / "selection") for v in versions}
    default = GateSettings()
    for j in range(orders):
        replays = {}
        for mode in ("multi-fidelity", "full"):
            gate = ctx.gate.model_copy(update={
                "validation": mode, "futility": default.futility if futility is None else futility,
                "curtail": default.curtail if curtail is None else curtail,
                "rungs": default.rungs if sizes is None else sizes})
            replays[mode] = Replay(ctx.model_copy(update={"gate": gate, "seed": ctx.seed + j}), selection, results)
        counts, judged = _replayed(replays, selection, history)
        for key, value in counts.items():
            totals[key] += value
        if j == 0:
            stops = [_stop(run_dir, mf, full, results, history[0].parent, ctx, selection) for mf, full in judged]
    return totals, stops


def _replayed(replays: dict[str, Any], selection: list[Task], history: list[GateEntry]
              ) -> tuple[dict[str, int], list[tuple[GateEntry, GateEntry]]]:
    """The run's decisions made again by each replay (multi-fidelity, full), what each paid, and each candidate's
    entries (multi-fidelity's, full validation's)."""
    seed = history[0].parent
    for replay in replays.values():  # `prepare` evaluates the seed on the first rung (the whole set when full)
        gate = replay.ctx.gate
        replay.evaluate(seed, rungs(selection, gate.rungs, replay.ctx.seed, gate.validation)[0], "selection")
    same, evaluations_accepted = 0, len(selection)
    decisions = _decisions(history)
    judged_both: list[tuple[GateEntry, GateEntry]] = []
    for k, group in decisions:
        parent, iteration = group[0].parent, group[0].iteration
        chosen, judged = {}, {}
        for mode, replay in replays.items():  # the decision: which candidate (if any) becomes the incumbent
            judged[mode], _ = screen(replay, parent, [e.candidate for e in group if e.candidate], {}, iteration,
                                     history=history[:k], seed_version=seed)
            accepted = [e for e in judged[mode] if e.decision == "accepted"]
            chosen[mode] = max(accepted, key=lambda e: (e.cand_score or 0.0, -(e.cand_cost or 0.0))).candidate \
                if accepted else None
        same += chosen["multi-fidelity"] == chosen["full"]
        evaluations_accepted += len(selection) if chosen["full"] is not None else 0
        full = {e.candidate: e for e in judged["full"]}
        judged_both += [(e, full[e.candidate]) for e in judged["multi-fidelity"] if e.candidate in full]
    paid = {mode: sum(len(ids) for ids in replay.evaluated.values()) for mode, replay in replays.items()}
    return {"decisions": len(decisions), "same": same, "evaluations_mf": paid["multi-fidelity"],
            "evaluations_full": paid["full"], "evaluations_accepted": evaluations_accepted}, judged_both


def _stop(run_dir: Path, mf: GateEntry, full: GateEntry, results: dict[str, list[TaskResult]], seed: str,
          ctx: Context, selection: list[Task]) -> Stop:
    """A candidate's :class:`Stop`: its multi-fidelity rung, and full validation's margins on the whole set."""
    gate = ctx.gate
    parent, candidate = results[full.parent], results[full.candidate or ""]
    c = aggregate(parent, gate.cost_measure)[1]
    c2 = aggregate(candidate, gate.cost_measure)[1]
    c_seed = None if seed == full.parent or gate.cost_ceiling is not None else \
        aggregate(results[seed], gate.cost_measure)[1]
    margins, guard = _margins(selection, parent, candidate, None if c_seed is None else results[seed], full.level,
                              ctx)
    distances = [margins[0 if bound >= 0 else 1].score for _, bound in open_paths(c, c2, gate, c_seed)]
    return Stop(run=run_dir.parent.name, candidate=full.candidate or "", full=full.decision, read=mf.n,
                population=len(parent), distance=max(distances) if distances and full.level else None,
                parent=full.parent, margins=margins, guard=guard)


def _se(d: list[float]) -> float:
    """The standard error of the mean of the differences ``d``, floored at 1 / n (``screening.paired_se``)."""
    return paired_se([0.0] * len(d), d)


def _sign_margin(d: list[float], z: float) -> float:
    """How far the mean of ``d`` lies above where the sign-flip test (its normal approximation, sum(d) >=
    z sqrt(sum(d^2)), as multi-fidelity models it) stops passing, in standard errors of the mean; minus infinity
    where nothing differs (the test cannot pass)."""
    squares = sum(x * x for x in d)
    return (sum(d) - z * math.sqrt(squares)) / len(d) / _se(d) if squares > 0 else -math.inf


def _margins(selection: list[Task], parent: list[TaskResult], candidate: list[TaskResult],
             seed: list[TaskResult] | None, level: float | None, ctx: Context) -> tuple[tuple[Margin, ...], float]:
    """The gain's and the cut's :class:`Margin` on the whole set, and the guard's (``seed``: its results, where it
    bounds a gain's cost), from the statistics of the gate's tests at ``level``."""
    gate = ctx.gate
    n = len(parent)
    measure = gate.cost_measure
    mine, theirs = ([measure.of(r) for r in rs] for rs in (candidate, parent))
    limit = [gate.cost_ceiling] * n if gate.cost_ceiling is not None else [(1 + gate.alpha) * x for x in theirs]
    if seed is not None and gate.cost_ceiling is None:  # the seed's bound where it is the tighter on the whole set
        seeds = [(1 + gate.alpha) * measure.of(r) for r in seed]
        limit = min(limit, seeds, key=sum)
    caps = [limit] + ([[(1 - gate.beta) * x for x in theirs]] if sum(theirs) > 0 else [])
    videos = [t.video_id for t in selection]
    by_video = len(set(videos)) >= gate.min_videos
    costs = []
    for cap in caps:
        q = [m - x for m, x in zip(mine, cap, strict=True)]
        cost = -sum(q) / n / _se(q)
        if by_video:  # the bound is checked over the videos too: its upper bound there, in the same unit
            cost = min(cost, -video_t(q, videos, gate.level).upper / _se(q))
        costs.append(cost)
    if level is None:  # no path's cost fits: the cost decided, no level was spent
        return tuple(Margin(score=math.inf, cost=c) for c in costs), math.inf
    x, y = [r.score for r in parent], [r.score for r in candidate]
    d = [b - a for a, b in zip(x, y, strict=True)]
    st = paired(x, y, level, ctx.seed, gate.margin, videos if by_video else None)
    z, se = float(stats.norm.isf(level)), _se(d)
    gain = _sign_margin(d, z)
    if st.over_videos is not None:  # the test over videos passes while its lower bound is above 0
        gain = min(gain, st.over_videos.lower / se)
    scores = [gain]
    if len(caps) > 1:  # a cut passes while its lower bound (floored, over videos too) is above -margin
        scores.append((st.lower_gate + gate.margin) / se)
    z_stated = float(stats.norm.isf(gate.level))  # the guard is held at the gate's stated level
    guard = -max(_sign_margin([-d[i] for i in idx], z_stated) for idx in guarded(selection).values())
    return tuple(Margin(score=s, cost=c) for s, c in zip(scores, costs, strict=True)), guard


def _decisions(history: list[GateEntry]) -> list[tuple[int, list[GateEntry]]]:
    """The run's decisions: its judged candidates grouped by (iteration, parent), each with how many came before."""
    out: list[tuple[int, list[GateEntry]]] = []
    for k, e in enumerate(history):
        if out and (out[-1][1][0].iteration, out[-1][1][0].parent) == (e.iteration, e.parent):
            out[-1][1].append(e)
        else:
            out.append((k, [e]))
    return out


def _read(path: Path) -> str:
    """A run folder's file, or an exit naming it and what to pass instead."""
    try:
        return path.read_text()
    except OSError as exc:
        raise SystemExit(f"{path} cannot be read ({exc.strerror}): pass an evolve run folder that has run, e.g. "
                         "bench/.cache/protocol/world<SEED>-<HARNESS>/run") from exc
