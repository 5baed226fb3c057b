"""Candidate screening on the selection set: full validation, or multi-fidelity rungs (VidHarness).

Multi-fidelity: the selection set is cut into nested rungs (a seeded order; sizes a setting, a tenth more each rung
by default). Every candidate is first evaluated on the smallest rung; comparisons with the parent are always
paired, on the same questions.

Under the paired gate (the default) this is full validation, stopped early (:mod:`videvolve.search.curtailment`): the
full rung is judged by the gate's rule at the decision's whole level, as full validation is; on a partial rung a
candidate is accepted early only when the gate's rule accepts it there and the predictive chance that full validation
accepts it is >= ``--curtail``; it stops as a clear loser when that chance falls below ``--futility``, or when the
predictive chance that its cost on the whole set fits a gain's or a cut's bound does. Among the rest the one with the
best penalized accuracy (accuracy - penalty x 0.5/sqrt(n)) goes on to the next rung's new questions. Under ``--gate
video-rsi`` the rule is applied at the full rung only, and a candidate stops early when its optimistic paired difference
(difference + penalty x its standard error) cannot pass it.

The screening never asks which rule it is: the run's rule (``GateSettings.acceptance``, :mod:`videvolve.search.rules`)
decides each candidate, says whether a partial rung may settle a verdict (``sequential``) and why a candidate is
accepted or stopped there (:mod:`videvolve.search.partial_rungs` holds the built-in rules' reasons).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from videvolve.evaluation.results import TaskResult
from videvolve.metrics import mcnemar, paired_bootstrap
from videvolve.search.cost_bounds import costs, fit_all, gain_limits
from videvolve.search.curtailment import outlook
from videvolve.search.gate import Decision, PairedDecision, aggregate, mean_frames
from videvolve.search.history import GateEntry
from videvolve.search.partial_rungs import differences, open_paths, paired_se
from videvolve.search.services import AcceptanceRule, Evaluator, GateRules, Look
from videvolve.search.spending import next_level
from videvolve.search.tree import penalized
from videvolve.tasks import Task

__all__ = ["open_paths", "paired_se", "rungs", "screen"]  # open_paths and paired_se: their home is partial_rungs


def rungs(selection: list[Task], sizes: list[float], seed: int, mode: str) -> list[list[Task]]:
    """Nested subsets of the selection set (one rung, the whole set, for full validation)."""
    if mode == "full":
        return [selection]
    order = sorted(selection, key=lambda t: t.id)
    random.Random(f"rungs:{seed}").shuffle(order)
    n = len(order)
    out: list[list[Task]] = []
    for f in sorted(sizes):
        k = min(n, max(1, math.ceil(round(f * n, 9))))
        if not out or k > len(out[-1]):
            out.append(order[:k])
    if len(out[-1]) < n:
        out.append(order)
    return out


def screen(run: Evaluator, parent: str, candidates: list[str], operators: dict[str, str | None],
           iteration: int, keep_pending: bool = False, history: Sequence[GateEntry] = (),
           seed_version: str | None = None, rule: AcceptanceRule | None = None
           ) -> tuple[list[GateEntry], list[TaskResult]]:
    """One aggregate entry per candidate (decision, reason, scores, how far it got) and the new results.

    ``keep_pending``: a hopeful candidate that loses the promotion is ``pending`` rather than rejected, so that it
    can be promoted when its parent is expanded again (VidHarness's pool; results on disk make that free).
    ``history``: the run's earlier entries, which set the paired gate's level (alpha-investing). ``seed_version``:
    the harness the run started from; under the paired gate a gain may also cost no more than (1 + alpha) x the
    seed's cost (:func:`~videvolve.search.gate.gain_cost_bound`; the seed's selection results are on disk).
    ``rule``: the acceptance rule (default: the one the settings name, ``GateSettings.acceptance``), which decides
    each candidate and says what a partial rung may settle; the screening never asks its name.
    """
    ctx = run.ctx
    gate = ctx.gate
    selection = run.selection
    eps = gate.eps_for(len(selection))
    rule = rule or gate.acceptance
    level = next_level(history, gate.level, gate.spending) / max(1, len(candidates)) if rule.spends_wealth else None
    seed_bounds = rule.seed_bound and gate.cost_ceiling is None  # a ceiling replaces the seed's bound: not read
    seed = seed_version if seed_bounds and seed_version is not None and seed_version != parent else None
    new: list[TaskResult] = []
    entries: dict[str, GateEntry] = {}
    alive = list(candidates)
    frames: dict[str, float] = {}
    ladder = rungs(selection, gate.rungs, ctx.seed, gate.validation)
    by_video = len({t.video_id for t in selection}) >= gate.min_videos  # the whole set's videos, on every rung
    read: dict[str, list[TaskResult]] = {}
    costed: dict[str, dict[str, float | None]] = {}  # each candidate's cost against a gain's bound, where last read

    def reach(version: str, rung: list[Task]) -> tuple[list[TaskResult], list[TaskResult]]:
        """A version's results on a rung, and those the rung added.

        Rungs are nested, so only the new questions of each are evaluated, and counted once in what it spent.
        """
        have = read.setdefault(version, [])
        added = run.evaluate(version, rung[len(have):], "selection") if len(have) < len(rung) else []
        have += added
        return have[:len(rung)], added

    waiting: list[tuple[float, str, int]] = []  # hopefuls not promoted (chain): (penalized score, name, rung reached)
    champion: str | None = None  # chain: the best accepted so far; another is accepted only if it beats it
    k = 0
    while k < len(ladder):
        rung = ladder[k]
        last = k == len(ladder) - 1
        # the parent (and the seed) only on the questions reached: an incumbent accepted early has been evaluated on
        # part of the set, and is evaluated further only when a later candidate gets that far
        p_res = reach(parent, rung)[0]
        a, c = aggregate(p_res, gate.cost_measure)
        s_res = None if seed is None else reach(seed, rung)[0]
        c_seed = None if s_res is None else aggregate(s_res, gate.cost_measure)[1]
        champ = reach(champion, rung)[0] if champion is not None else None
        scored = []
        for cand in alive:
            res, added = reach(cand, rung)
            new += added
            a2, c2 = aggregate(res, gate.cost_measure)
            scored.append((cand, a2, c2, res))
            frames[cand] = mean_frames(res)
            costed[cand] = _cost_fields(p_res, res, s_res, gate, rung if by_video else None)
        base: dict[str, Any] = {"iteration": iteration, "parent": parent, "score": a, "cost": c, "n": len(rung),
                                "rung": k + 1, "rungs": len(ladder), "eps": eps, "metric": gate.cost_measure.metric,
                                "frames": mean_frames(p_res), "level": level}
        decided: dict[str, tuple[Decision, dict[str, Any]]] = {}
        looks = {cand: Look(rung, p_res, res, selection, gate, a, c, a2, c2, s_res, c_seed, level, by_video, ctx.seed)
                 for cand, a2, c2, res in scored}
        for cand, *_, res in scored:
            if not (last or rule.sequential):
                continue  # only the full rung decides
            verdict, extra = rule.decide(looks[cand])
            if last:
                decided[cand] = (verdict, extra)
            elif verdict.accept and (why := rule.accept_early(looks[cand])):
                rivals = [  # full validation keeps the best accepted: it must beat them
                    v for v in [*([champion] if champion else []), *alive, *(w for _, w, _ in waiting)]
                    if v != cand and (v not in entries or entries[v].decision == "accepted")]
                ahead = min((_beats(read[v], res, len(selection)) for v in rivals), default=1.0)
                if ahead < gate.curtail:
                    continue  # it passes, but another may yet score higher on the whole set: both go on
                decided[cand] = (Decision(True, f"{verdict.reason}; {why}" + (
                    f"; the chance that it scores at least as well as {', '.join(rivals)} is {ahead:.3f}"
                    if rivals else "")), extra)
        for cand, a2, c2, res in scored:
            if cand not in decided:
                continue
            decision, extra = decided[cand]
            # a verdict on cost alone (over the videos where judged over them) tests nothing: no level spent
            priced = decision.priced if isinstance(decision, PairedDecision) else bool(open_paths(c, c2, gate, c_seed))
            spent = level if priced else None
            boot = paired_bootstrap([r.score for r in p_res], [r.score for r in res], seed=ctx.seed)
            mcq = [(o.score == 1, x.score == 1) for o, x in zip(p_res, res, strict=True) if o.kind == "mcq"]
            reason = decision.reason if last else f"accepted early at rung {k + 1}/{len(ladder)}: {decision.reason}"
            entries[cand] = GateEntry(
                **{**base, "level": spent}, candidate=cand, operator=operators.get(cand), cand_frames=frames[cand],
                decision="accepted" if decision.accept else "rejected", reason=reason, cand_score=a2,
                cand_cost=c2, p_value=boot.p_value, ci=(boot.ci_low, boot.ci_high),
                mcnemar_p=mcnemar([x for x, _ in mcq], [y for _, y in mcq]).p_value if mcq else None, **extra)
        won = [cand for cand in alive if entries.get(cand) and entries[cand].decision == "accepted"]
        if won and not keep_pending:  # chain: the best accepted so far; the others go on only to beat it
            champion = _crown(champion, won, read, entries, parent, len(rung), gate, candidates)
            champ = read[champion][:len(rung)]
        elif won:
            for cand, a2, c2, _ in scored:  # an early winner ends the decision: the others wait or go
                if cand not in entries:
                    entries[cand] = GateEntry(
                        **base, candidate=cand, operator=operators.get(cand),
                        decision="pending" if keep_pending else "rejected", cand_score=a2, cand_cost=c2,
                        cand_frames=frames[cand], reason=f"another candidate was accepted at rung {k + 1}")
            break
        hopeful = []
        for cand, a2, c2, res in [] if last else scored:
            if cand in entries:
                continue
            # on_cost: turned down on its cost alone, no test of its answers was made, no level spent
            why_not, on_cost = rule.stop_early(looks[cand]) or (None, False)
            if why_not is None and rule.sequential and champ is not None and \
                    (beat := _beats(champ, res, len(selection))) < gate.futility:
                why_not = (f"{champion} was accepted, and the predictive chance that this one scores higher on "
                           f"all {len(selection)} questions is {beat:.3f} < {gate.futility:g}")
            if why_not is None:
                hopeful.append((cand, a2, c2))
            else:
                entries[cand] = GateEntry(
                    **{**base, "level": level if open_paths(c, c2, gate, c_seed) and not on_cost else None},
                    candidate=cand,
                    operator=operators.get(cand), decision="rejected", cand_score=a2, cand_frames=frames[cand],
                    cand_cost=c2,
                    reason=f"screened out at rung {k + 1}/{len(ladder)} ({len(rung)} questions): {why_not}")
        if not hopeful:  # turned down on the whole set, or stopped: full validation would still judge the others
            if not waiting:
                break
            _, resumed, reached = waiting.pop(0)
            alive, k = [resumed], reached + 1
            continue
        best = max(hopeful, key=lambda x: (penalized(x[1], len(rung), gate.penalty), -x[2], x[0]))
        for cand, a2, c2 in hopeful:
            if cand == best[0]:
                continue
            if not keep_pending:  # chain: it goes on from here if the one promoted fails
                waiting.append((penalized(a2, len(rung), gate.penalty), cand, k))
                waiting.sort(key=lambda w: (-w[0], w[1]))
                continue
            entries[cand] = GateEntry(
                **base, candidate=cand, operator=operators.get(cand), decision="pending", cand_score=a2,
                cand_cost=c2, cand_frames=frames[cand],
                reason=f"not promoted at rung {k + 1}: {_ahead(best, (cand, a2, c2), len(rung), gate.penalty)}; "
                       "kept for a later promotion")
        alive = [best[0]]
        k += 1
    return [entries[c].model_copy(update=costed.get(c, {})) for c in candidates if c in entries], new


def _cost_fields(parent: list[TaskResult], candidate: list[TaskResult], seed: list[TaskResult] | None,
                 gate: GateRules, rung: list[Task] | None) -> dict[str, float | None]:
    """``cost_bound`` and ``cost_upper`` of a candidate's entry (over the videos of ``rung``, where given)."""
    measure = gate.cost_measure
    limits = gain_limits(costs(parent, measure), gate.alpha,
                         None if seed is None else costs(seed, measure), gate.cost_ceiling)
    fitted, bound = fit_all(costs(candidate, measure), limits,
                            None if rung is None else [t.video_id for t in rung], gate.level)
    return {"cost_bound": bound.mean, "cost_upper": fitted.upper if fitted.videos is not None else None}


