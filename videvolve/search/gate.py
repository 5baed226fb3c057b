"""The gate's acceptance rules and the aggregates they are applied to.

A is the mean per-question score on the selection set (mcq 1/0, grounding interval-set IoU; an error scores 0) and C
the mean cost per question (frames, or visual tokens; an error's cost counts).

``paired`` (the default, :func:`paired_rule`): candidate and parent are compared question by question. A gain is
accepted when the one-sided paired sign-flip test says it is one at the decision's level (alpha-invested over the
run's decisions, :mod:`videvolve.search.spending`), and so does the same comparison over the selection videos (a
cluster-robust t, :func:`videvolve.search.significance.video_t`: a gain a few videos carry does not hold on others;
from ``--gate-min-videos`` selection videos on, 8 by default: with fewer, that t keeps only the clearest gains),
and C' <= (1 + alpha) min(C, the seed's C); a cost cut when C' <= (1 - beta) C and it is non-inferior (the
one-sided upper bound of its loss, question by question and over videos, is within ``margin``). Where a gain must
hold over the videos, so must a cost bound: C' is then the upper bound of the mean cost over them, at the gate's
stated level (:mod:`videvolve.search.cost_bounds`: a look whose cost follows how busy a video is can fit on the
selection set's mean and not on other videos). Neither
when any group of questions (mcq, grounding; on a speaking world each evidence type) loses significantly at the
same level.

``video-rsi`` (the paper's rule, :func:`gate_rule`): accept if (dA > 0 and C' <= (1 + alpha) C) or
(-eps <= dA <= 0 and C' <= (1 - beta) C and C > 0). Any positive difference counts, so on a few dozen questions it
takes noise for gains about half the time.

Under either rule ``--cost-ceiling`` (a budget per question) replaces a gain's cost bound: a gain may then cost up to
the ceiling, whatever its parent's and the seed's cost; cost cuts are judged as without it.

These are the verdicts and their words; the rules the run applies are strategies (:mod:`videvolve.search.rules`),
which call them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from videvolve.evaluation.results import TaskResult
from videvolve.search.cost_bounds import costs, fit, fit_all, gain_limits, scaled
from videvolve.search.significance import FEW_VIDEOS, Paired, paired, sign_flip_p
from videvolve.tasks import Task
from videvolve.usage import VISUAL_TOKENS, CostMeasure

__all__ = ["aggregate", "bound_text", "cost_words", "gain_cost_bound", "gate_rule", "group_of", "guard_groups",
           "guarded", "mean_frames", "paired_rule", "paired_text", "rsi_text", "rule_text"]

TOL = 1e-12


def mean_frames(results: Sequence[TaskResult]) -> float:
    """Mean distinct frames per question (reported beside any cost metric)."""
    return float(np.mean([r.frames for r in results])) if results else 0.0


def aggregate(results: Sequence[TaskResult], measure: CostMeasure = VISUAL_TOKENS) -> tuple[float, float]:
    """(A, C): mean score and mean cost per question (as ``measure`` counts it)."""
    if not results:
        return 0.0, 0.0
    return float(np.mean([r.score for r in results])), float(np.mean(costs(results, measure)))


@dataclass(frozen=True)
class Decision:
    """The gate's verdict and why."""

    accept: bool
    reason: str


