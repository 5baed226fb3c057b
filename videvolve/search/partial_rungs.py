"""What a partial rung of multi-fidelity screening says of full validation's verdict, rule by rule.

The paired rule settles a verdict early (:mod:`videvolve.search.curtailment`): :func:`curtailed` says why an
acceptance on a partial rung is safe, :func:`futile` why a candidate cannot be expected to pass on the whole set.
The paper's rule decides at the full rung only; :func:`cannot_pass` stops a candidate whose optimistic paired
difference (difference + penalty x :func:`paired_se`) cannot pass it. The rules (:mod:`videvolve.search.rules`) call
these; the screening (:mod:`videvolve.search.screening`) asks the rules.
"""

from __future__ import annotations

import math
from collections import Counter

from videvolve.evaluation.results import TaskResult
from videvolve.search.cost_bounds import path_chances
from videvolve.search.curtailment import outlook, sign_chance, video_chance
from videvolve.search.gate import bound_text, gain_cost_bound
from videvolve.search.kind_guard import may_yet_lose, sure_loss
from videvolve.search.services import GateRules, Look

TOL = 1e-9


def paired_se(parent: list[float], candidate: list[float], population: int | None = None) -> float:
    """Standard error of the mean per-question difference, at least 1/n (one discordant question's worth).

    The floor keeps a candidate that ties its parent on a small rung from looking certain: ties on a few questions
    say little about the rest of the selection set. With ``population`` (the full rung's size) the finite
    population correction sqrt(1 - n/N) applies: the gate judges the mean over that finite set, which the questions
    already answered fix in part (and entirely at the full rung).
    """
    n = len(parent)
    if n == 0:
        return math.inf
    d = [y - x for x, y in zip(parent, candidate, strict=True)]
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 1.0
    se = max(math.sqrt(var / n), 1 / n)
    if population is not None:
        se *= math.sqrt(max(0.0, 1 - n / population))
    return se


def open_paths(c: float, c2: float, gate: GateRules, c_seed: float | None = None) -> list[tuple[str, float]]:
    """The paths the candidate's cost leaves open, each with the bound its mean difference must clear."""
    out = []
    if c2 <= gain_cost_bound(c, gate.alpha, c_seed, gate.cost_ceiling) + TOL:
        out.append(("no gain", 0.0))
    if c > 0 and c2 <= (1 - gate.beta) * c + TOL:
        out.append((f"a loss of the margin {gate.margin:g}", -gate.margin))
    return out


def differences(parent: list[TaskResult], candidate: list[TaskResult]) -> list[float]:
    """The paired differences of score, candidate - parent, question by question."""
    return [y.score - x.score for x, y in zip(parent, candidate, strict=True)]


def _level(look: Look) -> float:
    if look.level is None:
        raise ValueError("the paired rule judges a rung at a level: the screening gives one to rules that spend "
                         "the run's alpha-wealth")
    return look.level


def curtailed(look: Look) -> str | None:
    """Why an early acceptance is safe (full validation would accept it all but surely), or None.

    Full validation also turns down a candidate under which one kind of question (on a speaking world, one kind of
    evidence) loses significantly: the predictive chance of that, kind by kind, must be at most 1 - ``--curtail``.
    With ``look.by_video`` a gain must hold over the selection videos too: the predictive chance of that, at least
    ``--curtail``. The whole set's cost must fit the path as surely (over the videos too with ``by_video``:
    :func:`~videvolve.search.cost_bounds.path_chances`; ``look.seed``: the seed's results on these questions, whose
    cost bounds a gain's too).
    """
    gate, selection, parent, candidate = look.gate, look.selection, look.parent, look.candidate
    if gate.curtail >= 1:
        return None
    level = _level(look)
    population = len(selection)
    d = differences(parent, candidate)
    rest = population - len(d)
    by_id = {t.id: t for t in selection}
    if may_yet_lose(parent, candidate, selection, gate.level, gate.curtail):
        return None  # some kind may yet lose significantly on the whole set
    videos = [by_id[r.task_id].video_id for r in parent]
    sizes = Counter(t.video_id for t in selection)
    passable = [(name, bound) for name, bound, fits in path_chances(
                    parent, candidate, gate, population, look.seed, videos if look.by_video else None, sizes)
                if fits >= gate.curtail and (name, bound) in open_paths(look.c, look.c2, gate, look.c_seed)]
    for _, bound in passable:
        chance = outlook(d, population, level, bound).predictive
        if chance >= gate.curtail and look.by_video:  # a gain must hold over the videos, a cut's bound there too
            over = video_chance(d, videos, sizes, level, bound)
            if over < gate.curtail:
                continue
            chance = min(chance, over)
        if chance >= gate.curtail:
            return (f"the predictive chance that full validation on all {population} questions accepts it (the other "
                    f"{rest} alike to these) is {chance:.3f} >= {gate.curtail:g}")
    return None


