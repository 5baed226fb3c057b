"""The heuristic editor: chooses an operator by the diagnoses' categories and by what worked before (memory).

With a workspace (the default) it prototypes its best few operators with the ``trial`` tool on training tasks of
this batch and submits the one that helps most there (Meta-Harness's mandatory prototyping); the trials are capped
(operators x tasks). A lone candidate is tried too: what fails the gate's rule on the batch (a cost beyond its bound,
say) is not worth a decision. ``trials=False`` (``--no-trials``) sends its first guess to the gate.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from videvolve.editing.base import EditorInput, GateTerms, Proposal, Workspaces, read_files
from videvolve.editing.operators import CATALOGUE, Operator, config_of, scale_frames
from videvolve.editing.tools import EditorTools

MEMORY_WEIGHT = 0.5
"""How much one similar past diagnosis moves an operator's score (+ if its revision was accepted, - if not)."""


def score_operators(inp: EditorInput, catalogue: Sequence[Operator] = CATALOGUE) -> list[tuple[float, Operator]]:
    """Every applicable operator of ``catalogue`` not yet tried on this incumbent, best first (ties keep its order)."""
    counts = Counter(d.category for d in inp.diagnoses)
    n = max(1, sum(counts.values()))
    past: defaultdict[str, float] = defaultdict(float)
    for p in inp.similar:
        outcome = p.diagnosis.outcome
        if outcome and outcome.operator:
            past[outcome.operator] += MEMORY_WEIGHT * p.similarity * (1 if outcome.decision == "accepted" else -1)
    cfg = config_of(inp.files)
    scored = []
    for i, op in enumerate(catalogue):
        if tried_already(op.name, inp.tried) or op.apply(inp.files, cfg) is None:
            continue
        mine = Counter(d.category for d in inp.diagnoses if not op.kinds or d.kind in op.kinds)
        score = sum(op.weights.get(c, 0.0) * k for c, k in mine.items()) / n
        score += past[op.name] / max(1, len(inp.similar))
        scored.append((score, -i, op))
    scored.sort(key=lambda x: (x[0], x[1]), reverse=True)
    return [(s, op) for s, _, op in scored]


def base_operator(name: str) -> str:
    """The operator a proposal's name comes from (its cost-balanced variant is the same move)."""
    return name.removesuffix(BALANCED)


def headroom(gate: GateTerms, op: str = "") -> float:
    """How far above its mean cost an operator's look cost over the selection videos, as measured on this run (>= 1).

    From 8 selection videos the gate bounds the upper bound of a candidate's cost over them, not its mean: a look
    whose cost follows how busy a video is needs room under the bound, which a trial of a few tasks cannot show.
    """
    return max(1.0, gate.headroom.get(base_operator(op), 1.0))


def gain_bound(c: float, gate: GateTerms, op: str = "") -> float:
    """The most a gain over a parent costing ``c`` may cost on a trial: the run's budget, else (1 + alpha) x ``c``.

    As the gate's ``search.gate.gain_cost_bound`` (``--cost-ceiling`` replaces the relative bound), less the
    operator's :func:`headroom`; the seed's cost, which the gate also bounds a gain by, is not the editor's to know.
    """
    return (gate.ceiling if gate.ceiling is not None else (1 + gate.alpha) * c) / headroom(gate, op)


def cut_bound(c: float, gate: GateTerms, op: str = "") -> float:
    """The most a cut of a parent costing ``c`` may cost on a trial: (1 - beta) x ``c``, less the :func:`headroom`."""
    return (1 - gate.beta) * c / headroom(gate, op)


def passes_on_trial(report: dict[str, Any], gate: GateTerms | None, op: str = "") -> bool:
    """Whether the gate's rule, applied to a trial of ``op`` against the parent on the same tasks, would accept."""
    if gate is None:
        return True
    c, c_new = report["parent_mean_cost"], report["mean_cost"]  # as the gate counts it (the run's cost metric)
    gain = report["mean_difference_vs_parent"] or 0.0
    if gain > 0 and c_new <= gain_bound(c, gate, op) + 1e-9:
        return True
    return bool(gain >= -gate.tolerance and c > 0 and c_new <= cut_bound(c, gate, op) + 1e-9)


BALANCED = "+fewer_frames"
"""The suffix of an operator's cost-balanced variant (the same change with fewer frames)."""