def gate_rule(a: float, c: float, a_new: float, c_new: float, alpha: float = 0.1, beta: float = 0.2,
              eps: float = 0.0, ceiling: float | None = None) -> Decision:
    """Apply the rule; the reason states the numbers that decided. ``ceiling``: a gain's cost bound instead."""
    da = a_new - a
    if da > TOL:
        bound, of = gain_cost_bound(c, alpha, None, ceiling), bound_text(c, alpha, None, ceiling)
        if c_new <= bound + 1e-9:
            return Decision(True, f"score +{da:.4f} at cost {c_new:.1f} <= {of}")
        if c > 0 and c_new <= (1 - beta) * c + 1e-9:  # a ceiling below the cut's bound: a cut, judged as one
            return Decision(True, f"cost {c_new:.1f} <= (1-{beta}) x {c:.1f} with score +{da:.4f}")
        return Decision(False, f"score +{da:.4f} but cost {c_new:.1f} > {of} = {bound:.1f}")
    if da >= -eps - TOL:
        if c <= 0:
            return Decision(False, f"score {da:+.4f} is no gain and the incumbent costs nothing to cut")
        if c_new <= (1 - beta) * c + 1e-9:
            return Decision(True, f"cost {c_new:.1f} <= (1-{beta}) x {c:.1f} with score {da:+.4f} within eps {eps:.4f}")
        return Decision(False, f"score {da:+.4f} is no gain, and cost {c_new:.1f} is not <= (1-{beta}) x {c:.1f} = "
                               f"{(1 - beta) * c:.1f}")
    return Decision(False, f"score {da:+.4f} is below -eps = {-eps:.4f}")


def group_of(task: Task) -> str:
    """The finest group a question is reported in: its kind, and on a speaking world the evidence its answer needs."""
    evidence = task.meta.get("evidence") if task.meta else None
    return f"{task.kind}:{evidence}" if evidence else task.kind


def guard_groups(task: Task) -> tuple[str, ...]:
    """Every group a question is guarded in: its kind; on a speaking world also its kind and evidence, and its evidence.

    No kind, no kind of evidence and no kind of question needing one may lose significantly: a loss spread over the
    cells of a kind (four mcq questions of each evidence, all lost) can be significant on the kind alone.
    """
    evidence = task.meta.get("evidence") if task.meta else None
    return (task.kind, f"{task.kind}:{evidence}", f"evidence:{evidence}") if evidence else (task.kind,)


def guarded(tasks: Sequence[Task]) -> dict[str, list[int]]:
    """Each guarded group (:func:`guard_groups`) of ``tasks`` with the positions of its questions.

    In order: the kinds, then each kind by evidence, then each evidence, each by name.
    """
    out: dict[tuple[int, str], list[int]] = {}
    for i, t in enumerate(tasks):
        for depth, g in enumerate(guard_groups(t)):
            out.setdefault((depth, g), []).append(i)
    return {g: idx for (_, g), idx in sorted(out.items())}


@dataclass(frozen=True)
class PairedDecision(Decision):
    """A verdict of the paired rule, with the comparison it rests on."""

    stats: Paired | None = None
    priced: bool = True
    """Whether the candidate's cost fits some path (a gain's bound or a cut's, over the videos where judged over them):
    where it fits none, the cost decided and no answer was tested (alpha-investing charges nothing)."""


def gain_cost_bound(c: float, alpha: float, seed_cost: float | None = None, ceiling: float | None = None) -> float:
    """The most a gain may cost: (1 + alpha) x the parent's cost, and never more than (1 + alpha) x the seed's.

    Bounding each step by its parent alone lets cost creep: three gains at 1.04x, 1.04x and 1.10x their parents
    make a harness at 1.19x the seed's cost, whose gain was never weighed against that. With a ``ceiling`` (a
    budget per question the user chose, ``--cost-ceiling``) the ceiling is the bound instead: the user has said
    what a gain may cost.
    """
    if ceiling is not None:
        return ceiling
    return (1 + alpha) * (c if seed_cost is None else min(c, seed_cost))


def bound_text(c: float, alpha: float, seed_cost: float | None = None, ceiling: float | None = None) -> str:
    """How :func:`gain_cost_bound` was reached, in words (for a verdict's reason)."""
    if ceiling is not None:
        return f"the ceiling {ceiling:.1f}"
    return f"(1+{alpha}) x {c:.1f}" if seed_cost is None or c <= seed_cost else \
        f"(1+{alpha}) x the seed's {seed_cost:.1f}"