def futile(look: Look) -> tuple[str, bool] | None:
    """Why the paired gate cannot expect to accept the candidate on the whole set, and whether on cost alone; or None.

    A path whose cost misses its bound on this rung stays open while the predictive chance that the whole set's cost
    fits it is at least ``--futility`` (:func:`~videvolve.search.cost_bounds.path_chances`; over the videos with
    ``look.by_video``). A gain's chance where fewer than two answers changed is counted
    (:func:`~videvolve.search.curtailment.sign_chance`).
    """
    gate, selection, parent, candidate = look.gate, look.selection, look.parent, look.candidate
    a, a2, c, c2 = look.a, look.a2, look.c, look.c2
    level = _level(look)
    population = len(selection)
    by_id = {t.id: t for t in selection}
    fits = path_chances(parent, candidate, gate, population, look.seed,
                        [by_id[r.task_id].video_id for r in parent] if look.by_video else None,
                        Counter(t.video_id for t in selection))
    paths = [(name, bound) for name, bound, chance in fits if chance >= gate.futility]
    if not paths:
        of = bound_text(c, gate.alpha, look.c_seed, gate.cost_ceiling)
        return (f"cost {c2:.1f} vs {c:.1f} is neither a gain's (<= {of}) nor a cut's (<= (1-{gate.beta}) x {c:.1f}), "
                f"and the predictive chance that it fits one on all {population} questions"
                f"{' and over their videos' if look.by_video else ''} is "
                f"{max(chance for _, _, chance in fits):.3f} < {gate.futility:g}", True)
    if (loss := sure_loss(parent, candidate, selection, gate.level, gate.futility, look.run_seed)) is not None:
        return f"{loss}, which full validation turns down", False
    d = differences(parent, candidate)
    chance = max(sign_chance(d, population, level) if bound >= 0 else  # a gain: changes counted where few
                 outlook(d, population, level, bound).predictive for _, bound in paths)
    if chance >= gate.futility:
        return None
    return (f"score {a2:.3f} vs {a:.3f} (paired difference {a2 - a:+.3f}) at cost {c2:.1f} vs {c:.1f}: the "
            f"predictive chance that full validation on all {population} questions accepts it is {chance:.3f} < "
            f"{gate.futility:g}", False)


def cannot_pass(look: Look) -> str | None:
    """``--gate video-rsi``: why even the optimistic end of the paired difference cannot pass its rule, or None."""
    gate, a, a2, c, c2 = look.gate, look.a, look.a2, look.c, look.c2
    eps = gate.eps_for(len(look.selection))
    d_se = paired_se([r.score for r in look.parent], [r.score for r in look.candidate], len(look.selection))
    ucb = a2 - a + gate.penalty * d_se
    better = ucb > TOL and c2 <= gain_cost_bound(c, gate.alpha, None, gate.cost_ceiling) + TOL
    cheaper = ucb >= -eps - TOL and c > 0 and c2 <= (1 - gate.beta) * c + TOL
    if better or cheaper:
        return None
    return (f"score {a2:.3f} vs {a:.3f} (paired difference {a2 - a:+.3f} + {gate.penalty} x SE {d_se:.3f}) at cost "
            f"{c2:.1f} vs {c:.1f} cannot pass the gate")