def tried_already(name: str, tried: list[str]) -> bool:
    """Whether an operator, or its cost-balanced variant, was already proposed on this version."""
    return name in tried or name + BALANCED in tried


def balanced(op: Operator, factor: float) -> Operator:
    """``op``, then fewer frames (``factor`` of them), so that a revision that helps fits the gate's cost bound.

    A move for some question kinds (``op.kinds``) takes the frames from those kinds alone: the others keep their
    look (taking them from every kind paid for an mcq gain with grounding's frames, a loss no trial of a few
    questions shows).
    """
    def apply(files: dict[str, str], cfg: dict[str, Any]) -> dict[str, str] | None:
        first = op.apply(files, cfg)
        if first is None:
            return None
        merged = {**files, **first}
        fewer = scale_frames(factor, op.kinds)(merged, config_of(merged))
        return {**first, **fewer} if fewer else None

    return Operator(op.name + BALANCED, f"{op.summary}, with {factor:.0%} of the frames so that its cost "
                    "stays within the gate's bound", op.weights, apply)


def cost_target(report: dict[str, Any], op: Operator, gate: GateTerms) -> float | None:
    """The mean cost a prototype that failed its trial on cost alone should come down to, or None (nothing to balance).

    A gain costing more than a gain may: 0.95 x the allowed cost. A cost cut that kept the score (within the rule's
    ``tolerance``) and cut, but not as deep as a cut must go (``(1 - beta)`` x the parent's): 0.95 x that bound. The
    5 % margin, since cost does not shrink in proportion to frames: a 20 % frame cut whose final look does not shrink
    with the frames otherwise lands at 0.81 x and is turned down every time.
    """
    c, c_new = report["parent_mean_cost"], report["mean_cost"]
    gain = report["mean_difference_vs_parent"] or 0.0
    if c <= 0 or c_new <= 0:
        return None
    if gain > 0:
        return 0.95 * gain_bound(c, gate, op.name)
    if op.cost_cut and gain >= -gate.tolerance and cut_bound(c, gate, op.name) < c_new < c:
        return 0.95 * cut_bound(c, gate, op.name)
    return None


def balance_factor(report: dict[str, Any], op: Operator, gate: GateTerms) -> float | None:
    """The share of its frames a prototype that failed its trial on cost alone keeps, or None (nothing to balance).

    The ratio of :func:`cost_target` to the trial's cost; for a move of some kinds, the share of those kinds' frames
    (the others' cost stays as it is), None when even none of them would bring the cost within the bound.
    """
    target = cost_target(report, op, gate)
    if target is None:
        return None
    c_new = report["mean_cost"]
    if not op.kinds:
        return target / c_new
    rows = report.get("per_task") or []  # the move's kinds pay alone: their share of the cost is what may shrink
    own = sum(r["cost"] for r in rows if r.get("kind") in op.kinds) / max(1, len(rows))
    factor = (target - (c_new - own)) / own if own > 0 else 0.0
    return factor if factor > 0 else None


def secant_factor(factor: float, full: dict[str, Any], short: dict[str, Any], op: Operator, gate: GateTerms
                  ) -> float | None:
    """A second, deeper share of frames for a balanced prototype whose trial still costs too much, or None.

    Cost is not proportional to frames (a look's final prompt, its identification frames, do not shrink with the
    scan): the line through the unbalanced trial's cost (all frames) and the balanced one's (``factor`` of them) is
    followed down to the target. None when the balanced trial passes on cost or lost what was to be kept.
    """
    target = None if passes_on_trial(short, gate, op.name) else cost_target(short, op, gate)
    if target is None or not 0 < factor < 1:
        return None
    slope = (full["mean_cost"] - short["mean_cost"]) / (1 - factor)  # cost per unit of the frames' share
    if slope <= 0:
        return None
    deeper = factor - (short["mean_cost"] - target) / slope
    return deeper if 0 < deeper < factor else None