def paired_rule(tasks: Sequence[Task], parent: Sequence[TaskResult], candidate: Sequence[TaskResult], level: float,
                measure: CostMeasure = VISUAL_TOKENS, alpha: float = 0.1, beta: float = 0.2,
                margin: float = 0.02, seed: int = 0, seed_results: Sequence[TaskResult] | None = None,
                ceiling: float | None = None, over_videos: bool | None = None,
                stated_level: float = 0.05) -> PairedDecision:
    """Judge ``candidate`` against ``parent`` on the same questions (``tasks``, in the same order) at ``level``.

    ``measure``: what C counts; ``seed_results``: the run's seed harness's results on these questions, whose cost
    bounds a gain's too; ``ceiling``: a budget per question that bounds it instead (:func:`gain_cost_bound`);
    ``over_videos``: whether a gain must hold over the questions' videos too, and its cost fit its bound over them
    (:mod:`videvolve.search.cost_bounds`) (default: where they are at least ``FEW_VIDEOS``; multi-fidelity decides it
    by the whole selection set, not by a rung's videos).

    ``level`` is the decision's, what alpha-investing gave it; the constraints a kept revision must meet whatever the
    search spent (its cost bound over the videos, no kind of question losing significantly) are held at
    ``stated_level``, the gate's stated level (``--gate-level``): a smaller level for the gain must not loosen them.
    """
    for results in (parent, candidate, *([seed_results] if seed_results is not None else [])):
        if [r.task_id for r in results] != [t.id for t in tasks]:
            raise ValueError("paired_rule needs each version's results on the same questions as `tasks`, in their "
                             "order (a paired test of results out of line compares different questions)")
    c = aggregate(parent, measure)[1]
    c2 = aggregate(candidate, measure)[1]
    videos = [t.video_id for t in tasks]
    judged = videos if (len(set(videos)) >= FEW_VIDEOS if over_videos is None else over_videos) else None
    mine, theirs = costs(candidate, measure), costs(parent, measure)
    seed_costs = None if seed_results is None else costs(seed_results, measure)
    gain_fit, gain_bound = fit_all(mine, gain_limits(theirs, alpha, seed_costs, ceiling), judged, stated_level)
    cut_fit = fit(mine, scaled(theirs, 1 - beta, f"(1-{beta}) x {c:.1f}"), judged, stated_level) if c > 0 else None
    cut_ok = cut_fit is not None and cut_fit.fits
    priced = gain_fit.fits or cut_ok
    st = paired([r.score for r in parent], [r.score for r in candidate], level, seed, margin, videos=judged)
    at = f"{len(tasks)} paired questions at level {level:.4g}"
    for group, idx in guarded(tasks).items():
        lost = [parent[i].score - candidate[i].score for i in idx]
        if (p_loss := sign_flip_p(lost, seed)) <= stated_level:  # only its loss is tested: no bounds to compute
            return PairedDecision(False, f"{group} questions lose significantly: {-sum(lost) / len(lost):+.4f} on "
                                         f"{len(lost)} (p {p_loss:.4f} <= {stated_level:.4g})", st, priced)
    over = st.over_videos
    held = f"; over {over.videos} videos p {over.p_gain:.4f}" if over else ""
    cost_said = gain_fit.said(c2)
    cut_said = cut_fit.said(c2) if cut_fit is not None and c2 <= (1 - beta) * c + 1e-9 else f"{c2:.1f}"
    if st.p_gate <= level:
        if gain_fit.fits:
            return PairedDecision(True, f"gain {st.diff:+.4f} (one-sided p {st.p_gain:.4f}{held} <= {level:.4g}, "
                                        f"{st.discordant} questions differ) at cost {cost_said} <= {gain_bound.text}"
                                        f"; {at}", st, priced)
        if not cut_ok:  # else a ceiling below the cut's bound: judged as a cut
            return PairedDecision(False, f"gain {st.diff:+.4f} (p {st.p_gain:.4f}{held}) but cost {cost_said} > "
                                         f"{gain_bound.text} = {gain_bound.mean:.1f}", st, priced)
    if cut_ok:
        if st.lower_gate >= -margin - 1e-12:
            return PairedDecision(True, f"cost {cut_said} <= (1-{beta}) x {c:.1f}, non-inferior: loss at most "
                                        f"{max(0.0, -st.lower_gate):.4f} <= margin {margin} ({st.diff:+.4f}; {at})",
                                  st, priced)
        return PairedDecision(False, f"cost {cut_said} <= (1-{beta}) x {c:.1f} but the loss may reach "
                                     f"{-st.lower_gate:.4f} > margin {margin} ({st.diff:+.4f}; {at})", st, priced)
    if st.p_gain <= level and over is not None:
        return PairedDecision(False, f"a gain question by question ({st.diff:+.4f}, one-sided p {st.p_gain:.4f}) "
                                     f"that does not hold over the {over.videos} selection videos (p "
                                     f"{over.p_gain:.4f} > {level:.4g}: a few videos carry it) and no cost cut to "
                                     f"(1-{beta}) x {c:.1f}: cost {cut_said}; {at}", st, priced)
    return PairedDecision(False, f"no gain that noise does not explain ({st.diff:+.4f}, one-sided p "
                                 f"{st.p_gain:.4f}{held} > {level:.4g}) and no cost cut to (1-{beta}) x {c:.1f}: "
                                 f"cost {cut_said}; {at}", st, priced)