def _ahead(best: tuple[str, float, float], other: tuple[str, float, float], n: int, penalty: float) -> str:
    """Why ``best`` (id, score, cost) was promoted before ``other`` on a rung of ``n`` questions."""
    mine, theirs = penalized(best[1], n, penalty), penalized(other[1], n, penalty)
    if round(mine, 9) > round(theirs, 9):
        return f"{best[0]} has the better penalized accuracy ({mine:.3f} vs {theirs:.3f})"
    if best[2] < other[2]:
        return f"{best[0]} ties on penalized accuracy ({mine:.3f}) and costs less ({best[2]:,.0f} vs {other[2]:,.0f})"
    return f"{best[0]} ties on penalized accuracy ({mine:.3f}) and cost (the order of version ids decides)"


def _beats(rival: list[TaskResult], candidate: list[TaskResult], population: int) -> float:
    """The predictive chance that ``candidate`` scores at least ``rival``'s mean on all ``population`` questions.

    From the first questions both were read on (rungs are nested). Full validation takes the accepted candidate with
    the best score on the whole set: one that cannot be expected to beat the one already accepted is not worth its
    evaluations, and one accepted early must be all but sure to beat every other still in the running.
    """
    m = min(len(rival), len(candidate))
    if m == 0:
        return 0.5
    d = differences(rival[:m], candidate[:m])
    if len(d) >= population:
        return 1.0 if sum(d) >= 0 else 0.0
    return outlook(d, population, 0.5).predictive


def _crown(champion: str | None, won: list[str], read: dict[str, list[TaskResult]], entries: dict[str, GateEntry],
           parent: str, n: int, gate: GateRules, order: list[str]) -> str:
    """The best of the accepted (the one so far and those accepted on this rung), as full validation chooses it.

    They are compared on the same ``n`` questions, the higher score first, then the lower cost, then the earlier in
    ``order`` (the candidates as proposed); their entries are set to those questions' figures, so that whoever picks
    the best accepted entry (the first of the best, in that order) picks the same one.
    """
    contenders = list(dict.fromkeys([*([champion] if champion else []), *won]))
    figures = {v: aggregate(read[v][:n], gate.cost_measure) for v in contenders}
    best = max(contenders, key=lambda v: (figures[v][0], -figures[v][1], -order.index(v)))
    if len(contenders) > 1:
        a, c = aggregate(read[parent][:n], gate.cost_measure)
        for v in contenders:
            entries[v] = entries[v].model_copy(update={"cand_score": figures[v][0], "cand_cost": figures[v][1],
                                                       "score": a, "cost": c, "n": n})
    return best