def candidates(inp: EditorInput, width: int = 3, catalogue: Sequence[Operator] = CATALOGUE
               ) -> list[tuple[float, Operator]]:
    """The operators worth trying, best first: those the diagnoses call for, and the best cost cut.

    The search moves along the cost axis in both directions: beside the ``width - 1`` operators the diagnoses call
    for most, the best untried cost cut is tried too (the trials and the gate decide whether it keeps the score).
    """
    ranked = score_operators(inp, catalogue)
    cuts = [(s, op) for s, op in ranked if op.cost_cut]
    called = [(s, op) for s, op in ranked if s > 0 and not op.cost_cut] if inp.diagnoses else []
    return called[: max(1, width - 1) if cuts else width] + cuts[:1]


class HeuristicEditor:
    """Works offline; every proposal is a bounded diff of the incumbent's files.

    ``catalogue``: the moves it chooses from (default :data:`~videvolve.editing.operators.CATALOGUE`; a test or an
    experiment passes its own, e.g. ``(*CATALOGUE, my_operator)``, and injects the editor as ``run.editor``).
    """

    def __init__(self, trials: bool = False, operators: int = 3, tasks: int = 4,
                 catalogue: Sequence[Operator] = CATALOGUE) -> None:
        self.trials, self.operators, self.tasks = trials, operators, tasks
        self.catalogue = tuple(catalogue)
        self.last_failure: str | None = None

    def propose(self, inp: EditorInput, workspaces: Workspaces | None = None) -> Proposal | None:
        """The best operator (by trial on the batch when trials are on); None when nothing is left."""
        positive = candidates(inp, self.operators, self.catalogue)
        if not positive:
            self.last_failure = ("the heuristic editor has no operator left to try on this version"
                                 if not score_operators(inp, self.catalogue) else
                                 "no untried operator addresses this batch's diagnoses")
            return None
        tools = workspaces.open(inp) if workspaces is not None else None
        if tools is None or not self.trials:
            score, op = positive[0]
            proposal = self._proposal(inp, op, score)
            if tools is not None:
                tools.log({"kind": "decision", "operator": op.name, "why": "first choice (no trials)"})
                proposal.workspace = str(tools.root)
            return proposal
        return self._prototype(inp, tools, positive[: self.operators])

    def _proposal(self, inp: EditorInput, op: Operator, score: float, trial: str = "") -> Proposal:
        edits = op.apply(inp.files, config_of(inp.files)) or {}
        counts = Counter(d.category for d in inp.diagnoses)
        why = ", ".join(f"{k} {v}" for k, v in counts.most_common()) or "no failures in this batch"
        return Proposal(
            operator=op.name, rationale=f"{op.summary} (score {score:.2f}; diagnoses: {why}){trial}",
            applies_when="; ".join(sorted({d.applies_when for d in inp.diagnoses if op.weights.get(d.category)}))[:500],
            preserve="; ".join(sorted({d.preserve for d in inp.diagnoses}))[:300], edits=dict(edits),
            diagnoses=[d.id for d in inp.diagnoses if op.weights.get(d.category)])

    def _balanced(self, inp: EditorInput, tools: EditorTools, tasks: list[str], parent: dict[str, str],
                  tried: list[Any]) -> list[Any]:
        """For each prototype that misses the gate's cost bound only: the same with fewer frames, tried.

        See :func:`balance_factor`: the gain of looking better is kept where it survives looking less often, and a
        cut that kept the score but stopped just short of the cut's bound goes the rest of the way; one still over the
        bound goes once more (:func:`secant_factor`).
        """
        out: list[Any] = []
        gate = inp.gate
        for j, (passes, _, _, _, score, op, report) in enumerate(list(tried)):
            factor = None if passes or gate is None else balance_factor(report, op, gate)
            if factor is None or gate is None:
                continue
            variant = balanced(op, factor)
            rep = self._trial_variant(inp, tools, tasks, parent, variant)
            if rep is None:  # nothing to balance, balanced back to the parent itself (no trial spent), or none ran
                continue
            deeper = secant_factor(factor, report, rep, op, gate)
            if deeper is not None:  # still over the bound: once more, along the line its two trials draw
                further = balanced(op, deeper)
                again = self._trial_variant(inp, tools, tasks, parent, further)
                if again is not None:
                    variant, rep = further, again
            out.append((passes_on_trial(rep, inp.gate, op.name), rep["mean_difference_vs_parent"] or 0.0,
                        -rep["mean_cost"], -len(tried) - j, score, variant, rep))
        return out

    def _trial_variant(self, inp: EditorInput, tools: EditorTools, tasks: list[str], parent: dict[str, str],
                       variant: Operator) -> dict[str, Any] | None:
        """The trial report of ``variant`` in the candidate (the parent written back after), or None.

        None: no trial ran, or the variant changes nothing (it balanced back to the parent itself).
        """
        edits = variant.apply(inp.files, config_of(inp.files))
        if not edits or all(inp.files.get(path) == content for path, content in edits.items()):
            return None
        for path, content in edits.items():
            tools.call("write_file", {"path": f"candidate/{path}", "content": content})
        text, ok = tools.call("trial", {"tasks": tasks})
        for path in edits:
            tools.call("write_file", {"path": f"candidate/{path}", "content": parent.get(path, "")})
        return json.loads(text) if ok else None

    def _trial_tasks(self, inp: EditorInput, tools: EditorTools) -> list[str]:
        """Failed and passed tasks of the batch, alternately.

        On failures alone any change that reshuffles guesses looks like a fix (they can only get better), and what a
        change breaks would never show.
        """
        failed = list(dict.fromkeys(d.task_id for d in inp.diagnoses if d.task_id in tools.env.tasks))
        rest = [t for t in tools.env.tasks if t not in failed]
        mixed = [t for pair in zip(failed, rest, strict=False) for t in pair]
        longer = failed if len(failed) > len(rest) else rest
        mixed += longer[min(len(failed), len(rest)):]
        return mixed[: self.tasks]

    def _prototype(self, inp: EditorInput, tools: EditorTools, ops: list[tuple[float, Operator]]) -> Proposal | None:
        """Trial each operator on the same tasks; submit the one the gate's rule would take there, gaining most."""
        tasks = self._trial_tasks(inp, tools)
        parent = read_files(tools.env.parent_dir)
        tried: list[tuple[bool, float, float, int, float, Operator, dict[str, Any]]] = []
        for i, (score, op) in enumerate(ops):
            edits = op.apply(inp.files, config_of(inp.files)) or {}
            for path, content in edits.items():
                tools.call("write_file", {"path": f"candidate/{path}", "content": content})
            text, ok = tools.call("trial", {"tasks": tasks})
            for path in edits:  # back to the parent for the next prototype
                tools.call("write_file", {"path": f"candidate/{path}", "content": parent.get(path, "")})
            if not ok:
                tools.log({"kind": "decision", "operator": op.name, "why": f"no trial: {text[:300]}"})
                continue
            report = json.loads(text)
            gain = report["mean_difference_vs_parent"] or 0.0
            tried.append((passes_on_trial(report, inp.gate, op.name), gain, -report["mean_cost"], -i, score, op,
                          report))
        if not tried:
            score, op = ops[0]
            return self._proposal(inp, op, score, " (no trial could run)").model_copy(
                update={"workspace": str(tools.root)})
        tried += self._balanced(inp, tools, tasks, parent, tried)
        tried.sort(key=lambda x: x[:4], reverse=True)
        passes, gain, _, _, score, op, report = tried[0]
        if not passes and (inp.gate is None or inp.gate.spends_wealth):
            # every decision spends the run's alpha-wealth: what fails the rule on the batch is not worth a decision
            self.last_failure = ("no prototype passes the gate's rule on the batch's trials: " + ", ".join(
                f"{t[5].name} {t[1]:+.3f} at cost {t[6]['mean_cost']:.0f} vs {t[6]['parent_mean_cost']:.0f}"
                for t in tried))
            tools.log({"kind": "decision", "operator": None, "why": self.last_failure})
            return None
        others = ", ".join(f"{t[5].name} {t[1]:+.3f}{'' if t[0] else ' (fails the rule)'}" for t in tried[1:])
        note = (f"; trial on {len(tasks)} training tasks: {gain:+.3f} vs the parent, {report['mean_frames']:.1f} "
                f"frames, {'passes' if passes else 'fails'} the gate's rule there" +
                (f" (others: {others})" if others else ""))
        tools.log({"kind": "decision", "operator": op.name, "why": note.lstrip("; ")})
        proposal = self._proposal(inp, op, score, note)
        proposal.workspace = str(tools.root)
        for rel, new in proposal.edits.items():  # the workspace shows what was submitted
            tools.call("write_file", {"path": f"candidate/{rel}", "content": new or ""})
        return proposal