def cost_words(measure: CostMeasure) -> str:
    """What C counts, in words (what an editor is told)."""
    return {"frames": "distinct frames shown to the model", "visual_tokens": "visual tokens (image and video "
            "tokens) sent to the model", "visual_tokens+text": "visual tokens sent to the model plus the weighted "
            "text tokens of the transcript read"}[measure.metric]


def paired_text(alpha: float, beta: float, measure: CostMeasure, level: float = 0.05, margin: float = 0.02,
                ceiling: float | None = None) -> str:
    """The paired rule (:func:`paired_rule`) in words, with a run's own numbers (what an editor is told)."""
    return (f"A revision is kept only if, question by question on a held-out selection set, it scores better "
            f"than its parent by more than noise explains (a one-sided paired test at level {level:g} or less, "
            f"the level shrinking as rejected revisions use up the run's budget of decisions; the gain must hold "
            f"over the selection videos too, not on one or two of them) while its mean "
            f"cost per question (C = {cost_words(measure)}) "
            + (f"stays within the budget of {ceiling:g} per question (it may cost more than its parent's, up to "
               f"that)" if ceiling is not None else
               f"grows by at most {alpha:.0%} over its parent's and stays within {alpha:.0%} of the seed's")
            + f"; or if its cost falls by at least "
            f"{beta:.0%} and its score is shown to drop by at most {margin:g}. No kind of question may lose "
            f"significantly (tested at level {level:g}, however small the gain's level has become). Small "
            f"changes that only reshuffle guesses are not kept: make changes whose effect is large and clear. "
            f"Errors score 0 and their cost counts.")


def rsi_text(alpha: float, beta: float, eps: float, measure: CostMeasure, ceiling: float | None = None) -> str:
    """The paper's rule (:func:`gate_rule`) in words, with a run's own numbers (what an editor is told)."""
    grows = f"stays within the budget of {ceiling:g}" if ceiling is not None else f"grows by at most {alpha:.0%}"
    return (f"A revision is kept only if its mean score on a held-out selection set rises while its mean cost per "
            f"question (C = {cost_words(measure)}) {grows}, or if its cost falls by at least {beta:.0%} while "
            f"its score drops by at most {eps:.3f}. Errors score 0 and their cost counts.")


def rule_text(alpha: float, beta: float, eps: float, measure: CostMeasure, rule: str = "paired", level: float = 0.05,
              margin: float = 0.02, ceiling: float | None = None) -> str:
    """A built-in rule in words by its name: :func:`paired_text` or :func:`rsi_text`.

    For callers that name one of the two; a run asks its own rule (``AcceptanceRule.text``,
    ``search/rules.py``), which is how a rule added there is told to the editor.
    """
    if rule == "paired":
        return paired_text(alpha, beta, measure, level, margin, ceiling)
    if rule == "video-rsi":
        return rsi_text(alpha, beta, eps, measure, ceiling)
    raise ValueError(f"rule_text knows the built-in rules (paired, video-rsi), not {rule!r}: ask the rule itself "
                     "(GateSettings.acceptance.text)")
